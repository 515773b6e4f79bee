"""The exact test behind the 0/100 tolerance and margin claims, and the bound that inverts it at every delta.

Designated statistic: Tango's lower score bound ``S = tau(b, c)`` at ``z_{1-alpha}``
(:func:`runner.stats.numerics.paired_binomial.tango.tango_bounds`); a table is as extreme as the observed one when its
``S`` is at least as large, i.e. when ``T_{S_obs}(b, c) >= z`` (Tango's statistic decreases in delta). For
H0: ``Delta <= delta`` the p-value is

    q(delta) = max { P_{delta', d}(S >= S_obs) : delta' <= delta, d in the nuisance grid }

the exact unconditional p-value of the whole composite null (Berger & Boos 1994, JASA 89:1012, without
their restriction step). Given ``m`` discordant pairs (``M ~ Bin(n, d)``) the losses are
``Bin(m, (d - delta') / (2 d))``; ``S`` decreases in the losses, so the region is a prefix ``losses < k[m]``
per ``m`` and its chance increases in ``delta'`` at every ``d``: the maximum over ``delta' <= delta`` is
at ``delta' = min(delta, d)``, and ``q`` never decreases in ``delta``. The lower bound
``inf {delta : q(delta) >= alpha}`` is Buehler's (1957, JASA 52:482) for this designated statistic, the
ordering by an approximate bound that Lloyd & Kabaila (2003, Aust. N. Z. J. Stat. 45:421) and Kabaila &
Lloyd (2002, Technometrics 44:390) recommend: it is above ``delta`` exactly when the test at ``delta``
rejects, at every ``delta``, and covers ``Delta`` with probability >= 1 - alpha. (The inversion of tests
that each re-order the tables by Tango's statistic at their own ``delta`` is not monotone, so it could not
promise both.)

The nuisance grid is fixed per threshold and ``n`` (:func:`support`: 1600 values, dense at ``|delta0|``
and at 0), so ``q`` depends on a table only through ``S`` and the enumerations are exact. Its maximum is
computed exactly but not by brute force: every 8th value first, then only the values that could beat the
best so far, which the Bhattacharyya bound rules out for the rest: for any event ``A`` and laws ``P, Q``,
``|arcsin sqrt P(A) - arcsin sqrt Q(A)| <= arccos BC(P, Q)``, and ``BC`` of two ``n``-fold trinomials is
that of one pair to the power ``n``.
"""

from __future__ import annotations

import functools
import math

_GRID_POINTS = 200
"""Nuisance values in each stretch of :func:`support` (uniform in ``sqrt(d - lower end)``)."""
_PER_ROOT_N = 8.0
"""Values of the grid uniform in ``arcsin sqrt(d)``, per ``sqrt(n)``."""
_COARSE = 8
"""Every this-many grid value is computed first; the others only when the Bhattacharyya bound allows them
to beat the best."""
_SPREAD = 9.0
"""Discordance counts within this many sd of ``n d`` (the rest weighs < 1e-18)."""
_NEGLIGIBLE = 50.0
"""A binomial tail whose Chernoff bound ``exp(-m KL)`` is below ``exp(-this)`` is taken as 0 (or its complement 1)."""


