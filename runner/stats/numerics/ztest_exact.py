"""Exact rates of TensorRT-LLM's unpaired z-test on 0/100 scores: how far its claims exceed alpha at a given n.

The reference's value averages ``n_ref`` 0/100 scores and the run's ``n``, binomial counts with good-answer
proportions ``p_ref`` and ``p_new``. The z-test (``sigma`` as configured, ``scale = sigma sqrt(1/n + 1/n_ref)``)
says NO-GO when the gain ``100 (x_new / n - x_ref / n_ref)`` is below ``-margin - |z(alpha)| scale`` and GO when it
is above ``-tolerance + |z(alpha)| scale`` (:func:`runner.stats.numerics.ztest.decide`, :func:`runner.stats.numerics.ztest.unpaired_claims`).
At the least favourable truth (the drop exactly at the margin, or at the tolerance) the rate of each claim is a
sum over the reference's count of one binomial tail of the run's: exact, in O(n_ref) per truth. A normal
threshold on a lattice of counts overshoots alpha at small n; these figures are printed in the report when they
do, and scanned over n in docs/statistics.md.
"""

from __future__ import annotations

import math

from runner.stats.data.hypothesis import scale
from runner.stats.numerics.normal import z

CLAIMS = ("NO-GO", "GO")
_EDGE = 1e-9  # a gain this close to the line is on it (float noise of the product's own arithmetic)


def rate(n: int, n_ref: int, sigma: float, alpha: float, claim: str, delta_points: float, p_ref: float) -> float:
    """The probability of ``claim`` when the drop is exactly ``delta_points`` (the margin for NO-GO, the
    tolerance for GO) and the reference's proportion is ``p_ref``."""
    p_new = p_ref - delta_points / 100.0
    if not (0.0 <= p_new <= 1.0 and 0.0 <= p_ref <= 1.0):
        return 0.0
    return claim_rate(n, n_ref, sigma, alpha, claim, delta_points, p_new, p_ref)


def claim_rate(n: int, n_ref: int, sigma: float, alpha: float, claim: str, edge_points: float, p_new: float,
               p_ref: float) -> float:
    """The probability of ``claim`` (its line at ``edge_points``: the margin or the tolerance) when the runs'
    proportions are ``p_new`` and ``p_ref``: an error rate on the boundary, a power elsewhere."""
    import numpy as np
    from scipy import stats

    if claim not in CLAIMS:
        raise ValueError(f"claim must be one of {CLAIMS}, got {claim!r}")
    half = abs(z(alpha)) * scale(n, sigma, n_ref)
    x_ref = np.arange(n_ref + 1)
    w_ref = stats.binom.pmf(x_ref, n_ref, p_ref)
    base = 100.0 * x_ref / n_ref
    if claim == "NO-GO":  # gain < -edge - half  <=>  x_new < n (base - edge - half) / 100
        k = np.ceil(n * (base - edge_points - half) / 100.0 - _EDGE) - 1  # largest x_new strictly below
        return float(np.sum(w_ref * stats.binom.cdf(k, n, p_new)))
    k = np.floor(n * (base - edge_points + half) / 100.0 + _EDGE)  # GO: x_new strictly above the line
    return float(np.sum(w_ref * stats.binom.sf(k, n, p_new)))


def worst(n: int, n_ref: int, sigma: float, alpha: float, claim: str, delta_points: float,
          proportions: "tuple[float, ...] | None" = None) -> tuple[float, float]:
    """``(largest rate, p_ref where)`` over reference proportions (0.01 .. 0.99 and 0.5 by default)."""
    grid = proportions or tuple(sorted({round(0.01 * i, 2) for i in range(1, 100)} | {0.5}))
    best = max(((rate(n, n_ref, sigma, alpha, claim, delta_points, p), p) for p in grid), key=lambda r: r[0])
    return best


def excess(n: int, n_ref: int, sigma: float, alpha: float, margin: float, tolerance: float) -> dict[str, float]:
    """Each claim's exact rate at ``p = 0.5`` (sigma 50's own truth) less alpha, where it is positive: what the
    report prints beside an unpaired 0/100 verdict (empty when the z-test holds at this n)."""
    out = {}
    for claim, delta in (("NO-GO", margin), ("GO", tolerance)):
        over = rate(n, n_ref, sigma, alpha, claim, delta, 0.5) - alpha
        if over > 1e-12 and not math.isnan(over):
            out[claim] = over
    return out
