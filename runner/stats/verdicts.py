"""Three verdicts: what the data showed about the drop, and how a CI system should read it.

D is the drop of the new build against its reference (oriented so that a positive D is worse), m >= 0
the regression margin and t > 0 the tolerance (docs/statistics.md, "Three verdicts"):

* **NO-GO**: D > m is shown at level alpha (the regression rules, unchanged);
* **GO**: D < t is shown at level alpha (the one-sided 1 - alpha upper bound on D is below t);
* **INCONCLUSIVE**: neither; the report then says how many more samples would decide.

Both claims can hold at once ("worse, but within tolerance"); ``stats.gate`` says which one the
verdict follows. ``stats.verdicts=two_way`` reproduces TensorRT-LLM's pass/fail (PASS = GO or
INCONCLUSIVE) and ``stats.on_inconclusive`` maps INCONCLUSIVE to a pass or a failure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from runner.contract.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION, ConfigError
from runner.contract.task_config import TaskConfig
from runner.stats.unpaired.ztest import compute_theta
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal

GO, NO_GO, INCONCLUSIVE = "GO", "NO-GO", "INCONCLUSIVE"
VERDICTS = (GO, NO_GO, INCONCLUSIVE)
MODES = ("three_way", "two_way")
ON_INCONCLUSIVE = ("inconclusive", "pass", "fail")
UNITS = ("points", "percent")
WORDS = {GO: "go", NO_GO: "no-go", INCONCLUSIVE: "inconclusive"}
"""The verdict in lower case: MLflow's ``verdict`` tag, JUnit and summary rows."""
CODES = {"go": 0, "no-go": 1, "inconclusive": 2, "no verdict": 3, "failed": 4}
"""The ``verdict`` metric (sortable in MLflow's runs table); the ``verdict`` tag says it in words."""


@dataclass(frozen=True)
class Tolerance:
    """The drop the user tolerates, in metric points, and where that figure came from."""

    points: float
    source: str

    def describe(self) -> str:
        return f"{self.points:.4g} points ({self.source})"


def resolve_tolerance(stats: Any, task: TaskConfig, reference: float) -> Tolerance:
    """``stats.tolerance``, else the task's ``tolerance``, else the task's designed theta.

    The designed theta is the minimum detectable drop of the task's registered design (its
    ``design_num_samples``, alpha, beta and sigma), never the theta of the run at hand: an imprecise
    run must not claim GO by being imprecise."""
    if stats.tolerance is not None:
        value, unit, where = float(stats.tolerance), stats.tolerance_unit, "stats.tolerance"
    elif task.tolerance is not None:
        value, unit, where = float(task.tolerance), "points", f"task {task.name}'s tolerance"
    else:
        n = task.design_num_samples or task.num_samples
        theta = compute_theta(n, task.sigma, task.alpha, task.beta)
        return Tolerance(theta, f"designed theta of task {task.name}: n={n}, alpha {task.alpha:g}, "
                                f"beta {task.beta:g}, sigma {task.sigma:g}")
    if unit == "percent":
        return Tolerance(abs(reference) * value / 100.0, f"{where} = {value:g}% of the reference {reference:g}")
    return Tolerance(value, where)


def validate(stats: Any) -> None:
    """Raise :class:`ConfigError` for a verdict setting that cannot be used."""
    for key, value, allowed in (("verdicts", stats.verdicts, MODES), ("on_inconclusive", stats.on_inconclusive,
                                                                      ON_INCONCLUSIVE),
                                ("tolerance_unit", stats.tolerance_unit, UNITS)):
        if value not in allowed:
            raise ConfigError(f"unknown value of stats.{key}", where=f"stats.{key}", given=str(value),
                              allowed=", ".join(allowed))
    tol = stats.tolerance
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float)) or not math.isfinite(tol)
                            or tol <= 0):
        raise ConfigError("the tolerance must be a finite number > 0", where="stats.tolerance", given=repr(tol),
                          allowed="a tolerated drop, e.g. 2 (points) or 3 with stats.tolerance_unit=percent; "
                                  "null: the task's designed theta")
    if tol is not None and stats.tolerance_unit == "percent":
        check_percent(float(tol), "stats.tolerance", fraction_below=MIN_PERCENT_TOLERANCE)


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


