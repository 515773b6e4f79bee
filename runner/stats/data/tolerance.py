"""The drop a user tolerates (the GO claim's threshold), in points, and the checks of how it is given."""

from __future__ import annotations

from dataclasses import dataclass

from runner.contract.errors import ConfigError



UNITS = ("points", "percent")


@dataclass(frozen=True)
class Tolerance:
    """The drop the user tolerates, in metric points, and where that figure came from."""

    points: float
    source: str

    def describe(self) -> str:
        return f"{self.points:.4g} points ({self.source})"


MIN_PERCENT_TOLERANCE = 1.0
"""A percent tolerance below 1 reads as a fraction written where a percent was meant (0.05 for 5 %); a drop of
under 1 % of the reference is beyond the reach of any task's n (0.8 points of an 80 % accuracy needs about 10,000
paired samples), so refusing it costs no real use."""


MIN_BINARY_TOLERANCE = 0.5
"""The same for a 0/100 metric's tolerance in points: 0.05 points reads as a fraction of 5 points."""


def check_percent(value: float, where: str, fraction_below: float | None) -> None:
    """A percent of the reference must be below 100 (a drop of the whole score accepts or refuses every
    result) and, for a tolerance, not look like a fraction."""
    if value >= 100:
        claim = "every drop would be within it" if fraction_below is not None else "no drop could exceed it"
        raise ConfigError(f"a percent of the reference of 100 or more is the whole score: {claim}", where=where, given=f"{value:g} percent",
                          allowed="a share of the reference below 100, e.g. 5 (percent)",
                          fix=f"give the drop you tolerate, e.g. {where}=5, or use points ({where}_unit=points)")
    if fraction_below is not None and 0 < value < fraction_below:
        raise ConfigError("a percent tolerance this small looks like a fraction", where=where,
                          given=f"{value:g} percent (of the reference)",
                          allowed=f"a percent from {fraction_below:g} to below 100, e.g. 5 for 5 %",
                          fix=f"write percent as percent: {where}={value * 100:g} for {value:.0%}; a smaller "
                              "tolerance is beyond the reach of any task's sample count")


def check_binary_range(tolerance: float, margin: float, where: str) -> None:
    """A 0/100 metric (accuracy in percent points) changes by at most 100 points: a tolerance of 100 or more
    would make every result GO, a margin of 100 or more would make NO-GO impossible; a tolerance under
    :data:`MIN_BINARY_TOLERANCE` reads as a fraction. Checked once the scale is known (the reference's per-sample
    scores), before any request."""
    if tolerance >= 100 or margin >= 100:
        name, value = ("tolerance", tolerance) if tolerance >= 100 else ("margin", margin)
        raise ConfigError(f"the {name} is outside the metric's range", where=where,
                          given=f"{name} {value:g} points on a 0/100 metric (a difference lies within -100..100)",
                          allowed="a tolerance and a margin below 100 points, e.g. 2",
                          fix="give the drop in points of the metric (2 = two accuracy points), or a percent of the "
                              "reference with the unit percent")
    if 0 < tolerance < MIN_BINARY_TOLERANCE:
        raise ConfigError("a tolerance this small on a 0/100 metric looks like a fraction", where=where,
                          given=f"tolerance {tolerance:g} points of a metric in percent points",
                          allowed=f"a tolerance from {MIN_BINARY_TOLERANCE:g} to below 100 points, e.g. 2",
                          fix=f"if {tolerance:g} meant {tolerance:.0%}, give {tolerance * 100:g} (points of the "
                              "0..100 scale)")
