"""An exact unconditional test of two binomials, with a margin: the unpaired rule for 0/100 scores that holds
its alpha at every n.

The reference's value is ``x_ref`` good answers of ``n_ref``, the new run's ``x_new`` of ``n``; the drop is
``D = p_ref - p_new``. A claim tests ``H0: D <= delta`` (``side="above"``: a drop beyond ``delta`` is shown, the
NO-GO claim at ``delta`` = margin) or ``H0: D >= delta`` (``side="below"``: the drop is shown to be under
``delta``, the GO claim at ``delta`` = tolerance). The statistic is Farrington & Manning's (1990) score statistic
for a difference with its restricted maximum-likelihood variance (Miettinen & Nurminen's closed form); the
p-value is the largest probability, over the nuisance proportion on the boundary ``D = delta``, of a statistic at
least as extreme as the one observed (Chan 1998; Suissa & Shuster 1985 at ``delta = 0``, where the score
statistic is the pooled z and the test is Barnard's with the pooled statistic, ``scipy.stats.barnard_exact``).
Whatever the true proportions on the boundary, a claim is then made with probability at most alpha, at every
n; inside H0 the rate is smaller still, the statistic being monotone in each count (Roehmel & Mansmann 1999).

Boschloo's test (``scipy.stats.boschloo_exact``) is the other exact unconditional test scipy offers; it has no
margin and enumerates Fisher's p-value for every table (27 s for 1000 vs 1000 on a 2-core host), so the score
statistic is used here, and at ``delta = 0`` the tests compare the two.

The statistic falls as the new run's count rises (Roehmel & Mansmann 1999 show Farrington & Manning's meets
Barnard's convexity condition; the tests check it on every table at small n), so the tables at least as extreme
as the observed one are, for each reference count, a run of new counts from one end, found by bisection, and a
tail probability is one binomial tail per reference count. The supremum is taken over a grid of the nuisance
proportion even in the arcsine scale, refined around its peaks; the tests compare the p-values with scipy's at
``delta = 0`` and the sizes with a 20001-point grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runner.stats.numerics.normal import z

SIDES = ("above", "below")
GRID = 101  # nuisance proportions on the boundary; refined around the best one
_TIE = 1e-10  # a statistic this close to the observed one counts as equally extreme


@dataclass(frozen=True)
class Table:
    """Good answers of each run: ``x_new`` of ``n_new``, ``x_ref`` of ``n_ref`` (whole numbers)."""

    x_new: int
    n_new: int
    x_ref: int
    n_ref: int

    def __post_init__(self) -> None:
        for name in ("x_new", "n_new", "x_ref", "n_ref"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
        if self.n_new < 1 or self.n_ref < 1 or self.x_new > self.n_new or self.x_ref > self.n_ref:
            raise ValueError(f"counts must satisfy 0 <= x <= n with n >= 1, got {self}")


def score_statistic(x_ref, n_ref: int, x_new, n_new: int, delta: float):  # noqa: ANN001, ANN201 - numpy
    """Farrington & Manning's z for ``H0: p_ref - p_new = delta`` (large: the drop is beyond ``delta``).

    ``x_ref`` and ``x_new`` broadcast against each other. The variance is that of the restricted maximum-likelihood
    proportions (the root of Miettinen & Nurminen's cubic); where it is 0 the statistic is 0 when the observed
    difference equals ``delta`` and +-inf otherwise."""
    import numpy as np

    p1 = np.asarray(x_ref, dtype=float) / n_ref
    p2 = np.asarray(x_new, dtype=float) / n_new
    p1, p2 = np.broadcast_arrays(p1, p2)
    theta = n_new / n_ref
    d = float(delta)
    a = 1.0 + theta
    b = -(1.0 + theta + p1 + theta * p2 + d * (theta + 2.0))
    c = d * d + d * (2.0 * p1 + theta + 1.0) + p1 + theta * p2
    e = -p1 * d * (1.0 + d)
    v = b ** 3 / (27.0 * a ** 3) - b * c / (6.0 * a * a) + e / (2.0 * a)
    u = np.sqrt(np.maximum(b * b / (9.0 * a * a) - c / (3.0 * a), 0.0))
    u = np.where(v < 0, -u, u)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(u == 0.0, 0.0, v / u ** 3)
    w = (math.pi + np.arccos(np.clip(ratio, -1.0, 1.0))) / 3.0
    r1 = np.clip(2.0 * u * np.cos(w) - b / (3.0 * a), 0.0, 1.0)
    r2 = np.clip(r1 - d, 0.0, 1.0)
    var = r1 * (1.0 - r1) / n_ref + r2 * (1.0 - r2) / n_new
    diff = p1 - p2 - d
    degenerate = np.where(np.abs(diff) < 1e-12, 0.0, np.where(diff > 0, np.inf, -np.inf))
    return np.divide(diff, np.sqrt(var), out=degenerate, where=var > 0)


def _boundary(delta: float) -> tuple[float, float]:
    """The range of ``p_new`` on the boundary ``p_ref = p_new + delta``."""
    return max(0.0, -delta), min(1.0, 1.0 - delta)


def extreme_counts(n_new: int, n_ref: int, delta: float, side: str, z: float):  # noqa: ANN201 - numpy
    """For each reference count, how many new counts give a statistic at least as extreme as ``z``: the lowest
    ones (``side="above"``, a large drop) or the highest (``"below"``). Bisection on the monotone statistic."""
    import numpy as np

    x_ref = np.arange(n_ref + 1)
    lo = np.zeros(n_ref + 1, dtype=np.int64)  # extreme count is in [lo, hi]
    hi = np.full(n_ref + 1, n_new + 1, dtype=np.int64)
    while np.any(lo < hi):
        mid = (lo + hi + 1) // 2  # is the mid-th value from the extreme end still extreme?
        x_new = mid - 1 if side == "above" else n_new + 1 - mid
        stat = score_statistic(x_ref, n_ref, np.clip(x_new, 0, n_new), n_new, delta)
        ok = stat >= z - _TIE if side == "above" else stat <= z + _TIE
        ok &= mid >= 1
        lo = np.where(ok & (lo < hi), mid, lo)
        hi = np.where(~ok & (lo < hi), mid - 1, hi)
    return lo


def tail(counts, n_new: int, n_ref: int, delta: float, side: str, p_new):  # noqa: ANN001, ANN201 - numpy
    """``P(the table is among the extreme ones)`` for each ``p_new`` on the boundary (``p_ref = p_new + delta``)."""
    import numpy as np

    p_new = np.atleast_1d(np.asarray(p_new, dtype=float))
    return rate(counts, n_new, n_ref, side, p_new, np.clip(p_new + delta, 0.0, 1.0))


def rate(counts, n_new: int, n_ref: int, side: str, p_new, p_ref):  # noqa: ANN001, ANN201 - numpy
    """``P(the table is among the extreme ones)`` when the runs' proportions are ``p_new`` and ``p_ref`` (arrays
    of the same shape): a claim's rate at any truth, power included, given :func:`extreme_counts` of the rule."""
    import numpy as np
    from scipy import stats

    p_new = np.atleast_1d(np.asarray(p_new, dtype=float))
    p_ref = np.atleast_1d(np.asarray(p_ref, dtype=float))
    pmf_ref = stats.binom.pmf(np.arange(n_ref + 1)[:, None], n_ref, p_ref[None, :])
    k = np.asarray(counts)[:, None]
    if side == "above":
        new = stats.binom.cdf(k - 1, n_new, p_new[None, :])
    else:
        new = stats.binom.sf(n_new - k, n_new, p_new[None, :])
    return (pmf_ref * new).sum(axis=0)


