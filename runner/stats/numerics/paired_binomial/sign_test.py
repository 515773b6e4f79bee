"""McNemar's exact one-sided p-value: the upper tail of ``Bin(m, 1/2)``, vectorized."""

from __future__ import annotations



def upper_tail_half(b, m):  # noqa: ANN001, ANN202 - scalars or numpy arrays
    """``P(X >= b)`` for ``X ~ Bin(m, 1/2)``; 1 when ``m == 0``. Vectorized (used by runner.stats.planning.simulate)."""
    from scipy import stats

    return stats.binom.sf(b - 1, m, 0.5)
