"""Paired binary scores with a margin: Tango's score test, its interval, exact bounds, the GO test.

Golden checks use independent constructions (a numerical constrained maximisation, exact binomial
tails, McNemar's score statistic), never the closed forms under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from runner.stats.paired_binary import (
    exact_lower,
    exact_upper,
    go_lower,
    go_p,
    go_rejects,
    restricted_mle,
    tango_bounds,
    tango_p,
    tango_statistic,
)
from runner.stats.paired_binary_enumeration import false_pass_rate, go_cutoffs, go_p_table, go_regions, mcnemar_cutoffs

Z95 = 1.6448536269514722  # z_{0.95}


def _numeric_mle(b: int, c: int, n: int, d0: float) -> float:
    """q_b maximising b log q + c log(q + d0) + a log(1 - 2q - d0) on its feasible interval."""
    a = n - b - c
    lo, hi = max(0.0, -d0), (1.0 - d0) / 2.0

    def nll(q: float) -> float:
        terms = [(b, q), (c, q + d0), (a, 1 - 2 * q - d0)]
        return -sum(k * math.log(max(p, 1e-300)) for k, p in terms if k)

    res = optimize.minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
    return float(res.x)


@pytest.mark.parametrize(("b", "c", "n", "d0"), [
    (8, 2, 20, -0.1), (8, 2, 20, 0.2), (30, 45, 200, -0.05), (5, 0, 100, -0.0275),
    (0, 7, 50, 0.3), (12, 12, 60, -0.4), (40, 3, 400, 0.01), (0, 0, 100, -0.02),
])
def test_restricted_mle_matches_numerical_maximisation(b: int, c: int, n: int, d0: float) -> None:
    q_b, q_c = restricted_mle(b, c, n, d0)
    assert q_c - q_b == pytest.approx(d0, abs=1e-15)
    assert q_b == pytest.approx(_numeric_mle(b, c, n, d0), abs=1e-7)


def test_mcnemar_score_statistic_at_zero() -> None:
    for b, c, n in ((8, 2, 20), (3, 3, 10), (0, 5, 9), (100, 130, 4096), (7, 0, 7)):
        assert tango_statistic(b, c, n, 0.0) == pytest.approx((c - b) / math.sqrt(b + c), rel=1e-12)
    assert tango_statistic(0, 0, 100, 0.0) == 0.0  # no discordance, no evidence


def test_edge_cases_have_documented_values() -> None:
    assert tango_statistic(0, 10, 10, 1.0) == 0.0 and tango_statistic(1, 9, 10, 1.0) == -math.inf
    assert tango_statistic(10, 0, 10, -1.0) == 0.0 and tango_statistic(9, 0, 10, -1.0) == math.inf
    # b = c = 0 at -t: the restricted MLE puts q_b = t, q_c = 0: T = sqrt(n t / (1 - t))
    assert tango_statistic(0, 0, 100, -0.0275) == pytest.approx(math.sqrt(2.75 / 0.9725), rel=1e-12)
    assert tango_p(8, 2, 20, 0.0, "less") == pytest.approx(stats.norm.cdf(-6 / math.sqrt(10)), rel=1e-12)
    assert tango_p(8, 2, 20, 0.0, "greater") == pytest.approx(stats.norm.sf(-6 / math.sqrt(10)), rel=1e-12)
    with pytest.raises(ValueError):
        tango_p(1, 1, 5, 0.0, "two-sided")
    with pytest.raises(ValueError):
        tango_statistic(3, 3, 5, 0.0)


def test_statistic_decreases_in_delta0() -> None:
    rng = np.random.default_rng(11)
    grid = np.linspace(-1.0, 1.0, 201)
    for _ in range(300):
        n = int(rng.integers(1, 300))
        b = int(rng.integers(0, n + 1))
        c = int(rng.integers(0, n - b + 1))
        t = [tango_statistic(b, c, n, float(d)) for d in grid]
        assert all(x >= y - 1e-12 for x, y in zip(t, t[1:]))


def test_bounds_invert_the_tests_exactly() -> None:
    rng = np.random.default_rng(2026)
    for _ in range(3000):
        n = int(rng.integers(1, 1500))
        b = int(rng.integers(0, n + 1))
        c = int(rng.integers(0, n - b + 1))
        z_crit = float(rng.choice([Z95, 1.959963984540054, 2.326347874040841, 0.5]))
        lower, upper = tango_bounds(b, c, n, z_crit)
        assert -1.0 <= lower <= upper <= 1.0
        for d0 in (float(rng.uniform(-1, 1)), float(np.clip(lower + rng.normal(0, 1e-3), -0.999, 0.999))):
            t = tango_statistic(b, c, n, d0)
            assert (lower > d0) == (t > z_crit), (b, c, n, d0, lower)
            assert (upper < d0) == (t < -z_crit), (b, c, n, d0, upper)


def test_exact_bounds_invert_mcnemar_exhaustively() -> None:
    for n in range(1, 61):
        for b in range(n + 1):
            for c in range(n - b + 1):
                m = b + c
                p_loss = stats.binom.sf(b - 1, m, 0.5) if m else 1.0
                p_win = stats.binom.sf(c - 1, m, 0.5) if m else 1.0
                assert (exact_upper(b, c, n, 0.05) < 0) == (p_loss < 0.05), (b, c, n)
                assert (exact_lower(b, c, n, 0.05) > 0) == (p_win < 0.05), (b, c, n)
    # m = 5 losses: pi_L = 0.05^(1/5) = 0.5493, bound (5/20)(1 - 2 * 0.5493)
    assert exact_upper(5, 0, 20, 0.05) == pytest.approx(0.25 * (1 - 2 * 0.05 ** 0.2), rel=1e-12)
    assert exact_upper(0, 0, 20, 0.05) == 0.0


def test_go_p_table_matches_single_calls() -> None:
    b, c, p = go_p_table(60, -0.05)
    rng = np.random.default_rng(3)
    for i in rng.integers(0, b.size, 60):
        assert go_p(int(b[i]), int(c[i]), 60, -0.05) == pytest.approx(p[i], abs=1e-10)


@pytest.mark.xfail(strict=True, reason="go_p is not monotone in delta0 (exact unconditional p-values can dip: "
                   "b=5 c=20 n=109 has p 0.063 at 0.0588 and 0.047 at 0.0600), and go_lower only checks go_p at "
                   "Tango's bound: open issue, see the report")
def test_go_lower_inverts_the_go_test() -> None:
    rng = np.random.default_rng(5)
    for _ in range(40):
        n = int(rng.integers(20, 400))
        b = int(rng.integers(0, max(1, n // 5)))
        c = int(rng.integers(0, max(1, n // 5)))
        low = go_lower(b, c, n, 0.05)
        assert low <= tango_bounds(b, c, n, Z95)[0]
        for d0 in (low - 1e-6, low + 1e-6, float(rng.uniform(-0.3, 0.1))):
            if -1 < d0 < 1 and abs(d0 - low) > 1e-11:
                assert (low > d0) == go_rejects(b, c, n, d0, 0.05), (b, c, n, d0, low)


TOLERANCES = (0.5, 1.0, 2.0, 2.75, 5.0, 10.0)


@pytest.mark.parametrize("t", TOLERANCES)
def test_go_false_pass_rate_at_most_alpha_n100(t: float) -> None:
    n, drop = 100, t / 100
    tango, exact = go_regions(n, drop, 0.05)
    for d in sorted({drop, 0.02, 0.05, 0.20}):
        if d >= drop:
            assert false_pass_rate(n, drop, d, exact) <= 0.05 + 1e-9, (t, d)
    if t == 2.75:  # plain Tango is too liberal when every discordance is a loss: (1 - 0.0275)^100
        assert false_pass_rate(n, drop, drop, tango) == pytest.approx(0.9725 ** 100, rel=1e-9)


def test_zero_discordance_is_not_a_go_at_small_n() -> None:
    # b = c = 0 is the likeliest table when every discordance is a loss; under a drop of exactly t
    # its chance is (1 - t)^n, so it can only be a GO once (1 - t)^n < alpha:
    # n > ln(0.05) / ln(0.9725) = 2.995732 / 0.027885 = 107.43, i.e. n >= 108 for t = 2.75 points.
    assert tango_bounds(0, 0, 100, Z95)[0] > -0.0275  # plain Tango would say GO (T = 1.68)
    assert not go_lower(0, 0, 100, 0.05) > -0.0275
    assert not go_lower(0, 0, 107, 0.05) > -0.0275
    assert go_lower(0, 0, 108, 0.05) > -0.0275


# ----------------------------------------------------------------------------- NO-GO with a margin


def _no_go_wins_cutoffs(n: int, margin: float) -> list[int]:
    """For each number M of discordant pairs, how many win counts c = 0, 1, ... the product's paired test
    (runner.stats.paired.mcnemar_exact with this margin) calls a regression; the region is a prefix in c
    (fewer wins, more losses), found by bisection on the product's own verdicts."""
    from runner.stats.paired import mcnemar_exact

    def regression(b: int, c: int) -> bool:
        ref = [100.0] * b + [0.0] * c + [100.0] * (n - b - c)
        new = [0.0] * b + [100.0] * c + [100.0] * (n - b - c)
        return not mcnemar_exact(ref, new, 0.05, 0.2, margin=margin).passed

    out = []
    for m in range(n + 1):
        lo, hi = 0, m + 1  # regression(m - c, c) holds for c < lo, fails for c >= hi
        while lo < hi:
            mid = (lo + hi) // 2
            if regression(m - mid, mid):
                lo = mid + 1
            else:
                hi = mid
        out.append(lo)
    return out