def nuisance_grid(n_new: int, n_ref: int, delta: float, points: int = GRID):  # noqa: ANN201 - numpy
    """Nuisance proportions on the boundary, even in the arcsine scale (``p = lo + (hi - lo) sin^2 theta``): the
    tail probability moves on the scale of a binomial's spread, ``sqrt(p (1 - p) / n)``, finest near 0 and 1,
    where the largest excess of a lattice often sits (at n = 1000 a 101-point even grid missed a peak at
    p = 0.005). At least ``16 sqrt(n)`` points."""
    import numpy as np

    lo, hi = _boundary(delta)
    count = max(points, int(16 * math.sqrt(max(n_new, n_ref))))
    return lo + (hi - lo) * np.sin(np.linspace(0.0, 0.5 * math.pi, count)) ** 2


def supremum(counts, n_new: int, n_ref: int, delta: float, side: str, grid: int = GRID) -> tuple[float, float]:  # noqa: ANN001
    """``(largest tail probability, where)`` over the boundary: the arcsine grid, then a bounded search around
    each of its three highest local peaks."""
    import numpy as np
    from scipy.optimize import minimize_scalar

    points = nuisance_grid(n_new, n_ref, delta, grid)
    tails = tail(counts, n_new, n_ref, delta, side, points)
    value, where = float(np.max(tails)), float(points[int(np.argmax(tails))])
    inner = np.r_[True, tails[1:] >= tails[:-1]] & np.r_[tails[:-1] >= tails[1:], True]
    for i in sorted(np.flatnonzero(inner), key=lambda k: -tails[k])[:3]:
        left, right = points[max(0, i - 1)], points[min(points.size - 1, i + 1)]
        if right <= left:
            continue
        found = minimize_scalar(lambda q: -float(tail(counts, n_new, n_ref, delta, side, q)[0]),
                                bounds=(left, right), method="bounded", options={"xatol": 1e-9})
        if -found.fun > value:
            value, where = float(-found.fun), float(found.x)
    return min(1.0, value), where


