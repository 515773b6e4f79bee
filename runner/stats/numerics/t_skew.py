"""How far skewed differences can push a one-sided paired t claim past alpha, and which claims that withholds: the
one-term Edgeworth expansion of the studentized mean at the sample skewness.

The studentized mean ``T`` of n differences with skewness ``g`` has (Hall 1992, "The Bootstrap and Edgeworth
Expansion", section 2.6) ``P(T <= x) = Phi(x) + g (2 x^2 + 1) phi(x) / (6 sqrt(n)) + O(1 / n)``: a one-sided test
errs too often on the low side (a NO-GO: the mean shown below the margin) when the gains are skewed to the right
(rare large gains a small sample misses), on the high side (a GO) when they are skewed to the left (rare large
losses). A claim of the paired t-test stands only when, at the observed statistic ``x`` (oriented so that the claim is a
large value) and the sample skewness in the claim's harmful direction,

* the term ``g (2 x^2 + 1) phi(x) / (6 sqrt(n))`` is at most ``stats.t_skew_limit``: past it the expansion's first
  term is too large for its remainder to be small (sparse changes, heavy tails), and
* the t-test's p-value plus that term (the skewness-corrected p-value, never below the t-test's) is below alpha.

Overwhelming evidence (a large ``x``) keeps its claim whatever the skewness: the term vanishes with ``phi(x)``.

The limit comes from the calibration grid (``benchmarks/calibration_grid/unbounded.py``, ``benchmarks/t_skew.py``).
A tail too rare to appear in the sample at all is beyond any rule that looks at the data (Bahadur & Savage 1956):
a sample of 40 shows no trace of a change carried by 5% of the samples 13% of the time, and its t-test then claims
on the other 95% alone (false GO / NO-GO 0.12-0.13 on the grid's skewed shape). So no claim is made below
:func:`~runner.stats.numerics.rare_share.min_samples`: the n from which a tail of ``stats.t_rare_share`` of the samples is missed at most alpha of the
time (59 at 5% and alpha 0.05).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from runner.stats.numerics.normal import t_quantile, z
from runner.stats.numerics.rare_share import min_samples

DEFAULT_LIMIT = 0.005
"""The largest term a claim may carry at its statistic (benchmarks/t_skew.py measures it against others)."""

DEFAULT_RARE_SHARE = 0.05
"""The rarest share of samples whose change the t-test must see before it claims (the grid's rarest tail)."""


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


def term(skew: float, x: float, n: int, low_side: bool) -> float:
    """The expansion's first term at the oriented statistic ``x``: how much more often than the normal tail says a
    one-sided test rejects there; ``low_side`` for a test that rejects when the mean is low (NO-GO), else high (GO);
    negative: conservative."""
    harm = skew if low_side else -skew
    return harm * (2.0 * x * x + 1.0) * math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi) / (6.0 * math.sqrt(n))


def excess(skew: float, n: int, alpha: float, low_side: bool) -> float:
    """The term at the critical value ``z(1 - alpha)``: the first-order excess over alpha of a one-sided test at
    ``alpha`` on ``n`` differences of skewness ``skew``."""
    return term(skew, abs(z(alpha)), n, low_side)


def statistic(p: float, n: int) -> float:
    """The oriented t statistic whose one-sided p-value on ``n - 1`` degrees of freedom is ``p``."""
    return t_quantile(1.0 - p, n - 1)


@dataclass(frozen=True)
class SkewCheck:
    """The sample skewness of the gains (new - reference, oriented so that higher is better) and, for each claim,
    the expansion's term at its observed statistic and its skewness-corrected p-value."""

    skew: float
    n: int
    alpha: float
    limit: float
    no_go_term: float
    go_term: float
    no_go_p: float
    go_p: float
    rare_share: float = DEFAULT_RARE_SHARE

    @property
    def needed(self) -> int:
        """The fewest samples on which the t-test claims (:func:`min_samples`)."""
        return min_samples(self.alpha, self.rare_share)

    @property
    def too_few(self) -> bool:
        return self.n < self.needed

    @property
    def withhold_no_go(self) -> bool:
        return self.too_few or self.no_go_term > self.limit or self.no_go_p >= self.alpha

    @property
    def withhold_go(self) -> bool:
        return self.too_few or self.go_term > self.limit or self.go_p >= self.alpha

    def note(self, which: str) -> str:
        """Why ``which`` ("NO-GO", "GO", "NO-GO and GO") is withheld, and what to do."""
        if self.too_few:
            missed = (1.0 - self.rare_share) ** self.n
            return (f"no {which} claim: the paired t-test claims from {self.needed} samples, this run has {self.n}: a "
                    f"change carried by {self.rare_share:.0%} of the samples (stats.t_rare_share) is missing from a "
                    f"sample of {self.n} {missed:.0%} of the time, and the t-test then errs unseen (false GO / NO-GO "
                    f"0.12-0.13 at n=40 on the calibration grid); run at least {self.needed} samples, or declare the "
                    "task's score bounds (the betting test holds at every n)")
        side = "large gains" if self.skew > 0 else "large losses"
        held = {"NO-GO": [(self.no_go_term, self.no_go_p)], "GO": [(self.go_term, self.go_p)]}.get(
            which, [(self.no_go_term, self.no_go_p), (self.go_term, self.go_p)])
        worst, p = max(held)
        reason = (f"its one-sided error can pass alpha by about {worst:.4f} at n={self.n}, more than "
                  f"stats.t_skew_limit={self.limit:g}" if worst > self.limit
                  else f"its p-value corrected for the skewness is {p:.4f}, not below alpha {self.alpha:g}")
        return (f"no {which} claim: the differences are skewed (sample skewness {self.skew:+.2f}, rare {side}), and "
                f"for the paired t-test {reason} (one-term Edgeworth); more samples, or the task's score bounds (the "
                "betting test holds at every n), decide")


def _side(p: float, skew: float, n: int, low_side: bool) -> tuple[float, float]:
    """(the term at the observed statistic, the corrected p-value) of one claim whose t-test p-value is ``p``."""
    if not 0.0 < p < 1.0:
        return 0.0, p
    t = term(skew, statistic(p, n), n, low_side)
    return t, p + max(0.0, t)


def check(gains: Sequence[float], alpha: float, p_no_go: float, p_go: float,
          limit: float = DEFAULT_LIMIT, rare_share: float = DEFAULT_RARE_SHARE) -> SkewCheck:
    """The skewness check of a paired t-test at ``alpha`` on ``gains`` (one per sample, higher is better) whose
    NO-GO and GO p-values are ``p_no_go`` and ``p_go``; no claim on fewer than ``min_samples(alpha, rare_share)``."""
    g = sample_skewness(gains)
    n = len(gains)
    no_go, go = _side(p_no_go, g, n, True), _side(p_go, g, n, False)
    return SkewCheck(g, n, alpha, limit, no_go[0], go[0], no_go[1], go[1], rare_share)
