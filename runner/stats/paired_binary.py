"""Paired 0/100 (binary) scores with a margin: Tango's score test, its interval, and exact bounds.

Notation: ``n`` paired samples; ``b`` = reference right & new wrong, ``c`` = new right & reference
wrong. ``Delta = (c - b) / n`` estimates the difference of proportions new - reference (proportion
units, -1..1); a drop is ``-Delta``. McNemar's exact test (:func:`runner.stats.paired.mcnemar_exact`)
tests ``Delta = 0``; a tolerance or a margin needs a test of ``Delta = delta0 != 0``, for which the
discordant pairs alone are no longer sufficient: the concordant count enters through the nuisance
parameter (the total discordance).

* :func:`tango_statistic`, :func:`tango_p`, :func:`tango_bounds`: Tango's score test (Tango 1998,
  Statistics in Medicine 17:891-908) and the score interval that inverts it exactly.
* :func:`exact_upper`, :func:`exact_lower`: bounds that invert McNemar's exact one-sided test at 0 only
  (conditional on the discordance, they are no confidence bounds elsewhere; the report prints the
  inversions of the GO and margin tests instead).
* :func:`go_p`, :func:`go_lower`: the tolerance (GO) test the project uses, an exact unconditional
  version of Tango's test (see :func:`go_p` for why plain Tango is not enough).

numpy and scipy are imported inside the functions that need them, so importing this module stays fast.
"""

from __future__ import annotations

import math

from runner.stats.unpaired import z

_ALTERNATIVES = ("greater", "less")