@dataclass(frozen=True)
class Claims:
    """The two one-sided claims of a statistical rule, and the two one-sided ``1 - alpha`` bounds for
    new - reference that invert them: the NO-GO bound lies past -m on the bad side exactly when NO-GO
    is shown, the GO bound inside -t exactly when GO is. Each bound covers the true difference with
    probability at least 1 - alpha, so the two together are a two-sided interval of level at least
    1 - 2 alpha (90% at alpha 0.05)."""

    regression: bool  # D > m shown
    within: bool  # D < t shown
    low: float | None  # the lower bound for new - reference, metric units (None: no bounds)
    high: float | None  # the upper bound
    method: str  # how each bound was built
    p_within: float | None  # p-value of H0: D >= t (None: the claim has no p-value, e.g. a repeated interval)

    @property
    def ci(self) -> tuple[float, float] | None:
        return None if self.low is None or self.high is None else (self.low, self.high)

    def agreeing(self, margin: float, tolerance: float, higher_is_better: bool) -> "Claims":
        """The bounds moved, by the least float step, to the side of -m and -t that the claims decided.

        A bound is computed apart from its test's p-value (a quantile, a bisection), so at an exact tie the
        two can disagree in the last bit; the test decides, and the bound follows it."""
        if self.ci is None:
            return self
        gain_low, gain_high = oriented(self.low, self.high, higher_is_better)
        if self.within != (gain_low > -tolerance):
            gain_low = math.nextafter(-tolerance, math.inf) if self.within else -tolerance
        if self.regression != (gain_high < -margin):
            gain_high = math.nextafter(-margin, -math.inf) if self.regression else -margin
        low, high = oriented(gain_low, gain_high, higher_is_better)
        return self if (low, high) == (self.low, self.high) else replace(self, low=low, high=high)


def oriented(low: float, high: float, higher_is_better: bool) -> tuple[float, float]:
    """An interval for new - reference turned into one for the gain (-D, negative is worse), and back:
    the map is its own inverse."""
    return (low, high) if higher_is_better else (-high, -low)


def combine(regression: bool, within: bool, gate: str) -> str:
    """The verdict of the two claims; when both were shown, ``gate`` decides (``regression`` follows the
    shown regression, ``noninferiority`` the shown tolerance)."""
    if regression and within:
        return NO_GO if gate == "regression" else GO
    if regression:
        return NO_GO
    return GO if within else INCONCLUSIVE


def inconclusive_fails(mode: str, on_inconclusive: str) -> bool:
    """Whether an INCONCLUSIVE verdict counts as a failure (a failed JUnit case) under these settings."""
    return exit_status(INCONCLUSIVE, mode, on_inconclusive) != EXIT_OK


def reported(verdict: str, mode: str) -> str:
    """What the report calls the verdict: the three-way name, or TensorRT-LLM's PASS / FAIL."""
    if mode == "two_way":
        return "FAIL" if verdict == NO_GO else "PASS"
    return verdict


def exit_status(verdict: str, mode: str, on_inconclusive: str) -> int:
    """0 GO (or PASS), 3 NO-GO (or FAIL), 4 INCONCLUSIVE unless mapped to a pass or a failure."""
    if verdict == NO_GO:
        return EXIT_REGRESSION
    if verdict == GO or mode == "two_way":
        return EXIT_OK
    return {"pass": EXIT_OK, "fail": EXIT_REGRESSION}.get(on_inconclusive, EXIT_INCONCLUSIVE)


def decisive(bound: float, threshold: float, shown: bool, above: bool, decimals: int = 3) -> tuple[str, str]:
    """A bound and its threshold in print, with the digits that decide: ``(bound, threshold)`` as signed decimals.

    ``above``: the claim is shown when the bound is above the threshold (a lower bound, rounded down),
    else below it (an upper bound, rounded up); the threshold is rounded to nearest. Rounding the bound
    outwards never puts an unshown claim's bound on the deciding side; digits are added (from
    ``decimals``) until a shown claim's bound prints strictly past its printed threshold, so a GO bound
    never prints equal to the tolerance."""

    threshold += 0.0  # -0.0 prints as 0
    if not math.isfinite(bound):  # an unbounded side (nothing can be shown): no digits decide
        return ("+inf" if bound > 0 else "-inf"), f"{Decimal(threshold).quantize(Decimal(1).scaleb(-decimals)):+f}"
    exact_b, exact_t = Decimal(bound), Decimal(threshold)
    for k in range(decimals, 40):
        q = Decimal(1).scaleb(-k)
        b = exact_b.quantize(q, ROUND_FLOOR if above else ROUND_CEILING)
        t = exact_t.quantize(q, ROUND_HALF_EVEN)
        if shown == (b > t if above else b < t):
            return f"{b:+f}", f"{t:+f}"
    return f"{exact_b:+f}", f"{exact_t:+f}"