def test_margin_no_go_false_rate_at_most_alpha_n57_m5() -> None:
    """The audit's case: plain Tango says NO-GO in 7.7% of runs whose true drop is exactly the 5-point margin
    (n = 57; the worst discordance). Under drop = m and discordance d the wins of M discordant pairs are
    Bin(M, (d - m) / 2d), M ~ Bin(n, d): the exact rate is a sum of binomial terms (scipy as the oracle)."""
    n, m = 57, 0.05
    cut = np.array(_no_go_wins_cutoffs(n, 5.0))
    mm = np.arange(n + 1)
    worst = 0.0
    for d in np.linspace(m, 0.6, 56):
        cond = np.where(cut > 0, stats.binom.cdf(cut - 1, mm, (d - m) / (2 * d)), 0.0)
        worst = max(worst, float(np.sum(stats.binom.pmf(mm, n, d) * cond)))
    assert worst <= 0.05 + 1e-9, worst
    # the plain Tango region of the same tables is too liberal (the bug): its worst rate is above alpha
    tango = [sum(1 for c in range(k + 1) if tango_p(k - c, c, n, -m, "less") < 0.05) for k in range(n + 1)]
    rates = [float(np.sum(stats.binom.pmf(mm, n, d) * np.where(np.array(tango) > 0, stats.binom.cdf(
        np.array(tango) - 1, mm, (d - m) / (2 * d)), 0.0))) for d in np.linspace(m, 0.6, 56)]
    assert max(rates) > 0.07


