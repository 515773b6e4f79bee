"""The numerics behind issue 47's rules: the betting order from sample ids, the exact unconditional test of two
binomials, the z-test's exact rates and the graphical procedure (checked against scipy, brute force and Holm)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import minimize_scalar

from runner.stats.multiple_testing import adjust
from runner.stats.numerics import betting_order, graphical, two_binomials as tb, ztest_exact


def test_betting_order_is_a_function_of_the_ids_alone():
    ids = [f"mmlu/{i:04d}" for i in range(200)]
    first = betting_order.order(ids)
    assert sorted(first) == list(range(200)) and first != list(range(200))
    assert betting_order.order(list(ids)) == first  # no state, no seed
    shuffled = ids[::-1]  # the same samples listed in another order bet in the same order of ids
    assert [shuffled[i] for i in betting_order.order(shuffled)] == [ids[i] for i in first]
    # sorted input (a dataset sorted by subject) does not stay sorted: the first half is spread over the order
    assert 35 < sum(1 for i in first[:100] if i < 100) < 65


def _barnard(x_new: int, n_new: int, x_ref: int, n_ref: int, side: str) -> float:
    alternative = "greater" if side == "above" else "less"  # group 1 = reference: its proportion larger = a drop
    return stats.barnard_exact([[x_ref, x_new], [n_ref - x_ref, n_new - x_new]], alternative=alternative,
                               pooled=True).pvalue


@pytest.mark.parametrize("table", [(20, 57, 30, 57), (40, 100, 50, 100), (3, 10, 8, 12), (9, 12, 4, 10),
                                   (0, 10, 0, 12), (30, 40, 10, 25)])
@pytest.mark.parametrize("side", tb.SIDES)
def test_margin_zero_is_barnards_pooled_test(table, side):
    assert tb.p_value(tb.Table(*table), 0.0, side) == pytest.approx(_barnard(*table, side), abs=2e-6)


def _restricted_mle(x_ref: int, n_ref: int, x_new: int, n_new: int, delta: float) -> float:
    lo, hi = max(0.0, -delta), min(1.0, 1.0 - delta)

    def nll(q: float) -> float:
        p_ref = q + delta
        return -(stats.binom.logpmf(x_new, n_new, q) + stats.binom.logpmf(x_ref, n_ref, p_ref))

    return float(minimize_scalar(nll, bounds=(lo + 1e-12, hi - 1e-12), method="bounded",
                                 options={"xatol": 1e-12}).x)


@pytest.mark.parametrize("x_ref, n_ref, x_new, n_new, delta",
                         [(30, 57, 20, 57, 0.05), (30, 57, 20, 57, -0.0275), (8, 12, 3, 10, 0.1), (45, 50, 40, 60, 0.2)])
def test_score_statistic_uses_the_restricted_mle(x_ref, n_ref, x_new, n_new, delta):
    q = _restricted_mle(x_ref, n_ref, x_new, n_new, delta)
    p = q + delta
    expected = (x_ref / n_ref - x_new / n_new - delta) / math.sqrt(p * (1 - p) / n_ref + q * (1 - q) / n_new)
    assert float(tb.score_statistic(x_ref, n_ref, x_new, n_new, delta)) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("n_new, n_ref, delta", [(12, 9, 0.0), (20, 25, 0.1), (15, 15, -0.2), (30, 18, 0.0275)])
def test_statistic_is_monotone_and_the_p_value_is_the_brute_force_supremum(n_new, n_ref, delta):
    z = tb.score_statistic(np.arange(n_ref + 1)[:, None], n_ref, np.arange(n_new + 1)[None, :], n_new, delta)
    assert np.all(np.diff(z, axis=1) <= 1e-12) and np.all(np.diff(z, axis=0) >= -1e-12)
    lo, hi = max(0.0, -delta), min(1.0, 1.0 - delta)
    grid = np.linspace(lo, hi, 4001)
    for x_ref, x_new, side in [(n_ref // 2, n_new // 3, "above"), (n_ref // 3, n_new // 2, "below")]:
        obs = z[x_ref, x_new]
        extreme = (z >= obs - 1e-10) if side == "above" else (z <= obs + 1e-10)
        pmf_new = stats.binom.pmf(np.arange(n_new + 1)[:, None], n_new, grid[None, :])
        pmf_ref = stats.binom.pmf(np.arange(n_ref + 1)[:, None], n_ref, np.clip(grid + delta, 0, 1)[None, :])
        brute = float(np.max(np.einsum("rn,ng,rg->g", extreme.astype(float), pmf_new, pmf_ref)))
        got = tb.p_value(tb.Table(x_new, n_new, x_ref, n_ref), delta, side)
        assert brute - 1e-9 <= got <= brute + 1e-4


@pytest.mark.parametrize("n, n_ref, delta, side", [(57, 57, 0.0, "above"), (57, 57, 0.05, "below"),
                                                   (30, 30, 0.05, "below"), (500, 57, 0.0, "above"),
                                                   (120, 120, 0.0, "above")])
def test_the_exact_rule_holds_alpha_where_the_z_test_does_not(n, n_ref, delta, side):
    rate, _ = tb.size(n, n_ref, delta, side, 0.05)
    assert rate <= 0.05
    assert rate > 0.03  # not a rule that never decides


def test_z_test_rates_are_the_audits_and_the_calibrations():
    # exact sums, independently of benchmarks.calibration_grid.unpaired's enumeration through the product's decide()
    assert ztest_exact.rate(57, 57, 50.0, 0.05, "NO-GO", 0.0, 0.5) == pytest.approx(0.0555, abs=5e-5)
    assert ztest_exact.rate(57, 57, 50.0, 0.05, "GO", 5.0, 0.5) == pytest.approx(0.0585, abs=5e-5)
    assert ztest_exact.rate(30, 30, 50.0, 0.05, "GO", 5.0, 0.5) == pytest.approx(0.0602, abs=5e-5)
    assert ztest_exact.rate(70, 70, 50.0, 0.05, "NO-GO", 0.0, 0.5) == pytest.approx(0.0540, abs=5e-5)
    assert ztest_exact.rate(120, 120, 50.0, 0.05, "NO-GO", 0.0, 0.5) == pytest.approx(0.0532, abs=5e-5)
    assert ztest_exact.rate(500, 57, 50.0, 0.05, "NO-GO", 0.0, 0.5) == pytest.approx(0.0497, abs=5e-5)
    assert set(ztest_exact.excess(57, 57, 50.0, 0.05, 0.0, 5.0)) == {"NO-GO", "GO"}
    assert ztest_exact.excess(500, 57, 50.0, 0.05, 0.0, 5.0) == {}


def test_z_test_rate_matches_the_products_decisions():
    from benchmarks.calibration_grid.unpaired import _rate

    for n, n_ref, claim, tol in [(57, 500, "NO-GO", 0.0), (100, 57, "GO", 2.75)]:
        product = _rate(0, 0, n=n, n_ref=n_ref, p=0.5, drop=tol, tolerance=tol, claim=claim).value
        assert ztest_exact.rate(n, n_ref, 50.0, 0.05, claim, tol, 0.5) == pytest.approx(product, abs=1e-9)


def test_holm_graph_is_holm_and_adjusted_p_values_invert_the_rejections():
    """Equal weights passed on equally: the same rejections and adjusted p-values as the project's Holm; on the
    tiers' graph the adjusted p-values reject exactly what Algorithm 1 rejects."""
    rng = np.random.default_rng(3)
    for _ in range(400):
        m = int(rng.integers(1, 7))
        p = list(rng.uniform(0, 0.1, m))
        alphas = list(rng.choice([0.05, 0.01], m))
        holm = adjust(p, alphas, "holm")
        assert graphical.reject(graphical.holm(m), p, alphas) == list(holm.reject)
        assert graphical.adjusted(graphical.holm(m), p, alphas) == pytest.approx(holm.p_adjusted)
        g = graphical.tiers([True] + [False] * (m - 1), 0.8)
        assert [a < al for a, al in zip(graphical.adjusted(g, p, alphas), alphas)] == graphical.reject(g, p, alphas)