def _check(side: str, delta: float) -> None:
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    if not -1.0 < delta < 1.0:
        raise ValueError(f"delta must be a difference of proportions in (-1, 1), got {delta!r}")


def p_value(table: Table, delta: float, side: str, grid: int = GRID) -> float:
    """The exact unconditional p-value of the claim on ``side`` of ``delta`` (a fraction: 0.0275 for 2.75 points).

    ``side="above"``: H0 ``drop <= delta`` (the NO-GO claim); ``side="below"``: H0 ``drop >= delta`` (GO)."""
    _check(side, delta)
    observed = float(score_statistic(table.x_ref, table.n_ref, table.x_new, table.n_new, delta))
    counts = extreme_counts(table.n_new, table.n_ref, delta, side, observed)
    return supremum(counts, table.n_new, table.n_ref, delta, side, grid)[0]


def critical(n_new: int, n_ref: int, delta: float, side: str, alpha: float, grid: int = GRID) -> float:
    """The least extreme statistic ``z*`` whose p-value is below ``alpha`` (to 1e-7): the claim is made iff the
    observed statistic is at least as extreme. ``inf`` (``-inf`` below): no table shows the claim."""
    _check(side, delta)
    sign = 1.0 if side == "above" else -1.0

    def shown(z: float) -> bool:
        counts = extreme_counts(n_new, n_ref, delta, side, sign * z)
        return supremum(counts, n_new, n_ref, delta, side, grid)[0] < alpha

    top = 40.0  # beyond any finite statistic of these tables? checked: the most extreme finite one
    if not shown(top):
        return sign * math.inf
    lo, hi = -top, top  # shown at hi, not at lo (p = 1 there)
    while hi - lo > 1e-7:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if shown(mid) else (mid, hi)
    return sign * hi


def size(n_new: int, n_ref: int, delta: float, side: str, alpha: float, grid: int = 401) -> tuple[float, float]:
    """The rule's exact rate of a false claim at the least favourable truth on the boundary, and where
    (``p_new``): its rejection region (:func:`critical`) summed over a finer grid than the test's own."""
    z = critical(n_new, n_ref, delta, side, alpha)
    if math.isinf(z):
        return 0.0, math.nan
    return supremum(extreme_counts(n_new, n_ref, delta, side, z), n_new, n_ref, delta, side, grid)


def score_bound(table: Table, z_crit: float, side: str) -> float:
    """The score interval's end for the drop ``p_ref - p_new`` at critical value ``z_crit`` (Miettinen &
    Nurminen without their n / (n - 1) factor, the statistic of this test): the largest drop whose score statistic
    is still at least ``z_crit`` (``side="above"``: the lower end, a drop beyond it is shown), or the smallest
    whose statistic is at most ``-z_crit`` (``"below"``: the upper end). Bisection; the statistic falls with delta."""

    def stat(delta: float) -> float:
        return float(score_statistic(table.x_ref, table.n_ref, table.x_new, table.n_new, delta))

    lo, hi = -1.0 + 1e-12, 1.0 - 1e-12
    inside = (lambda d: stat(d) >= z_crit) if side == "above" else (lambda d: stat(d) > -z_crit)
    if side == "above" and not inside(lo):
        return lo
    if side == "below" and inside(hi):
        return hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if inside(mid) else (lo, mid)
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class Claims:
    """Both claims of the exact rule on one table, in proportions: ``p_regression`` of ``H0: drop <= margin``,
    ``p_within`` of ``H0: drop >= tolerance``; ``low`` and ``high`` the one-sided ``1 - alpha`` score bounds on
    the drop, each pinned to the side of its threshold the exact test decided."""

    p_regression: float
    p_within: float
    regression: bool
    within: bool
    low: float
    high: float


def claims(table: Table, margin: float, tolerance: float, alpha: float) -> Claims:
    """The NO-GO claim (a drop beyond ``margin``) and the GO claim (a drop under ``tolerance``) at ``alpha``."""
    zc = z(1.0 - alpha)
    p_reg = p_value(table, margin, "above")
    p_in = p_value(table, tolerance, "below")
    regression, within = p_reg < alpha, p_in < alpha
    tiny = 1e-9
    low = score_bound(table, zc, "above")
    high = score_bound(table, zc, "below")
    low = max(low, margin + tiny) if regression else min(low, margin)
    high = min(high, tolerance - tiny) if within else max(high, tolerance)
    return Claims(p_reg, p_in, regression, within, low, high)
