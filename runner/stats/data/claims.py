"""The two claims of a statistical rule and the two one-sided bounds that invert them (docs/statistics.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any


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
    # how far (metric units) pinning moved the GO / NO-GO bound onto the side of its threshold that its test chose:
    # root-finding noise, except where ``method`` says a bound was set to its threshold (McNemar at margin 0)
    moved_go: float = 0.0
    moved_no_go: float = 0.0
    least_n: int = 0  # the fewest samples the rule claims on, where it withheld a claim for too few (0: none)

    @property
    def ci(self) -> tuple[float, float] | None:
        return None if self.low is None or self.high is None else (self.low, self.high)

    def agreeing(self, margin: float, tolerance: float, higher_is_better: bool) -> "Claims":
        """The bounds moved, by the least float step, to the side of -m and -t that the claims decided.

        A bound is computed apart from its test's p-value (a quantile, a bisection), so at an exact tie the
        two can disagree in the last bit; the test decides, and the bound follows it. The moves are added to
        :attr:`moved_go` and :attr:`moved_no_go`."""
        if self.ci is None:
            return self
        raw_low, raw_high = gain_low, gain_high = oriented(self.low, self.high, higher_is_better)
        if self.within != (gain_low > -tolerance):
            gain_low = math.nextafter(-tolerance, math.inf) if self.within else -tolerance
        if self.regression != (gain_high < -margin):
            gain_high = math.nextafter(-margin, -math.inf) if self.regression else -margin
        low, high = oriented(gain_low, gain_high, higher_is_better)
        if (low, high) == (self.low, self.high):
            return self
        return replace(self, low=low, high=high, moved_go=self.moved_go + abs(gain_low - raw_low),
                       moved_no_go=self.moved_no_go + abs(gain_high - raw_high))


@dataclass(frozen=True)
class DeclaredRule:
    """A rule as its module declares it: when it decides, the claims it prints, and the bounds that invert them.
    ``name`` and ``claims`` are the words its calibration cells carry (benchmarks/calibration_grid), so a claim
    without a cell is visible (tests/stats/test_calibration.py)."""

    name: str
    decides: str
    claims: tuple[str, ...]
    bounds: str


def oriented(low: float, high: float, higher_is_better: bool) -> tuple[float, float]:
    """An interval for new - reference turned into one for the gain (-D, negative is worse), and back:
    the map is its own inverse."""
    return (low, high) if higher_is_better else (-high, -low)


def paired_claims(result: Any, within_result: Any) -> Claims:
    """Paired betting, t or bootstrap: ``result`` tested the margin, ``within_result`` the tolerance; each side of
    the interval is the bound that inverts its own test (the bad side from ``result``, the good side from
    ``within_result``)."""
    hib = result.higher_is_better
    gain_low = oriented(*within_result.ci, hib)[0]
    gain_high = oriented(*result.ci, hib)[1]
    low, high = oriented(gain_low, gain_high, hib)
    return Claims(regression=not result.passed, within=within_result.passed, low=low, high=high,
                  method=f"{result.ci_method} (both sides)", p_within=within_result.p_value,
                  moved_go=within_result.pinned, moved_no_go=result.pinned)