def _check_table(b: int, c: int, n: int) -> None:
    for name, v in (("b", b), ("c", c), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{name} must be a whole number, got {v!r}")
    if n < 1 or b < 0 or c < 0 or b + c > n:
        raise ValueError(f"need n >= 1 and 0 <= b, c with b + c <= n, got b={b} c={c} n={n}")


def _check_delta(delta0: float) -> float:
    delta0 = float(delta0)
    if not -1.0 <= delta0 <= 1.0:
        raise ValueError(f"delta0 must be in [-1, 1] (a difference of proportions), got {delta0!r}")
    return delta0


def restricted_mle(b: int, c: int, n: int, delta0: float) -> tuple[float, float]:
    """Maximum-likelihood discordant cell probabilities ``(q_b, q_c)`` under ``q_c - q_b = delta0``.

    With ``a = n - b - c`` the multinomial log-likelihood along the constraint is
    ``b log q + c log(q + delta0) + a log(1 - 2q - delta0)`` in ``q = q_b``; setting its derivative
    to 0 and clearing denominators gives ``2n q^2 + B q + C = 0`` with
    ``B = delta0 (2n + b - c) - (b + c)`` and ``C = -b delta0 (1 - delta0)`` (Tango 1998, eq. 4, in
    this orientation). The numerator polynomial is >= 0 at the lower end of the feasible interval
    ``[max(0, -delta0), (1 - delta0) / 2]`` and <= 0 at its upper end and opens downwards, so the
    maximiser is always the larger root, computed here without cancellation.
    """
    d = delta0
    big_b = d * (2 * n + b - c) - (b + c)
    minus_c = b * d * (1.0 - d)  # -C
    root = math.sqrt(max(big_b * big_b + 8.0 * n * minus_c, 0.0))  # >= 0 but for rounding
    if big_b <= 0:
        q = (root - big_b) / (4.0 * n)
    else:  # -B + root suffers cancellation; the product of the roots is C / (2n)
        q = 2.0 * minus_c / (big_b + root)
    q = min(max(q, max(0.0, -d)), (1.0 - d) / 2.0)
    return q, q + d


def tango_statistic(b: int, c: int, n: int, delta0: float) -> float:
    """Tango's score statistic for H0: ``Delta = delta0``; large values say ``Delta > delta0``.

    ``T = (c - b - n delta0) / sqrt(n (q_b + q_c - delta0^2))`` with ``(q_b, q_c)`` the restricted
    MLE (:func:`restricted_mle`). At ``delta0 = 0`` it is McNemar's score statistic
    ``(c - b) / sqrt(b + c)``. Where the null variance is 0 the statistic is defined by continuity:
    0 for ``b = c = 0`` at ``delta0 = 0``; at ``delta0 = 1`` it is 0 when ``c = n`` (the data are the
    null's only outcome) and ``-inf`` otherwise (impossible under the null, evidence of less); at
    ``delta0 = -1`` it is 0 when ``b = n`` and ``+inf`` otherwise.
    """
    _check_table(b, c, n)
    d = _check_delta(delta0)
    if d == 1.0:
        return 0.0 if c == n else -math.inf
    if d == -1.0:
        return 0.0 if b == n else math.inf
    q_b, q_c = restricted_mle(b, c, n, d)
    var = max(q_b + q_c - d * d, 0.0)
    num = c - b - n * d
    if var == 0.0:  # only b = c = 0 at delta0 = 0 inside (-1, 1)
        return 0.0 if num == 0 else math.copysign(math.inf, num)
    return num / math.sqrt(n * var)


def _phi(x: float) -> float:
    if math.isinf(x):
        return 1.0 if x > 0 else 0.0
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def tango_p(b: int, c: int, n: int, delta0: float, alternative: str) -> float:
    """One-sided normal p-value of Tango's test: ``"greater"`` (H1: ``Delta > delta0``) or ``"less"``."""
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be 'greater' or 'less', got {alternative!r}")
    t = tango_statistic(b, c, n, delta0)
    return _phi(-t) if alternative == "greater" else _phi(t)


def _bisect(pred, lo: float, hi: float) -> tuple[float, float]:  # noqa: ANN001 - a bool function of delta0
    """Shrink ``[lo, hi]`` with ``pred(lo)`` true and ``pred(hi)`` false down to adjacent floats."""
    for _ in range(2000):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if pred(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def tango_bounds(b: int, c: int, n: int, z_crit: float) -> tuple[float, float]:
    """Score interval ``(lower, upper)`` for ``Delta``: the ``delta0`` not rejected at ``z_crit``.

    ``lower`` is the smallest ``delta0`` the ``"greater"`` test (``T > z_crit``) does not reject,
    ``upper`` the largest one the ``"less"`` test (``T < -z_crit``) does not reject, both in
    [-1, 1]. ``T`` is decreasing in ``delta0`` (checked in the tests), and bisection runs to
    adjacent floating-point numbers, so ``lower > delta0`` iff ``T(delta0) > z_crit`` and
    ``upper < delta0`` iff ``T(delta0) < -z_crit`` hold for every ``delta0``, not just up to a tolerance.
    """
    _check_table(b, c, n)
    z_crit = float(z_crit)

    def stat(d: float) -> float:
        return tango_statistic(b, c, n, d)

    if stat(-1.0) <= z_crit:
        lower = -1.0
    elif stat(1.0) > z_crit:
        lower = 1.0
    else:
        lower = _bisect(lambda d: stat(d) > z_crit, -1.0, 1.0)[1]
    if stat(1.0) >= -z_crit:
        upper = 1.0
    elif stat(-1.0) < -z_crit:
        upper = -1.0
    else:
        upper = _bisect(lambda d: stat(d) >= -z_crit, -1.0, 1.0)[0]
    return lower, upper


def exact_upper(b: int, c: int, n: int, alpha: float) -> float:
    """Upper ``1 - alpha`` bound on ``Delta`` that inverts McNemar's exact one-sided test at 0.

    Given ``m = b + c`` discordant pairs, ``b ~ Bin(m, pi)`` with ``pi`` the chance that a
    discordant pair is a loss. ``pi_L`` is the one-sided Clopper-Pearson lower bound from ``b`` of
    ``m`` (the ``alpha`` quantile of Beta(b, m - b + 1); 0 when ``b = 0``), and the bound is
    ``(m / n)(1 - 2 pi_L)`` (0 when ``m = 0``). Since ``P_pi(X >= b)`` increases in ``pi``,
    ``pi_L > 1/2`` iff ``P_{1/2}(X >= b) < alpha``: the bound is below 0 exactly when McNemar's exact
    p-value is below alpha.
    """
    _check_table(b, c, n)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    m = b + c
    if m == 0:
        return 0.0
    if b == 0:
        pi_l = 0.0
    else:
        from scipy import special

        pi_l = float(special.betaincinv(b, m - b + 1, alpha))
    return (m / n) * (1.0 - 2.0 * pi_l)


def exact_lower(b: int, c: int, n: int, alpha: float) -> float:
    """Lower ``1 - alpha`` bound on ``Delta``, the mirror of :func:`exact_upper` (wins ``c`` of ``m``).

    It is above 0 exactly when ``P(X >= c) < alpha`` with ``X ~ Bin(b + c, 1/2)``: McNemar's exact
    test that the new run is better.
    """
    return -exact_upper(c, b, n, alpha)


# --------------------------------------------------------------------------- the tolerance (GO) test

_GRID_POINTS = 200
"""Nuisance values in the supremum of :func:`go_p` (plus the two ends of the range)."""


def nuisance_grid(delta0: float):  # noqa: ANN201 - numpy array
    """Total discordance values ``d`` over which :func:`go_p` takes its supremum.

    Under ``Delta = delta0`` the discordance ranges over ``[|delta0|, 1]``; the grid is uniform in
    ``sqrt(d - |delta0|)``, so dense near the lower end, where the worst case of small discordance
    lies (every discordant pair a loss), and contains both ends.
    """
    import numpy as np

    lo = abs(float(delta0))
    return lo + (1.0 - lo) * np.linspace(0.0, 1.0, _GRID_POINTS + 1) ** 2


def tango_array(b, c, n: int, delta0: float):  # noqa: ANN001, ANN201 - numpy arrays
    """:func:`tango_statistic` for arrays of ``b`` and ``c`` at one ``delta0`` in (-1, 1)."""
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


def _tie(t_obs: float) -> float:
    """Cells whose statistic is within this of the observed one count as "as extreme" (rounding)."""
    return 1e-10 * max(1.0, abs(t_obs))


def _loss_share(d, delta0: float):  # noqa: ANN001, ANN202
    """Chance that a discordant pair is a loss, ``q_b / d = (d - delta0) / (2 d)``, clipped to [0, 1]."""
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        return np.clip(np.where(d > 0, (d - delta0) / (2.0 * d), 0.5), 0.0, 1.0)


def _cond_tail(k: int, m: int, pi: float) -> float:
    """``P(losses <= k - 1)`` for ``Bin(m, pi)``."""
    from scipy import special

    if k <= 0:
        return 0.0
    if k >= m + 1 or pi <= 0.0:
        return 1.0
    if pi >= 1.0:
        return 0.0
    return float(special.bdtr(k - 1, m, pi))


def go_p(b: int, c: int, n: int, delta0: float) -> float:
    """Exact unconditional p-value for H0: ``Delta <= delta0`` against ``Delta > delta0`` (the GO claim).

    Plain Tango compares its statistic with a normal quantile; at small discordance the count of
    losses is a skewed, discrete variable and the false-pass rate exceeds alpha (6.2% for 2.75
    points at n = 100 when every discordance is a loss; see benchmarks/tango_enumeration.py).
    Here the same statistic only orders the tables: ``p = sup_d P_{delta0, d}(T >= T_observed)``
    over the nuisance total discordance ``d`` in ``[|delta0|, 1]`` (:func:`nuisance_grid`), the
    exact unconditional construction (Berger & Boos 1994, JASA 89:1012, without their restriction
    step; Chan 1998, Statistics in Medicine 17:1403, for the score ordering). Given ``m``
    discordant pairs the losses are ``Bin(m, (d - delta0) / (2 d))`` and ``T`` decreases in the
    losses, so each ``m`` contributes one binomial tail.
    """
    _check_table(b, c, n)
    d0 = _check_delta(delta0)
    if d0 >= 1.0:
        return 1.0
    if d0 <= -1.0:
        return 1.0 if b == n else 0.0
    t = tango_statistic(b, c, n, d0)
    return go_p_at(t - _tie(t), n, d0)


def go_p_at(t_obs: float, n: int, d0: float) -> float:
    """:func:`go_p` of a table whose statistic is ``t_obs`` (ties already widened): ``sup_d P(T >= t_obs)``.

    The p-value depends on the table only through ``t_obs``, and is non-increasing in it, so the GO tables
    of a ``(n, delta0)`` are those with ``T`` above one threshold (used by the exact enumerations)."""
    import numpy as np
    from scipy import special

    m = np.arange(n + 1)
    # k(m) = number of loss counts 0..k-1 whose table is as extreme as the observed one
    lo = np.zeros(n + 1, dtype=np.int64)  # tango_array(lo - 1) >= t_obs holds (vacuous at 0)
    hi = m + 1  # everything at or beyond hi fails
    while np.any(hi - lo > 0):
        mid = (lo + hi) // 2
        ok = tango_array(mid, m - mid, n, d0) >= t_obs
        active = hi > lo
        lo = np.where(active & ok, mid + 1, lo)
        hi = np.where(active & ~ok, mid, hi)
    k = lo
    log_choose = special.gammaln(n + 1) - special.gammaln(m + 1) - special.gammaln(n - m + 1)
    grid = nuisance_grid(d0)
    grid = grid[(grid > 0.0) & (grid < 1.0)]
    best = 1.0 if k[0] >= 1 and d0 == 0.0 else 0.0  # d = 0: every pair concordant
    best = max(best, _cond_tail(int(k[n]), n, float(_loss_share(1.0, d0))))  # d = 1: m = n
    # all windows m in mean +- 9 sd of Bin(n, d) at once (the rest weighs < 1e-18)
    sd = np.sqrt(n * grid * (1.0 - grid))
    w0 = np.maximum(0, (n * grid - 9 * sd - 2).astype(np.int64))
    w1 = np.minimum(n, (n * grid + 9 * sd + 2).astype(np.int64))
    sizes = w1 - w0 + 1
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    row = np.repeat(np.arange(grid.size), sizes)
    mm = np.arange(sizes.sum()) - np.repeat(starts, sizes) + np.repeat(w0, sizes)
    km = k[mm]
    dd = grid[row]
    pi = np.clip((dd - d0) / (2.0 * dd), 0.0, 1.0)
    with np.errstate(invalid="ignore"):
        tail = special.bdtr(np.maximum(km - 1, 0), mm, np.minimum(pi, 1.0 - 1e-300))
    cond = np.where(km <= 0, 0.0, np.where(km >= mm + 1, 1.0, np.where(pi >= 1.0, 0.0, tail)))
    pmf = np.exp(log_choose[mm] + mm * np.log(dd) + (n - mm) * np.log1p(-dd))
    if grid.size:
        best = max(best, float(np.max(np.add.reduceat(pmf * cond, starts))))
    return min(1.0, best)


def go_lower(b: int, c: int, n: int, alpha: float) -> float:
    """Lower ``1 - alpha`` bound on ``Delta`` for the GO (tolerance) claim: GO for tolerance t iff it is ``> -t/100``.

    The smaller of Tango's lower bound at ``z_{1-alpha}`` and the inversion of :func:`go_p`, meant
    so that ``go_lower > delta0`` iff Tango rejects at ``delta0`` *and* the exact unconditional test
    does (:func:`go_rejects`). KNOWN LIMITATION: ``go_p`` is not always monotone in ``delta0`` and
    only its value at Tango's bound is checked, so the equivalence can fail (b=5 c=20 n=109; the
    strict xfail in the tests); the enumerated false-pass rates are those of :func:`go_rejects`.
    The aim:
    the false-pass rate is at most alpha at every discordance (intersection with an exact test), and
    where the exact test already backs Tango's rejection the bound is Tango's own. ``go_p`` is
    checked at Tango's bound first; only when it does not reject there is it inverted by bisection (to 1e-12).
    """

    _check_table(b, c, n)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    tango_low = tango_bounds(b, c, n, z(1.0 - alpha))[0]
    if tango_low <= -1.0 or go_p(b, c, n, tango_low) < alpha:
        return tango_low
    if go_p(b, c, n, -1.0) >= alpha:
        return -1.0
    # the exact bound is usually just below Tango's: widen a bracket downwards, then bisect
    hi, step = tango_low, 1e-4
    lo = max(-1.0, hi - step)
    while lo > -1.0 and go_p(b, c, n, lo) >= alpha:
        hi, step = lo, step * 4
        lo = max(-1.0, hi - step)
    while hi - lo > 1e-12:
        mid = 0.5 * (lo + hi)
        if go_p(b, c, n, mid) < alpha:
            lo = mid
        else:
            hi = mid
    return hi


def go_rejects(b: int, c: int, n: int, delta0: float, alpha: float) -> bool:
    """The GO test at ``delta0``: Tango's statistic beyond ``z_{1-alpha}`` and ``go_p < alpha``."""

    return tango_statistic(b, c, n, delta0) > z(1.0 - alpha) and go_p(b, c, n, delta0) < alpha


def go_test_p(b: int, c: int, n: int, delta0: float) -> float:
    """p-value of the GO test at ``delta0``: the larger of Tango's normal p-value and :func:`go_p`.

    Rejecting when it is below alpha is :func:`go_rejects`; the exact unconditional part keeps the
    false-pass rate at or below alpha at every discordance, Tango's part keeps the bound Tango's where
    the exact test already backs it."""
    return max(tango_p(b, c, n, delta0, "greater"), go_p(b, c, n, delta0))


# --------------------------------------------------------------------------- the margin (NO-GO) test


def regression_p(b: int, c: int, n: int, delta0: float) -> float:
    """p-value of H0: ``Delta >= delta0`` against ``Delta < delta0`` (NO-GO with a margin, ``delta0 = -m/100``).

    The mirror of :func:`go_test_p`: swapping the counts (``b`` <-> ``c``) turns ``Delta`` into ``-Delta``,
    so this is the GO test of the swapped table at ``-delta0``, Tango's ordering backed by the exact
    unconditional p-value maximised over the discordance. Plain Tango alone falsely says NO-GO more often
    than alpha at a drop of exactly the margin (0.077 at n = 57, m = 5 points, by enumeration)."""
    return go_test_p(c, b, n, -delta0)


def regression_upper(b: int, c: int, n: int, alpha: float) -> float:
    """Upper ``1 - alpha`` bound on ``Delta`` that inverts :func:`regression_p`: ``-go_lower`` of the swapped table.

    It is below ``delta0`` when :func:`regression_p` at ``delta0`` is below alpha, with :func:`go_lower`'s
    caveat (the exact p-value is not monotone in ``delta0`` for a few tables; the printed bound is then pinned
    to the side the test at the margin decided, :func:`runner.stats.claims.binary`)."""
    return -go_lower(c, b, n, alpha)
