"""One per-sample indicator (the prompt cut, the token limit reached, the answer unparsed, the backend failed) tested
paired between a reference and a run: McNemar's exact one-sided test on the samples where exactly one arm shows it.

``b`` counts samples the run flags and the reference does not, ``c`` the reverse. Under the null that the run shows
the indicator no more often than the reference, ``b`` given ``b + c`` is at most ``Bin(b + c, 1/2)``, so
``p = P(X >= b)`` holds its alpha at every n (b=9, c=1: 11/1024).
"""

from __future__ import annotations

from collections.abc import Sequence

from runner.stats.data.indicators import IndicatorTest
from runner.stats.numerics.paired_binomial.sign_test import upper_tail_half


def mcnemar_more_often(b: int, c: int) -> float:
    """``P(X >= b)`` for ``X ~ Bin(b + c, 1/2)``: one-sided, the run flags more often; 1 without discordant pairs."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts are >= 0, got b={b}, c={c}")
    return float(upper_tail_half(b, b + c)) if b + c else 1.0


def paired_indicator(name: str, pairs: Sequence[tuple[bool, bool]], alpha: float) -> IndicatorTest:
    """The test of ``name`` on ``(reference, run)`` flags of the paired samples where both are known."""
    b = sum(1 for ref, run in pairs if run and not ref)
    c = sum(1 for ref, run in pairs if ref and not run)
    return IndicatorTest(name, len(pairs), sum(1 for _, run in pairs if run), sum(1 for ref, _ in pairs if ref),
                         b, c, mcnemar_more_often(b, c), alpha)

