"""Exact enumeration of the GO test over every paired 0/100 table of ``n`` samples.

What the measurements and tests use to check the tolerance test of :mod:`runner.stats.paired_binary`:
its p-value for all tables at once, the exact chance of a GO at a true drop, and the GO regions of
plain Tango and of the method the project uses. The runner itself never enumerates.
"""

from __future__ import annotations

import functools

from runner.stats.paired_binary import _check_delta, nuisance_grid, tango_array
from runner.stats.unpaired import z


def go_p_table(n: int, delta0: float):  # noqa: ANN201 - (b, c, p) numpy arrays
    """:func:`go_p` for every table ``b + c <= n`` at once (for enumerations of the false-pass rate).

    Sorts the tables by Tango's statistic once; for each nuisance value of :func:`nuisance_grid`
    the tail probability of every table is a cumulative sum in that order (ties share one).
    """
    import numpy as np
    from scipy import special

    d0 = _check_delta(delta0)
    if not -1.0 < d0 < 1.0:
        raise ValueError("go_p_table needs -1 < delta0 < 1")
    b, c = np.triu_indices(n + 1)  # c >= b; both triangles below
    b, c = np.concatenate([b, c[c != b]]), np.concatenate([c, b[c != b]])
    b, c = b[b + c <= n], c[b + c <= n]
    t = tango_array(b, c, n, d0)
    order = np.argsort(-t, kind="stable")
    t_sorted = t[order]
    # last position (in descending order) of a table at least as extreme as each table
    last = np.searchsorted(-t_sorted, -(t_sorted - 1e-10 * np.maximum(1.0, np.abs(t_sorted))), side="right") - 1
    bs, cs = b[order], c[order]
    a = n - bs - cs
    log_mult = special.gammaln(n + 1) - special.gammaln(bs + 1) - special.gammaln(cs + 1) - special.gammaln(a + 1)
    best = np.zeros(t.size)
    for d in nuisance_grid(d0):
        qb, qc = (d - d0) / 2.0, (d + d0) / 2.0
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = (log_mult + special.xlogy(bs, qb) + special.xlogy(cs, qc) + special.xlogy(a, 1.0 - d))
        tail = np.cumsum(np.exp(lp))[last]
        np.maximum(best, tail, out=best)
    p = np.empty(t.size)
    p[order] = np.minimum(best, 1.0)
    return b, c, p


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
    the method of :func:`go_lower`: that and ``go_p < alpha``. Neither depends on the discordance.
    """
    import numpy as np

    b, c, p = go_p_table(n, -drop)
    tango = np.zeros((n + 1, n + 1), dtype=bool)
    exact = np.zeros((n + 1, n + 1), dtype=bool)
    t_go = tango_array(b, c, n, -drop) > z(1.0 - alpha)
    tango[b, c] = t_go
    exact[b, c] = t_go & (p < alpha)
    return tango, exact


# --------------------------------------------------------------------------- regions as cut-offs per discordance


@functools.lru_cache(maxsize=256)
def go_cutoffs(n: int, delta0: float, alpha: float):  # noqa: ANN201 - numpy int array
    """``k[M]`` for ``M = 0..n``: the GO test at ``delta0`` (:func:`runner.stats.paired_binary.go_test_p` below
    alpha) holds for a table with ``b + c = M`` exactly when its losses ``b < k[M]``.

    ``go_p`` depends on a table only through its statistic ``T`` and does not increase with it, and Tango's
    normal p-value neither, so the GO tables are those with ``T`` at or above one value, found by bisection
    over the distinct statistics with the product's own p-values (:func:`runner.stats.paired_binary.go_p_at`,
    ``tango_p``'s normal tail); ``T`` decreases in the losses at fixed ``M``, so each ``M`` keeps a prefix.
    The mirror (NO-GO with a margin m) is ``go_cutoffs(n, m / 100, alpha)`` applied to the wins ``c``."""
    import numpy as np

    from runner.stats import paired_binary as pb

    d0 = float(delta0)
    b, c = _tables(n)
    t = pb.tango_array(b, c, n, d0)
    values = np.unique(t)[::-1]  # descending; rejection holds on a prefix

    def rejects(v: float) -> bool:
        return max(pb._phi(-v), pb.go_p_at(v - pb._tie(v), n, d0)) < alpha

    lo, hi = 0, values.size  # rejects(values[:lo]) all hold; values[hi:] all fail
    while lo < hi:
        mid = (lo + hi) // 2
        if rejects(float(values[mid])):
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return np.zeros(n + 1, dtype=np.int64)
    go = t >= values[lo - 1]
    return np.bincount((b + c)[go], minlength=n + 1).astype(np.int64)


@functools.lru_cache(maxsize=64)
def mcnemar_cutoffs(n: int, alpha: float):  # noqa: ANN201 - numpy int array
    """``k[M]``: McNemar's exact test (p = P(X >= b), X ~ Bin(M, 1/2)) says NO-GO for a table with ``b + c = M``
    exactly when its wins ``c < k[M]`` (the p-value of :func:`runner.stats.paired._upper_tail_half`)."""
    import numpy as np

    from runner.stats.paired import _upper_tail_half

    b, c = _tables(n)
    m = b + c
    reject = (m > 0) & (_upper_tail_half(b, m) < alpha)
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