def test_fixed_sequence_and_weighted_bonferroni():
    fixed = graphical.Graph((1.0, 0.0), ((0.0, 1.0), (0.0, 0.0)))
    assert graphical.reject(fixed, [0.04, 0.01], [0.05, 0.05]) == [True, True]
    assert graphical.reject(fixed, [0.06, 0.001], [0.05, 0.05]) == [False, False]
    g = graphical.tiers([True, False, False, False], 0.8)
    assert g.weights == pytest.approx((0.8, 0.2 / 3, 0.2 / 3, 0.2 / 3))
    assert graphical.reject(g, [0.039, 0.5, 0.5, 0.5], [0.05] * 4) == [True, False, False, False]
    assert graphical.reject(g, [0.041, 0.5, 0.5, 0.5], [0.05] * 4) == [False] * 4
    # a rejected supporting task passes its share to the other supporting ones first; once all are rejected the
    # critical one tests at the whole alpha
    assert not graphical.reject(g, [0.045, 0.001, 0.5, 0.5], [0.05] * 4)[0]
    assert graphical.reject(g, [0.045, 0.001, 0.001, 0.001], [0.05] * 4) == [True] * 4


@pytest.mark.parametrize("tiers", [(True, False), (True, False, False, False), (True, True, False, False, False)])
def test_tier_graph_family_wise_rate_is_at_most_alpha_exactly(tiers):
    """Under the global null a rejection needs a first one, ``p_i < w_i alpha``: with independent uniform p-values
    the family-wise rate is ``1 - prod(1 - w_i alpha)`` exactly, at most ``sum(w_i) alpha``; Monte Carlo agrees."""
    g = graphical.tiers(list(tiers), 0.8)
    exact = 1.0 - math.prod(1.0 - w * 0.05 for w in g.weights)
    assert exact <= 0.05 and sum(g.weights) == pytest.approx(1.0)
    rng = np.random.default_rng(5)
    trials = 20000
    hits = sum(any(graphical.reject(g, list(rng.uniform(size=len(tiers))), [0.05] * len(tiers)))
               for _ in range(trials))
    assert abs(hits / trials - exact) < 4 * math.sqrt(exact * (1 - exact) / trials)