def test_regression_upper_mirrors_go_lower_and_the_margin_verdict() -> None:
    from runner.stats.paired_binary import regression_p, regression_upper

    assert regression_upper(7, 2, 60, 0.05) == -go_lower(2, 7, 60, 0.05)
    for b, c, n in [(10, 0, 57), (12, 3, 100), (3, 12, 100), (30, 10, 200)]:
        up = regression_upper(b, c, n, 0.05)
        for m in (0.01, 0.0275, 0.05):
            if abs(up + m) > 1e-6:
                assert (up < -m) == (regression_p(b, c, n, -m) < 0.05), (b, c, n, m, up)


@pytest.mark.parametrize(("n", "delta0"), [(57, -0.0275), (57, 0.05), (100, 0.01)])
def test_go_cutoffs_are_the_products_verdicts(n: int, delta0: float) -> None:
    """The enumeration's GO region (a cut-off per number of discordant pairs) is the product's GO test at the
    boundary of every cut-off: the last table inside holds, the first outside does not."""
    from runner.stats.paired_binary import go_test_p

    k = go_cutoffs(n, delta0, 0.05)
    for m in range(n + 1):
        for b in (int(k[m]) - 1, int(k[m])):
            if 0 <= b <= m:
                assert (go_test_p(b, m - b, n, delta0) < 0.05) == (b < k[m]), (m, b, k[m])


def test_mcnemar_cutoffs_by_hand() -> None:
    # M = 5: b = 5 only (1/32 = 0.031); M = 20: P(X >= 15) = 0.0207 < 0.05 <= P(X >= 14) = 0.0577, so c <= 5
    k = mcnemar_cutoffs(40, 0.05)
    assert (k[4], k[5], k[20]) == (0, 1, 6)