def tango_array(b, c, n: int, delta0: float):  # noqa: ANN001, ANN201 - numpy arrays
    """:func:`runner.stats.numerics.paired_binomial.tango.tango_statistic` for arrays of ``b`` and ``c`` at one ``delta0`` in (-1, 1)."""
    import numpy as np

    b = np.asarray(b, dtype=float)
    c = np.asarray(c, dtype=float)
    d = float(delta0)
    big_b = d * (2 * n + b - c) - (b + c)
    minus_c = b * d * (1.0 - d)
    root = np.sqrt(np.maximum(big_b * big_b + 8.0 * n * minus_c, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(big_b <= 0, (root - big_b) / (4.0 * n), 2.0 * minus_c / (big_b + root))
        q = np.clip(q, max(0.0, -d), (1.0 - d) / 2.0)
        var = np.maximum(2.0 * q + d - d * d, 0.0)
        num = c - b - n * d
        t = num / np.sqrt(n * var)
        return np.where(var == 0.0, np.where(num == 0, 0.0, np.sign(num) * np.inf), t)


def tie(t_obs: float) -> float:
    """Cells whose statistic is within this of the observed one count as "as extreme" (rounding)."""
    return 1e-10 * max(1.0, abs(t_obs))


def _stretch(lo: float, points: int):  # noqa: ANN202 - numpy array
    import numpy as np

    return lo + (1.0 - lo) * np.linspace(0.0, 1.0, points + 1) ** 2


@functools.lru_cache(maxsize=32)
def support(delta0: float, n: int, points: int = _GRID_POINTS):  # noqa: ANN201 - numpy array, read-only
    """The nuisance grid of the claims at threshold ``delta0`` with ``n`` pairs: uniform in
    ``sqrt(d - |delta0|)`` above ``|delta0|`` (where the least favourable discordance often is: every
    discordant pair one way) and in ``sqrt(d)`` below it, ``points`` values each; and ``_PER_ROOT_N sqrt(n)``
    values uniform in ``arcsin sqrt(d)`` (the scale on which ``Bin(n, d)`` moves evenly), so the grid
    tightens as the chances in ``d`` narrow with ``n``. Both ends included."""
    import numpy as np

    lo = abs(float(delta0))
    below = _stretch(0.0, points)
    even = np.sin(np.linspace(0.0, np.pi / 2, int(math.ceil(_PER_ROOT_N * math.sqrt(n))) + 1)) ** 2
    out = np.union1d(np.union1d(_stretch(lo, points), below[below < lo]), np.clip(even, 0.0, 1.0))
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=8)
def _log_choose(n: int):  # noqa: ANN202 - numpy array, read-only
    import numpy as np
    from scipy import special

    m = np.arange(n + 1)
    out = special.gammaln(n + 1) - special.gammaln(m + 1) - special.gammaln(n - m + 1)
    out.setflags(write=False)
    return out


def cutoffs(t_obs: float, n: int, delta0: float):  # noqa: ANN201 - numpy int array
    """``k[m]``: the tables with ``m`` discordant pairs and fewer than ``k[m]`` losses have ``T_{delta0} >= t_obs``."""
    import numpy as np

    m = np.arange(n + 1)
    lo = np.zeros(n + 1, dtype=np.int64)  # T(lo - 1 losses) >= t_obs holds (vacuous at 0)
    hi = m + 1  # everything at or beyond hi fails
    while np.any(hi > lo):
        mid = (lo + hi) // 2
        ok = tango_array(mid, m - mid, n, delta0) >= t_obs
        active = hi > lo
        lo = np.where(active & ok, mid + 1, lo)
        hi = np.where(active & ~ok, mid, hi)
    return lo


class Curves:
    """``P_{min(delta, d), d}(losses < k[M])`` for the grid values ``d``: one non-decreasing curve in
    ``delta`` per ``d``, 0 while ``d < -delta`` (that ``d`` is not in the null yet). Terms are built only
    for the grid values asked for."""

    def __init__(self, k, n: int, ds) -> None:  # noqa: ANN001 - numpy arrays
        import numpy as np

        self.k, self.n = np.asarray(k), n
        self.ds = np.asarray(ds, dtype=float)
        sd = np.sqrt(n * self.ds * (1.0 - self.ds))
        self.w0 = np.maximum(0, np.floor(n * self.ds - _SPREAD * sd - 2)).astype(np.int64)
        self.w1 = np.minimum(n, np.ceil(n * self.ds + _SPREAD * sd + 2)).astype(np.int64)
        self._cache: dict = {}
        m = np.arange(n + 1)
        self.all_losses = m[self.k >= m + 1]  # m discordant pairs, all losses, in the region: 0..m* (T falls)

    def edge(self, delta):  # noqa: ANN001, ANN201 - numpy array like delta
        """The edge of the null, every discordant pair a loss: ``sup_{d >= |delta|} P_{-d, d}(region)`` for
        ``delta <= 0`` (``P(M <= m*)``, ``M ~ Bin(n, d)``, falls in ``d``: taken at ``d = |delta|``), and at
        ``d = 0`` for ``delta > 0`` (the table of no discordance). Exact for every ``delta``, where the grid
        has only its own values."""
        import numpy as np
        from scipy import special

        d = np.maximum(-np.atleast_1d(np.asarray(delta, dtype=float)), 0.0)
        if self.all_losses.size == 0:
            return np.zeros(d.shape)
        top = int(self.all_losses.max())
        return np.where(d > 0, special.bdtr(top, self.n, np.minimum(d, 1.0)), 1.0)

    def _terms(self, cols, delta):  # noqa: ANN001, ANN202 - numpy arrays
        """Per term of the columns ``cols``: m, k[m], d, pmf of m, delta (repeated), the loss share, and where
        each column starts (the parts that do not depend on ``delta`` are kept per column)."""
        import numpy as np
        from scipy import special

        new = [c for c in np.unique(cols).tolist() if c not in self._cache]
        if new:
            nc = np.asarray(new, dtype=np.int64)
            sizes = self.w1[nc] - self.w0[nc] + 1
            first = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
            m = np.arange(sizes.sum()) - np.repeat(first, sizes) + np.repeat(self.w0[nc], sizes)
            d = np.repeat(self.ds[nc], sizes)
            pmf = np.exp(_log_choose(self.n)[m] + special.xlogy(m, d) + special.xlog1py(self.n - m, -d))
            for c, f, z in zip(new, first.tolist(), sizes.tolist()):
                self._cache[c] = (m[f:f + z], pmf[f:f + z])
        parts = [self._cache[c] for c in cols.tolist()]
        sizes = np.array([len(p[0]) for p in parts], dtype=np.int64)
        first = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        m = np.concatenate([p[0] for p in parts])
        pmf = np.concatenate([p[1] for p in parts])
        d = np.repeat(self.ds[cols], sizes)
        dl = np.repeat(np.broadcast_to(np.asarray(delta, dtype=float), cols.shape), sizes)
        with np.errstate(divide="ignore", invalid="ignore"):
            pi = np.clip(np.where(d > 0, (d - np.minimum(dl, d)) / (2.0 * d), 0.5), 0.0, 1.0)
        return m, self.k[m], d, pmf, dl, pi, first

    def at(self, delta, cols):  # noqa: ANN001, ANN201 - numpy array (len(cols),)
        """The curves ``cols`` at ``delta`` (one value, or one per column)."""
        import numpy as np
        from scipy import special

        cols = np.atleast_1d(np.asarray(cols, dtype=np.int64))
        if cols.size == 0:
            return np.zeros(0)
        delta = np.broadcast_to(np.asarray(delta, dtype=float), cols.shape)
        m, k, _, pmf, _, pi, first = self._terms(cols, delta)
        cond = np.where(k <= 0, 0.0, 1.0)  # also k >= m + 1
        mid = (k >= 1) & (k <= m)
        # Chernoff: P(X <= k-1) <= exp(-m KL((k-1)/m || pi)) below the mean, P(X >= k) likewise above it
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.where(m > 0, (k - 1) / np.maximum(m, 1), 0.0)
            kl = special.xlogy(x, x / pi) + special.xlogy(1 - x, (1 - x) / (1 - pi))
            far = mid & (np.nan_to_num(m * kl, nan=np.inf) > _NEGLIGIBLE)
        cond = np.where(far & (x < pi), 0.0, cond)
        todo = mid & ~far
        cond[todo] = special.bdtr(k[todo] - 1, m[todo], pi[todo])
        out = np.minimum(np.add.reduceat(pmf * cond, first), 1.0)
        return np.where(self.ds[cols] >= -delta, out, 0.0)

    def slopes(self, delta, cols):  # noqa: ANN001, ANN201 - numpy array (len(cols),)
        """d/d delta of :meth:`at` (0 once ``delta >= d``): ``m b(k - 1; m - 1, pi) / (2 d)`` per term."""
        import numpy as np
        from scipy import special

        cols = np.atleast_1d(np.asarray(cols, dtype=np.int64))
        m, k, d, pmf, dl, pi, first = self._terms(cols, delta)
        live = (k >= 1) & (k <= m) & (d > 0) & (dl < d)
        mm, kk = np.maximum(m, 1), np.clip(k, 1, np.maximum(m, 1))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            logb = (special.gammaln(mm) - special.gammaln(kk) - special.gammaln(mm - kk + 1)
                    + special.xlogy(kk - 1, pi) + special.xlog1py(mm - kk, -pi))
            term = np.where(live, pmf * mm * np.exp(logb) / (2.0 * np.where(d > 0, d, 1.0)), 0.0)
        return np.add.reduceat(term, first)

    def _angles(self, delta: float, a, b):  # noqa: ANN001, ANN202 - numpy arrays of columns
        """Bhattacharyya angle between the ``n``-sample laws of the tables at grid values ``a`` and ``b``."""
        import numpy as np

        def cells(d):  # noqa: ANN001, ANN202
            dp = np.minimum(delta, d)
            return np.maximum((d - dp) / 2.0, 0.0), np.maximum((d + dp) / 2.0, 0.0), 1.0 - d

        p, q = cells(self.ds[a]), cells(self.ds[b])
        bc = sum(np.sqrt(x * y) for x, y in zip(p, q))
        return np.arccos(np.clip(bc, 0.0, 1.0) ** self.n)

    def above(self, delta: float, level: float | None = None, cols=None):  # noqa: ANN001, ANN201
        """``(columns, values)``: the grid values (of ``cols``, default all) whose curve at ``delta`` is at
        least ``level`` (default: their maximum), exactly, computing few curves: every ``_COARSE``-th first,
        then repeatedly the middle of each gap between computed values that holds a value the Bhattacharyya
        bound from the gap's two ends cannot rule out."""
        import numpy as np

        cols = np.arange(self.ds.size) if cols is None else np.asarray(cols, dtype=np.int64)
        live = cols[self.ds[cols] >= -delta]
        if live.size == 0:
            return live, np.zeros(0)
        known = np.zeros(live.size, dtype=bool)
        vals = np.zeros(live.size)
        first = np.unique(np.append(np.arange(0, live.size, _COARSE), live.size - 1))
        vals[first], known[first] = self.at(delta, live[first]), True
        while True:
            best = float(vals[known].max()) if level is None else level
            pos = np.flatnonzero(known)
            gaps = np.flatnonzero(np.diff(pos) > 1)
            if gaps.size == 0:
                break
            left, right = pos[gaps], pos[gaps + 1]
            # every unknown value of each gap, bounded from the gap's two computed ends
            sizes = right - left - 1
            inner = np.arange(sizes.sum()) - np.repeat(np.concatenate(([0], np.cumsum(sizes)[:-1])), sizes)
            inner = inner + np.repeat(left + 1, sizes)
            lft, rgt = np.repeat(left, sizes), np.repeat(right, sizes)
            th = np.arcsin(np.sqrt(np.clip(vals, 0.0, 1.0)))
            bound = np.minimum(th[lft] + self._angles(delta, live[lft], live[inner]),
                               th[rgt] + self._angles(delta, live[rgt], live[inner]))
            open_ = np.sin(np.minimum(bound, np.pi / 2)) ** 2 >= best * (1 - 1e-12)
            if not open_.any():
                break
            # the middle of each gap that still has an open value (its ends tighten the bounds next round)
            gap_of = np.repeat(np.arange(gaps.size), sizes)
            todo = np.unique(gap_of[open_])
            mids = (left[todo] + right[todo]) // 2
            vals[mids], known[mids] = self.at(delta, live[mids]), True
            # values ruled out for good are marked known at 0 only in the bookkeeping of gaps:
            shut = inner[~open_ & np.isin(gap_of, todo, invert=True)]
            known[shut], vals[shut] = True, 0.0
        if level is None:
            level = float(vals[known].max())
        keep = known & (vals >= level)
        return live[keep], vals[keep]


@functools.lru_cache(maxsize=128)
def curves(s_obs: float, n: int, z_crit: float, delta0: float) -> Curves:
    """The curves of the region ``S >= s_obs`` (``T_{s_obs} >= z_crit``) on the grid of threshold ``delta0``."""
    return Curves(cutoffs(z_crit - tie(z_crit), n, s_obs), n, support(delta0, n))


def p_value(s_obs: float, n: int, z_crit: float, delta0: float, delta: float) -> float:
    """``q(delta)`` for a table whose designated statistic is ``s_obs`` (module doc)."""
    if s_obs <= -1.0:
        return 1.0
    c = curves(s_obs, n, z_crit, delta0)
    _, vals = c.above(delta)
    return float(min(1.0, max(vals.max() if vals.size else 0.0, c.edge(delta)[0])))


def _crossings(terms: Curves, cols, alpha: float, upper: float):  # noqa: ANN001, ANN202 - numpy array
    """Where each curve ``cols`` (at or above alpha at ``upper``) first reaches alpha, from above to 1e-13:
    safeguarded Newton steps inside a shrinking bracket ``[lo, hi]`` (below alpha at lo, not at hi)."""
    import numpy as np

    ds = terms.ds[cols]
    lo, hi = -ds.copy(), np.minimum(ds, upper)
    at_lo = terms.at(lo, cols)
    hi = np.where(at_lo >= alpha, lo, hi)
    x = 0.5 * (lo + hi)
    for _ in range(60):
        open_ = hi - lo > 1e-13 * np.maximum(1.0, np.abs(hi))
        if not open_.any():
            break
        idx = np.flatnonzero(open_)
        f = terms.at(x[idx], cols[idx]) - alpha
        lo[idx] = np.where(f < 0, x[idx], lo[idx])
        hi[idx] = np.where(f >= 0, x[idx], hi[idx])
        slope = terms.slopes(x[idx], cols[idx])
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(slope > 0, x[idx] - f / slope, np.nan)
        # a step that lands next to x is pushed a little past it, so that the root is bracketed from both sides
        tiny = 4e-14 * np.maximum(1.0, np.abs(x[idx]))
        step = np.where(np.abs(step - x[idx]) < tiny, step + np.where(f < 0, tiny, -tiny), step)
        inside = (step > lo[idx]) & (step < hi[idx])
        x[idx] = np.where(inside, step, 0.5 * (lo[idx] + hi[idx]))
    return hi


def lower_bound(s_obs: float, n: int, z_crit: float, delta0: float, alpha: float) -> float:
    """``min(s_obs, inf {delta : q(delta) >= alpha})``: the Buehler bound, capped at Tango's own.

    ``q`` is the maximum of curves that each increase in ``delta`` (a curve joins at ``delta = -d``): only
    those at or above alpha at ``s_obs`` can reach it below. Newton's method finds where every
    ``_COARSE``-th of them, and those around the earliest, reach alpha (``b``); all the candidates are
    checked to stay below alpha just below ``b`` (else the search goes on below), and bisection on the few
    curves at alpha at ``b`` goes down to adjacent floats: ``bound > delta`` exactly when ``q(delta) < alpha``,
    for every ``delta < s_obs``."""
    import numpy as np

    upper = float(s_obs)
    if upper <= -1.0:
        return -1.0
    terms = curves(upper, n, z_crit, delta0)
    if terms.edge(upper)[0] >= alpha:  # the edge reaches alpha first at upper or below: the bound is at most there
        a, b = -1.0, upper
        if terms.edge(a)[0] >= alpha:
            return -1.0
        while True:
            mid = 0.5 * (a + b)
            if mid <= a or mid >= b:
                break
            a, b = (a, mid) if terms.edge(mid)[0] >= alpha else (mid, b)
        upper = b
    cand, _ = terms.above(upper, alpha)
    if cand.size == 0:
        return upper
    pick = np.unique(np.append(np.arange(0, cand.size, _COARSE), cand.size - 1))
    roots = _crossings(terms, cand[pick], alpha, upper)
    j = int(pick[int(np.argmin(roots))])
    near = np.arange(max(0, j - _COARSE), min(cand.size, j + _COARSE + 1))
    b = float(min(roots.min(), _crossings(terms, cand[near], alpha, upper).min()))
    at_b, _ = terms.above(b, alpha, cand)  # the others stay below alpha at b, so below it all the way down
    if at_b.size == 0:  # the crossing found was not one (rounding): the candidates reach alpha at upper
        b = upper
        at_b, _ = terms.above(b, alpha, cand)
    step = 1e-12 * max(1.0, abs(b))
    while True:
        a = max(-1.0, b - step)
        reach = at_b[terms.at(a, at_b) >= alpha]
        if reach.size == 0:
            break
        if a <= -1.0:
            return -1.0
        b, at_b, step = a, reach, step * 16
    while True:  # q(a) < alpha <= q(b); between them only the curves at alpha at b can reach it
        mid = 0.5 * (a + b)
        if mid <= a or mid >= b:
            return b
        if np.any(terms.at(mid, at_b) >= alpha):
            b = mid
        else:
            a = mid


def dense_check(s_obs: float, n: int, z_crit: float, delta0: float, delta: float, points: int) -> float:
    """``q(delta)`` over a grid of ``points`` per stretch, every value computed: the tests' check of the grid
    and of the pruning."""
    c = Curves(cutoffs(z_crit - tie(z_crit), n, s_obs), n, support(delta0, n, points))
    return float(min(1.0, c.at(delta, range(c.ds.size)).max()))
