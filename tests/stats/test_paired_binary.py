"""Paired binary scores with a margin: Tango's score test, its interval, exact bounds, the GO test.

Golden checks use independent constructions (a numerical constrained maximisation, exact binomial
tails, McNemar's score statistic), never the closed forms under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from runner.stats.numerics.paired_binomial.tango import (
    exact_lower,
    exact_upper,
    go_lower,
    go_rejects,
    restricted_mle,
    tango_bounds,
    tango_p,
    tango_statistic,
)
from runner.stats.numerics.paired_binomial.enumeration import false_pass_rate, go_cutoffs, go_regions, mcnemar_cutoffs

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
    n_max = 40  # every table up to n = 40 (11 480 tables); the oracle's tails are scipy's, all at once
    tables = [(n, b, c) for n in range(1, n_max + 1) for b in range(n + 1) for c in range(n - b + 1)]
    n_, b_, c_ = (np.array(x) for x in zip(*tables))
    m_ = b_ + c_
    p_loss = np.where(m_ > 0, stats.binom.sf(b_ - 1, m_, 0.5), 1.0)
    p_win = np.where(m_ > 0, stats.binom.sf(c_ - 1, m_, 0.5), 1.0)
    for (n, b, c), pl, pw in zip(tables, p_loss, p_win):
        assert (exact_upper(b, c, n, 0.05) < 0) == (pl < 0.05), (b, c, n)
        assert (exact_lower(b, c, n, 0.05) > 0) == (pw < 0.05), (b, c, n)
    # m = 5 losses: pi_L = 0.05^(1/5) = 0.5493, bound (5/20)(1 - 2 * 0.5493)
    assert exact_upper(5, 0, 20, 0.05) == pytest.approx(0.25 * (1 - 2 * 0.05 ** 0.2), rel=1e-12)
    assert exact_upper(0, 0, 20, 0.05) == 0.0


def _brute_p(b: int, c: int, n: int, delta0: float, delta: float) -> float:
    """The exact p-value by brute force, independent of the product's shortcuts (cut-offs, windows, Chernoff
    and Bhattacharyya pruning): the tables whose Tango bound is at least the observed one (each bound from
    tango_bounds), their trinomial chances from scipy, the maximum over delta' = min(delta, d) on the same
    grid of d and at the edge d = |delta| of the null."""
    from runner.stats.numerics.paired_binomial.unconditional import support

    s_obs = tango_bounds(b, c, n, Z95)[0]
    region = [(bb, cc) for bb in range(n + 1) for cc in range(n - bb + 1)
              if tango_bounds(bb, cc, n, Z95)[0] >= s_obs - 1e-12]
    ds = [float(d) for d in support(delta0, n) if d >= -delta] + ([-delta] if delta < 0 else [])
    best = 0.0
    for d in ds:
        dp = min(delta, d)
        probs = [max((d - dp) / 2, 0.0), max((d + dp) / 2, 0.0), 1 - d]
        best = max(best, sum(stats.multinomial.pmf([bb, cc, n - bb - cc], n, probs) for bb, cc in region))
    return min(best, 1.0)


@pytest.mark.parametrize(("b", "c", "n", "delta0", "delta"), [
    (1, 6, 20, -0.05, -0.05), (0, 0, 20, -0.05, -0.08), (2, 2, 16, 0.0, 0.0), (3, 9, 20, -0.1, 0.02),
])
def test_go_p_is_the_brute_force_p_value(b: int, c: int, n: int, delta0: float, delta: float) -> None:
    from runner.stats.numerics.paired_binomial.tango import go_p_at

    s_obs = tango_bounds(b, c, n, Z95)[0]
    assert go_p_at(s_obs, n, delta0, 0.05, at=delta) == pytest.approx(_brute_p(b, c, n, delta0, delta), abs=1e-9)


def test_go_lower_inverts_the_go_test() -> None:
    """At the threshold and at every other delta the bound is above delta exactly when the test (same ordering,
    same grid) rejects there. b=5 c=20 n=109 is where the p-value of tests that re-order the tables at each
    delta dipped (0.063 at 0.0588, 0.047 at 0.0600), so that no bound could invert them."""
    from runner.stats.numerics.paired_binomial.tango import go_p_at

    rng = np.random.default_rng(5)
    tables = [(5, 20, 109, 0.06), (0, 0, 108, -0.0275), (0, 0, 107, -0.0275), (12, 3, 100, -0.0275)]
    for _ in range(14):
        n = int(rng.integers(20, 400))
        tables.append((int(rng.integers(0, max(1, n // 5))), int(rng.integers(0, max(1, n // 5))), n,
                       float(rng.choice([-0.0275, -0.05, 0.0, 0.01]))))
    for b, c, n, d0 in tables:
        low = go_lower(b, c, n, 0.05, d0)
        s_obs = tango_bounds(b, c, n, Z95)[0]
        assert low <= s_obs
        assert (low > d0) == go_rejects(b, c, n, d0, 0.05), (b, c, n, d0, low)
        for delta in (low - 1e-9, low + 1e-9, float(np.nextafter(low, -1.0)), low, float(rng.uniform(-0.3, 0.1))):
            if -1 < delta < 1:
                rejects = tango_statistic(b, c, n, delta) > Z95 and go_p_at(s_obs, n, d0, 0.05, at=delta) < 0.05
                assert (low > delta) == rejects, (b, c, n, d0, delta, low)


def test_go_lower_covers_at_every_truth_n12() -> None:
    """Exact coverage of the printed GO bound over every table of n = 12 (scipy's trinomial chances), at true
    differences on and off the threshold and discordances down to the edge of the null: at least 1 - alpha."""
    n, d0 = 12, -0.05
    tables = [(b, c) for b in range(n + 1) for c in range(n - b + 1)]
    low = {t: go_lower(t[0], t[1], n, 0.05, d0) for t in tables}
    for truth in (-0.2, -0.05, -0.01, 0.0, 0.1):
        for d in sorted({abs(truth), abs(truth) + 0.01, 0.1, 0.3, 0.7, 1.0}):
            if d == 0 or d < abs(truth):
                continue
            probs = [(d - truth) / 2, (d + truth) / 2, 1 - d]
            miss = sum(stats.multinomial.pmf([b, c, n - b - c], n, probs) for (b, c), lo in low.items() if lo > truth)
            assert miss <= 0.05 + 1e-12, (truth, d, miss)


def test_no_discordance_bound_is_the_edge_of_the_null() -> None:
    """b = c = 0 is the likeliest table when every discordant pair is a loss: under Delta = -e and d = e its chance
    is (1 - e)^n, above alpha for e < 1 - alpha^(1/n), so the bound must stay at or below -(1 - alpha^(1/n))
    whatever n (a nuisance grid without that edge gives -0.000675 at n = 4096, above -0.000731)."""
    for n in (57, 500, 4096):
        edge = 1 - 0.05 ** (1 / n)
        low = go_lower(0, 0, n, 0.05, -0.0275)
        assert -edge - 0.2 / n <= low <= -edge + 1e-12, (n, low, edge)


def test_the_grid_misses_no_higher_maximum() -> None:
    """The p-value on the product's grid, against every value of a grid ten times denser, near alpha."""
    from runner.stats.numerics.paired_binomial.tango import go_p_at
    from runner.stats.numerics.paired_binomial.unconditional import dense_check

    for b, c, n, d0 in [(5, 20, 109, 0.06), (30, 40, 500, -0.0275), (2, 9, 57, -0.0275), (40, 10, 300, -0.05)]:
        s_obs = tango_bounds(b, c, n, Z95)[0]
        for delta in (d0, s_obs):
            p = go_p_at(s_obs, n, d0, 0.05, at=delta)
            dense = dense_check(s_obs, n, Z95, d0, delta, 2000)
            assert dense <= p + 2e-3 * max(p, 0.01), (b, c, n, d0, delta, p, dense)


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
    assert not go_lower(0, 0, 100, 0.05, -0.0275) > -0.0275
    assert not go_lower(0, 0, 107, 0.05, -0.0275) > -0.0275
    assert go_lower(0, 0, 108, 0.05, -0.0275) > -0.0275


# ----------------------------------------------------------------------------- NO-GO with a margin


def _no_go_wins_cutoffs(n: int, margin: float) -> list[int]:
    """For each number M of discordant pairs, how many win counts c = 0, 1, ... the product's paired test
    (runner.stats.rules.paired_binary.mcnemar_exact with this margin) calls a regression; the region is a prefix in c
    (fewer wins, more losses), found by bisection on the product's own verdicts."""
    from runner.stats.rules.paired_binary import mcnemar_exact

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
    from runner.stats.numerics.paired_binomial.tango import regression_p, regression_upper

    assert regression_upper(7, 2, 60, 0.05, -0.03) == -go_lower(2, 7, 60, 0.05, 0.03)
    for b, c, n in [(10, 0, 57), (12, 3, 100), (3, 12, 100), (30, 10, 200)]:
        for m in (0.01, 0.0275, 0.05):
            up = regression_upper(b, c, n, 0.05, -m)
            assert (up < -m) == (regression_p(b, c, n, -m, 0.05) < 0.05), (b, c, n, m, up)


@pytest.mark.parametrize(("n", "delta0"), [(57, -0.0275), (57, 0.05), (100, 0.01)])
def test_go_cutoffs_are_the_products_verdicts(n: int, delta0: float) -> None:
    """The enumeration's GO region (a cut-off per number of discordant pairs) is the product's GO test at the
    boundary of every cut-off: the last table inside holds, the first outside does not."""
    from runner.stats.numerics.paired_binomial.tango import go_test_p

    k = go_cutoffs(n, delta0, 0.05)
    for m in range(0, n + 1, 3):
        for b in (int(k[m]) - 1, int(k[m])):
            if 0 <= b <= m:
                assert (go_test_p(b, m - b, n, delta0, 0.05) < 0.05) == (b < k[m]), (m, b, k[m])
                if m % 12 == 0:
                    assert (go_lower(b, m - b, n, 0.05, delta0) > delta0) == (b < k[m]), (m, b, k[m])


def test_mcnemar_cutoffs_by_hand() -> None:
    # M = 5: b = 5 only (1/32 = 0.031); M = 20: P(X >= 15) = 0.0207 < 0.05 <= P(X >= 14) = 0.0577, so c <= 5
    k = mcnemar_cutoffs(40, 0.05)
    assert (k[4], k[5], k[20]) == (0, 1, 6)
