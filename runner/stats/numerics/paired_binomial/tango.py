"""Paired 0/100 (binary) scores with a margin: Tango's score test, its interval, and exact bounds.

Notation: ``n`` paired samples; ``b`` = reference right & new wrong, ``c`` = new right & reference
wrong. ``Delta = (c - b) / n`` estimates the difference of proportions new - reference (proportion
units, -1..1); a drop is ``-Delta``. McNemar's exact test (:func:`runner.stats.rules.paired_binary.mcnemar_exact`)
tests ``Delta = 0``; a tolerance or a margin needs a test of ``Delta = delta0 != 0``, for which the
discordant pairs alone are no longer sufficient: the concordant count enters through the nuisance
parameter (the total discordance).

* :func:`tango_statistic`, :func:`tango_p`, :func:`tango_bounds`: Tango's score test (Tango 1998,
  Statistics in Medicine 17:891-908) and the score interval that inverts it exactly.
* :func:`exact_upper`, :func:`exact_lower`: bounds that invert McNemar's exact one-sided test at 0 only
  (conditional on the discordance, they are no confidence bounds elsewhere; the report prints the
  inversions of the GO and margin tests instead).
* :func:`go_p`, :func:`go_test_p`, :func:`go_lower`: the tolerance (GO) test the project uses, Tango's
  test backed by an exact unconditional test (see :func:`go_p` for why plain Tango is not enough), and
  its Buehler bound, which inverts it at every ``delta0`` (:mod:`runner.stats.numerics.paired_binomial.unconditional`);
  :func:`regression_p`, :func:`regression_upper`: their mirror for NO-GO with a margin.

numpy and scipy are imported inside the functions that need them, so importing this module stays fast.
"""

from __future__ import annotations

import math

from runner.stats.numerics.paired_binomial.unconditional import lower_bound, p_value
from runner.stats.numerics.normal import phi_erfc, z

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


def tango_p(b: int, c: int, n: int, delta0: float, alternative: str) -> float:
    """One-sided normal p-value of Tango's test: ``"greater"`` (H1: ``Delta > delta0``) or ``"less"``."""
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be 'greater' or 'less', got {alternative!r}")
    t = tango_statistic(b, c, n, delta0)
    return phi_erfc(-t) if alternative == "greater" else phi_erfc(t)


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

def go_p(b: int, c: int, n: int, delta0: float, alpha: float) -> float:
    """Exact unconditional p-value for H0: ``Delta <= delta0`` against ``Delta > delta0`` (the GO claim).

    Plain Tango compares its statistic with a normal quantile; at small discordance the count of
    losses is a skewed, discrete variable and the false-pass rate exceeds alpha (6.2% for 2.75
    points at n = 100 when every discordance is a loss; see benchmarks/tango_enumeration.py).
    Here Tango's score bound at ``z_{1-alpha}`` only orders the tables: ``p = max P(S >= S_observed)``
    over the whole null ``Delta <= delta0`` and the nuisance total discordance (Berger & Boos 1994,
    JASA 89:1012, without their restriction step), computed by :mod:`runner.stats.numerics.paired_binomial.unconditional`,
    whose Buehler bound (:func:`go_lower`) inverts it at every ``delta0``.
    """
    _check_table(b, c, n)
    d0 = _check_delta(delta0)
    _check_alpha(alpha)
    if d0 >= 1.0:
        return 1.0
    if d0 <= -1.0:
        return 1.0 if b == n else 0.0
    return go_p_at(tango_bounds(b, c, n, z(1.0 - alpha))[0], n, d0, alpha)


def go_p_at(s_obs: float, n: int, d0: float, alpha: float, at: float | None = None) -> float:
    """:func:`go_p` of a table whose Tango lower bound at ``z_{1-alpha}`` is ``s_obs``, for H0: ``Delta <= at``
    (default ``d0``) on the nuisance grid of the threshold ``d0``.

    The p-value depends on a table only through ``s_obs`` and does not increase with it, so the GO tables of
    a ``(n, d0)`` are those with ``s_obs`` at or above one value (the exact enumerations use this); it does
    not decrease in ``at`` (:mod:`runner.stats.numerics.paired_binomial.unconditional`)."""
    return p_value(float(s_obs), int(n), z(1.0 - alpha), float(d0), float(d0 if at is None else at))


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")