def test_graph_input_is_checked():
    with pytest.raises(ValueError):
        graphical.Graph((0.7, 0.7), ((0.0, 1.0), (1.0, 0.0)))
    with pytest.raises(ValueError):
        graphical.tiers([True, False], 0.0)
    with pytest.raises(ValueError):
        tb.Table(5, 4, 1, 2)


def test_score_bounds_are_where_the_brute_force_statistic_crosses_the_critical_value():
    from statistics import NormalDist

    zc = NormalDist().inv_cdf(0.95)
    table = tb.Table(20, 57, 30, 57)
    low, high = tb.score_bound(table, zc, "above"), tb.score_bound(table, zc, "below")

    def brute(delta: float) -> float:
        q = _restricted_mle(30, 57, 20, 57, delta)
        p = q + delta
        return (30 / 57 - 20 / 57 - delta) / math.sqrt(p * (1 - p) / 57 + q * (1 - q) / 57)

    assert brute(low) == pytest.approx(zc, abs=1e-4) and brute(high) == pytest.approx(-zc, abs=1e-4)


def test_exact_claims_agree_with_their_pinned_bounds():
    for table, margin, tol in [(tb.Table(20, 57, 30, 57), 0.0, 0.05), (tb.Table(300, 500, 300, 500), 0.0, 0.05),
                               (tb.Table(305, 500, 300, 500), 0.0, 0.0275)]:
        c = tb.claims(table, margin, tol, 0.05)
        assert c.regression == (c.low > margin) and c.within == (c.high < tol)
        assert c.regression == (c.p_regression < 0.05) and c.within == (c.p_within < 0.05)


