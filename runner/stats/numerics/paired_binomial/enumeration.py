"""Exact enumeration of the GO test over every paired 0/100 table of ``n`` samples.

What the measurements and tests use to check the tolerance test of :mod:`runner.stats.numerics.paired_binomial.tango`:
its p-value for all tables at once, the exact chance of a GO at a true drop, and the GO regions of
plain Tango and of the method the project uses. The runner itself never enumerates.
"""

from __future__ import annotations

import functools

from runner.stats.numerics.paired_binomial import tango as pb
from runner.stats.numerics.paired_binomial.unconditional import cutoffs, tango_array, tie
from runner.stats.numerics.paired_binomial.sign_test import upper_tail_half
from runner.stats.numerics.normal import z


def false_pass_rate(n: int, drop: float, d: float, go) -> float:  # noqa: ANN001 - boolean array over (b, c)
    """Exact chance of a GO when the true drop is ``drop`` and the total discordance ``d >= drop``.

    ``go[b, c]`` (shape ``(n + 1, n + 1)``) marks the GO tables; cells are trinomial with
    ``P(b) = (d + drop) / 2``, ``P(c) = (d - drop) / 2``, ``P(concordant) = 1 - d``.
    """
    import numpy as np
    from scipy import special

    if not 0.0 <= drop <= d <= 1.0:
        raise ValueError(f"need 0 <= drop <= d <= 1, got drop={drop!r} d={d!r}")
    b, c = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    a = n - b - c
    ok = a >= 0
    aa = np.maximum(a, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lp = (special.gammaln(n + 1) - special.gammaln(b + 1) - special.gammaln(c + 1) - special.gammaln(aa + 1)
              + special.xlogy(b, (d + drop) / 2) + special.xlogy(c, (d - drop) / 2) + special.xlogy(aa, 1 - d))
    prob = np.where(ok, np.exp(lp), 0.0)
    return float(prob[np.asarray(go) & ok].sum())


def go_regions(n: int, drop: float, alpha: float):  # noqa: ANN201 - two boolean arrays
    """GO tables ``(plain Tango, the method of go_lower)`` for a tolerance ``drop`` (proportion units).

    Plain Tango: ``T(b, c; -drop) > z_{1-alpha}`` (the same as ``tango_bounds(...)[0] > -drop``);
    the method of :func:`go_lower`: that and the exact test (:func:`go_cutoffs`). Neither depends on the
    discordance.
    """
    import numpy as np

    b, c = _tables(n)
    tango = np.zeros((n + 1, n + 1), dtype=bool)
    exact = np.zeros((n + 1, n + 1), dtype=bool)
    tango[b, c] = tango_array(b, c, n, -drop) > z(1.0 - alpha)
    k = go_cutoffs(n, -drop, alpha)
    exact[b, c] = b < k[b + c]
    return tango, exact


# --------------------------------------------------------------------------- regions as cut-offs per discordance


@functools.lru_cache(maxsize=256)
def go_cutoffs(n: int, delta0: float, alpha: float, at: float | None = None):  # noqa: ANN201 - numpy int array
    """``k[M]`` for ``M = 0..n``: the GO bound (:func:`runner.stats.numerics.paired_binomial.tango.go_lower` with threshold
    ``delta0``) is above ``at`` (default ``delta0``: the GO test, :func:`~runner.stats.numerics.paired_binomial.tango.go_test_p`
    below alpha) for a table with ``b + c = M`` exactly when its losses ``b < k[M]``.

    The bound is above ``at`` exactly when Tango's bound ``S`` is and the exact p-value at ``at`` is below
    alpha; that p-value depends on a table only through ``S`` and does not increase with it, so the tables
    are those with ``S`` at or above one value ``v``, found by bisection with the product's own p-value
    (:func:`runner.stats.numerics.paired_binomial.tango.go_p_at`) until the set ``{S >= v}`` no longer changes. ``S``
    decreases in the losses at fixed ``M``, so each ``M`` keeps a prefix. The mirror (the NO-GO bound below
    ``-at`` with a margin m) is ``go_cutoffs(n, m / 100, alpha, -at)`` applied to the wins ``c``."""

    d0 = float(delta0)
    x = d0 if at is None else float(at)
    zc = z(1.0 - alpha)

    def region(v: float):  # noqa: ANN202 - numpy int array: the tables with S >= v
        return cutoffs(zc - tie(zc), n, v)

    def go(v: float) -> bool:
        return v > x and pb.go_p_at(v, n, d0, alpha, at=x) < alpha

    lo, hi = x, 1.0  # go(lo) fails; go(1.0) holds (no table has S >= 1 but the impossible ones)
    k_lo, k_hi = region(lo), region(hi)
    while True:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        k_mid = region(mid)  # the p-value depends on v only through this set of tables
        if (k_mid == k_hi).all():
            hi, k_hi = mid, k_mid
            continue
        if lo > x and (k_mid == k_lo).all():
            lo, k_lo = mid, k_mid
            continue
        if go(mid):
            hi, k_hi = mid, k_mid
        else:
            lo, k_lo = mid, k_mid
    return k_hi


@functools.lru_cache(maxsize=64)
def mcnemar_cutoffs(n: int, alpha: float):  # noqa: ANN201 - numpy int array
    """``k[M]``: McNemar's exact test (p = P(X >= b), X ~ Bin(M, 1/2)) says NO-GO for a table with ``b + c = M``
    exactly when its wins ``c < k[M]`` (the p-value of :func:`runner.stats.numerics.paired_binomial.sign_test.upper_tail_half`)."""
    import numpy as np

    b, c = _tables(n)
    m = b + c
    reject = (m > 0) & (upper_tail_half(b, m) < alpha)
    return np.bincount(m[reject], minlength=n + 1).astype(np.int64)


def _tables(n: int):  # noqa: ANN202 - two numpy int arrays
    """Every table ``(b, c)`` with ``b + c <= n``."""
    import numpy as np

    b, c = np.divmod(np.arange((n + 1) * (n + 1)), n + 1)
    keep = b + c <= n
    return b[keep], c[keep]


def region_rate(cutoffs, n: int, d: float, share: float) -> float:  # noqa: ANN001 - numpy int array
    """Exact chance of the region "counted cell < ``cutoffs[M]``" when ``M ~ Bin(n, d)`` pairs are discordant and
    each discordant pair is the counted kind with chance ``share`` (losses: ``(d - Delta) / (2d)``; wins:
    ``(d + Delta) / (2d)`` for a true difference ``Delta``)."""
    import numpy as np
    from scipy import stats

    m = np.arange(n + 1)
    k = np.asarray(cutoffs)
    share = min(max(share, 0.0), 1.0)
    cond = np.where(k <= 0, 0.0, stats.binom.cdf(k - 1, m, share))
    return float(np.sum(stats.binom.pmf(m, n, d) * cond))