def go_lower(b: int, c: int, n: int, alpha: float, delta0: float) -> float:
    """Lower ``1 - alpha`` bound on ``Delta`` for the GO claim at ``delta0`` (a tolerance t: ``-t/100``).

    The smaller of Tango's score bound at ``z_{1-alpha}`` and the Buehler bound of the exact unconditional
    test (:func:`runner.stats.numerics.paired_binomial.unconditional.lower_bound`, on the nuisance grid of ``delta0``). Both
    invert monotone families, so at every ``delta`` -- ``delta0`` itself included -- the bound is above
    ``delta`` exactly when Tango's test and the exact test (:func:`go_p_at` with ``at=delta``) both reject
    there: above ``delta0`` exactly when :func:`go_rejects` says GO. It covers ``Delta`` with probability
    at least ``1 - alpha`` whatever ``Delta`` and the discordance are (the exact part alone does).
    """
    _check_table(b, c, n)
    _check_alpha(alpha)
    d0 = _check_delta(delta0)
    s_obs = tango_bounds(b, c, n, z(1.0 - alpha))[0]
    return lower_bound(s_obs, n, z(1.0 - alpha), d0, alpha)


def go_rejects(b: int, c: int, n: int, delta0: float, alpha: float) -> bool:
    """The GO test at ``delta0``: Tango's statistic beyond ``z_{1-alpha}`` and ``go_p < alpha``."""

    return tango_statistic(b, c, n, delta0) > z(1.0 - alpha) and go_p(b, c, n, delta0, alpha) < alpha


def go_test_p(b: int, c: int, n: int, delta0: float, alpha: float) -> float:
    """p-value of the GO test at ``delta0``: the larger of Tango's normal p-value and :func:`go_p`.

    Rejecting when it is below alpha is :func:`go_rejects`, and :func:`go_lower` above ``delta0``; the
    exact unconditional part keeps the false-pass rate at or below alpha at every discordance, Tango's part
    keeps the bound Tango's where the exact test already backs it."""
    return max(tango_p(b, c, n, delta0, "greater"), go_p(b, c, n, delta0, alpha))


# --------------------------------------------------------------------------- the margin (NO-GO) test


def regression_p(b: int, c: int, n: int, delta0: float, alpha: float) -> float:
    """p-value of H0: ``Delta >= delta0`` against ``Delta < delta0`` (NO-GO with a margin, ``delta0 = -m/100``).

    The mirror of :func:`go_test_p`: swapping the counts (``b`` <-> ``c``) turns ``Delta`` into ``-Delta``,
    so this is the GO test of the swapped table at ``-delta0``, Tango's ordering backed by the exact
    unconditional p-value maximised over the discordance. Plain Tango alone falsely says NO-GO more often
    than alpha at a drop of exactly the margin (0.077 at n = 57, m = 5 points, by enumeration)."""
    return go_test_p(c, b, n, -delta0, alpha)


def regression_upper(b: int, c: int, n: int, alpha: float, delta0: float) -> float:
    """Upper ``1 - alpha`` bound on ``Delta`` that inverts :func:`regression_p` at ``delta0`` (a margin m:
    ``-m/100``): ``-go_lower`` of the swapped table at ``-delta0``.

    At every ``delta`` it is below ``delta`` exactly when the margin test's family rejects there, so at
    ``delta0`` it is below the margin exactly when :func:`regression_p` is below alpha (NO-GO)."""
    return -go_lower(c, b, n, alpha, -delta0)


# --------------------------------------------------------------------------- both claims at once


def claim_bounds(b: int, c: int, n: int, alpha: float, delta0: float, margin0: float) -> tuple[float, float, float]:
    """What both claims of a paired 0/100 decision need, in one descent: the GO test's p-value at ``delta0``
    (:func:`go_test_p`), its lower bound (:func:`go_lower`) and the NO-GO side's upper bound at ``margin0``
    (:func:`regression_upper`). The same numbers as those three functions, with the normal quantile taken once and
    the exact unconditional part evaluated together."""
    _check_table(b, c, n)
    _check_alpha(alpha)
    d0, m0 = _check_delta(delta0), _check_delta(margin0)
    t = tango_statistic(b, c, n, d0)
    z_crit, p_tango = z(1.0 - alpha), phi_erfc(-t)
    s_go, s_reg = tango_bounds(b, c, n, z_crit)[0], tango_bounds(c, b, n, z_crit)[0]
    if d0 >= 1.0:
        p_exact = 1.0
    elif d0 <= -1.0:
        p_exact = 1.0 if b == n else 0.0
    else:
        p_exact = p_value(float(s_go), int(n), z_crit, d0, d0)
    low, high = lower_bound(s_go, n, z_crit, d0, alpha), -lower_bound(s_reg, n, z_crit, -m0, alpha)
    return max(p_tango, p_exact), low, high
