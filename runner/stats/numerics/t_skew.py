"""How far skewed differences can push a one-sided paired t claim past alpha: the one-term Edgeworth expansion of the
studentized mean at the sample skewness, and which claims it withholds.

The studentized mean ``T`` of n differences with skewness ``g`` has (Hall 1992, "The Bootstrap and Edgeworth
Expansion", section 2.6) ``P(T <= x) = Phi(x) + g (2 x^2 + 1) phi(x) / (6 sqrt(n)) + O(1 / n)``. A one-sided test at
alpha therefore errs about ``g (2 z^2 + 1) phi(z) / (6 sqrt(n))`` too often (``z = z(1 - alpha)``): on the low side
(a NO-GO: the mean shown below the margin) when the gains are skewed to the right (rare large gains a small sample
misses), on the high side (a GO) when they are skewed to the left (rare large losses). A claim is withheld when that
estimate, at the sample skewness, exceeds a limit (``stats.t_skew_limit``); the limit comes from the calibration grid
(``benchmarks/calibration_grid/unbounded.py``). A tail too rare to appear in the sample at all is beyond any rule
that looks at the data (Bahadur & Savage 1956): the grid says at which n each of its shapes is caught.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from runner.stats.numerics.normal import z

DEFAULT_LIMIT = 0.0025
"""The largest excess over alpha the expansion may put on a claim: half the calibration's 0.005 allowance, since the
sample skewness underestimates a rare tail (at 0.005 the grid's worst cells sat at 0.051)."""


def sample_skewness(values: Sequence[float]) -> float:
    """``g1 = m3 / m2^1.5`` with central moments over n (0 when the values do not vary)."""
    n = len(values)
    if n == 0:
        return 0.0
    mean = math.fsum(values) / n
    m2 = math.fsum((v - mean) ** 2 for v in values) / n
    if m2 <= 0.0:
        return 0.0
    m3 = math.fsum((v - mean) ** 3 for v in values) / n
    return m3 / m2 ** 1.5


def excess(skew: float, n: int, alpha: float, low_side: bool) -> float:
    """The expansion's excess over alpha of a one-sided test at ``alpha`` on ``n`` differences of skewness ``skew``:
    ``low_side`` for a test that rejects when the mean is low (NO-GO), else high (GO); negative: conservative."""
    q = abs(z(alpha))
    size = skew * (2.0 * q * q + 1.0) * math.exp(-0.5 * q * q) / math.sqrt(2.0 * math.pi) / (6.0 * math.sqrt(n))
    return size if low_side else -size


@dataclass(frozen=True)
class SkewCheck:
    """The sample skewness of the gains (new - reference, oriented so that higher is better) and the expansion's
    excess for each claim: NO-GO (low side) and GO (high side)."""

    skew: float
    n: int
    no_go_excess: float
    go_excess: float
    limit: float

    @property
    def withhold_no_go(self) -> bool:
        return self.no_go_excess > self.limit

    @property
    def withhold_go(self) -> bool:
        return self.go_excess > self.limit

    def note(self, which: str) -> str:
        """Why ``which`` ("NO-GO", "GO", "NO-GO and GO") is withheld, and what to do."""
        worst = max(self.no_go_excess, self.go_excess)
        side = "large gains" if self.skew > 0 else "large losses"
        least = math.ceil(self.n * (worst / self.limit) ** 2)
        return (f"no {which} claim: the differences are skewed (sample skewness {self.skew:+.2f}, rare {side}), so the "
                f"paired t-test's one-sided error can pass alpha by about {worst:.4f} at n={self.n} (Edgeworth), "
                f"more than stats.t_skew_limit={self.limit:g}; about {least} samples of this shape would be enough, "
                "or declare the task's score bounds (the betting test holds at every n)")


def check(gains: Sequence[float], alpha: float, limit: float = DEFAULT_LIMIT) -> SkewCheck:
    """The skewness check of a paired t-test at ``alpha`` on ``gains`` (one per sample, higher is better)."""
    g = sample_skewness(gains)
    n = len(gains)
    return SkewCheck(g, n, excess(g, n, alpha, True), excess(g, n, alpha, False), limit)