def test_betting_verdict_does_not_move_with_the_seed():
    """GSM8K-like 0/50/100 differences at drop = tolerance 2: the seeded order changed the p-value (and, in 18% of
    such data sets, the verdict) with stats.bootstrap_seed; the order of the ids' hashes ignores it."""
    from runner.stats.data.pairing import pair_scores
    from runner.stats.dispatch import paired_test

    rng = np.random.default_rng(11)
    gain = rng.choice([-100.0, -50.0, 0.0, 50.0, 100.0], size=600, p=[0.05, 0.04, 0.84, 0.04, 0.03])
    ids = [f"gsm8k/{i}" for i in range(600)]
    ref = {i: 50.0 - g / 2 for i, g in zip(ids, gain)}
    new = {i: 50.0 + g / 2 for i, g in zip(ids, gain)}
    pairs = pair_scores(ref, new)
    p = {paired_test(pairs, 0.05, 0.2, seed=s, tolerance=2.0, gate="noninferiority", bounds=(0.0, 100.0)).p_value
         for s in range(4)}
    assert len(p) == 1
    listed_otherwise = pair_scores(dict(reversed(list(ref.items()))), new)
    assert paired_test(listed_otherwise, 0.05, 0.2, seed=9, tolerance=2.0, gate="noninferiority",
                       bounds=(0.0, 100.0)).p_value in p


def _unpaired_job(x_new: int, n: int, reference: float, n_ref: int, unpaired_test: str, scores=None):  # noqa: ANN001
    from runner.contract.evaluator import ScoredSample
    from runner.stats.data.entry import Entry
    from runner.stats.data.hypothesis import HypothesisParams
    from runner.stats.data.tolerance import Tolerance
    from runner.stats.dispatch import decide_against
    from runner.stats.settings import StatsConfig

    values = scores if scores is not None else [100.0] * x_new + [0.0] * (n - x_new)
    scored = [ScoredSample(f"s{i}", "", "", "", v, {}) for i, v in enumerate(values)]
    return decide_against(Entry(reference, samples_measured=n_ref), scored, sum(values) / n,
                          HypothesisParams(0.05, 0.2, 50.0, n), StatsConfig(unpaired_test=unpaired_test), None,
                          "accuracy", None, None, (), Tolerance(5.0, "test"))


def test_exact_unpaired_rule_decides_both_claims_through_the_job():
    """20 of 57 against 30 of 57: the exact p-value is scipy's pooled Barnard (0.0326), NO-GO; the z-test's report
    of the same run carries its excess at n = 57 (0.0555 / 0.0585 > 0.05)."""
    exact = _unpaired_job(20, 57, 100.0 * 30 / 57, 57, "exact")
    assert exact.p_value == pytest.approx(_barnard(20, 57, 30, 57, "above"), abs=2e-6)
    assert exact.outcome == "NO-GO" and exact.test.startswith("exact unconditional")
    assert exact.claims.high < 0 and not exact.claims.within
    upstream = _unpaired_job(20, 57, 100.0 * 30 / 57, 57, "ztest")
    assert any("exceeds alpha" in n and "0.0555" in n for n in upstream.notes)
    assert not any("exceeds alpha" in n for n in exact.notes)


def test_exact_unpaired_rule_refuses_what_it_cannot_count():
    from runner.contract.errors import ConfigError

    with pytest.raises(ConfigError, match="0/100"):
        _unpaired_job(0, 4, 50.0, 4, "exact", scores=[100.0, 50.0, 0.0, 100.0])
    with pytest.raises(ConfigError, match="whole number"):
        _unpaired_job(20, 57, 51.3, 57, "exact")
