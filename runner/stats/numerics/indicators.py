"""One per-sample indicator (the prompt cut, the token limit reached, the answer unparsed, the backend failed) tested
paired between a reference and a run: McNemar's exact one-sided test on the samples where exactly one arm shows it.

``b`` counts samples the run flags and the reference does not, ``c`` the reverse. Under the null that the run shows
the indicator no more often than the reference, ``b`` given ``b + c`` is at most ``Bin(b + c, 1/2)``, so
``p = P(X >= b)`` holds its alpha at every n (b=9, c=1: 11/1024). Where the reference's A/A replicate shows the
system itself flagging more often (one dtype writes longer answers), the run's excess is tested beyond that.
"""

from __future__ import annotations

from collections.abc import Sequence

from runner.stats.data.indicators import IndicatorTest
from runner.stats.numerics.paired_binomial.sign_test import upper_tail_half
from runner.stats.numerics.paired_binomial.tango import go_test_p


def mcnemar_more_often(b: int, c: int) -> float:
    """``P(X >= b)`` for ``X ~ Bin(b + c, 1/2)``: one-sided, the run flags more often; 1 without discordant pairs."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts are >= 0, got b={b}, c={c}")
    return float(upper_tail_half(b, b + c)) if b + c else 1.0


def discordant(pairs: Sequence[tuple[bool, bool]]) -> tuple[int, int]:
    """``(b, c)`` of ``(reference, run)`` flags: pairs only the run flags, and pairs only the reference flags."""
    return (sum(1 for ref, run in pairs if run and not ref), sum(1 for ref, run in pairs if ref and not run))


def paired_indicator(name: str, pairs: Sequence[tuple[bool, bool]], alpha: float,
                     allowance: float = 0.0) -> IndicatorTest:
    """The test of ``name`` on ``(reference, run)`` flags of the paired samples where both are known.

    ``allowance``: the excess rate ``(b - c) / n`` the system's own noise shows (the A/A replicate's); above 0 the
    null is that the run's excess is at most that, tested as the project's tolerance claim is (Tango's score
    test backed by the exact unconditional test, :func:`runner.stats.numerics.paired_binomial.tango.go_test_p`,
    with the roles of b and c as the run's excess needs them)."""
    b, c = discordant(pairs)
    n = len(pairs)
    p = mcnemar_more_often(b, c) if allowance <= 0 or not n else go_test_p(c, b, n, min(allowance, 1.0), alpha)
    return IndicatorTest(name, n, sum(1 for _, run in pairs if run), sum(1 for ref, _ in pairs if ref),
                         b, c, p, alpha, max(allowance, 0.0))

