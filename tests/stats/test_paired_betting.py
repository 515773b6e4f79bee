"""The paired rule for bounded continuous scores: the betting test (Waudby-Smith & Ramdas 2024).

Golden capitals are computed by hand from the paper's definitions (two samples, so every step is written
out below); the error rates are small seeded simulations of the settings where the paired t-test failed
(false GO 0.316 with 2% of 57 samples changed; false NO-GO 0.135 with skewed differences at n = 57).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from runner.contract.errors import ConfigError
from runner.stats.numerics import betting
from benchmarks.calibration_grid.continuous import _claims, draw
from runner.stats.rules.paired_continuous import BETTING, paired_continuous
from runner.stats.dispatch import paired_test
from runner.stats.data.pairing import pair_scores

ALPHA = 0.05


def test_capital_by_hand_truncated_bets() -> None:
    # x = [1, 1], m = 1/2: the plug-in bet sqrt(2 ln 20 / (2 s2)) exceeds c / m = 1.8 (c = 0.9) both times, so each
    # factor is 1 + 1.8 * 0.5 = 1.9 and the capital 3.61
    assert betting.upper_p([1.0, 1.0], 0.5, ALPHA) == pytest.approx(1 / 1.9**2, rel=1e-12)


def test_capital_by_hand_plug_in_bets() -> None:
    # x = [0.2, 0.2], m = 0.1 (c / m = 9 does not bind): s2_0 = 1/4; mu_1 = (0.5 + 0.2) / 2 = 0.35,
    # s2_1 = (0.25 + 0.15^2) / 2 = 0.13625; bets sqrt(2 ln 20 / (2 s2))
    b1 = math.sqrt(2 * math.log(20) / (2 * 0.25))
    b2 = math.sqrt(2 * math.log(20) / (2 * 0.13625))
    capital = (1 + b1 * 0.1) * (1 + b2 * 0.1)
    assert betting.upper_p([0.2, 0.2], 0.1, ALPHA) == pytest.approx(1 / capital, rel=1e-12)


def test_the_lower_bound_inverts_the_test() -> None:
    x = np.random.default_rng(3).beta(2, 5, 80)
    low = betting.lower_bound(x, ALPHA)
    assert betting.upper_p(x, low - 1e-6, ALPHA) < ALPHA <= betting.upper_p(x, low + 1e-6, ALPHA)


def _identical(n: int) -> tuple:
    pairs = pair_scores({str(i): 50.0 for i in range(n)}, {str(i): 50.0 for i in range(n)})
    return pairs


def test_identical_pairs_do_not_show_a_tolerance_at_57_but_do_at_large_n() -> None:
    """57 identical pairs: a 5-point drop made of one full-range loss in 20 samples goes unseen with probability
    0.95^57 = 0.054 > alpha, so no valid rule can say GO; the t-test said GO with interval [0, 0]."""
    for method in ("auto", "t"):
        res = paired_test(_identical(57), ALPHA, 0.2, tolerance=5.0, gate="noninferiority", method=method,
                          bounds=(0.0, 100.0))
        assert res.passed is False, method
    big = paired_test(_identical(400), ALPHA, 0.2, tolerance=5.0, gate="noninferiority", bounds=(0.0, 100.0))
    assert big.method == BETTING and big.passed is True and big.ci[0] > -5.0


def _rate(shape: str, claim: str, trials: int = 300) -> float:
    rng = np.random.default_rng(20261127)
    hits = 0
    for _ in range(trials):
        if claim == "go":
            hits += _claims(draw(shape, -1.0, 57, rng, against_go=True), 1.0, 0.0).within
        else:
            hits += _claims(draw(shape, 0.0, 57, rng, against_go=False), 5.0, 0.0).regression
    return hits / trials


def test_sparse_changes_give_no_false_go_at_57() -> None:
    rate = _rate("sparse 2%", "go")
    assert rate <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / 300)


def test_skewed_differences_give_no_false_no_go_at_57() -> None:
    rate = _rate("skewed", "no_go")
    assert rate <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / 300)


@pytest.mark.parametrize("hib", [True, False])
def test_interval_sides_invert_their_claims(hib: bool) -> None:
    rng = np.random.default_rng(5)
    for shift in (-6.0, -3.0, -1.0, 0.0, 2.0):
        ref = rng.uniform(20, 80, 300)
        new = np.clip(ref + (shift if hib else -shift) + rng.normal(0, 8, 300), 0, 100)
        c = _claims_for(ref, new, hib, tolerance=2.75, margin=1.0)
        gain_low, gain_high = (c.low, c.high) if hib else (-c.high, -c.low)
        assert c.within == (gain_low > -2.75) and c.regression == (gain_high < -1.0)


def _claims_for(ref, new, hib: bool, tolerance: float, margin: float):  # noqa: ANN001, ANN202
    from runner.stats.dispatch import paired_claims
    from runner.stats.settings import StatsConfig
    from runner.stats.data.hypothesis import HypothesisParams

    pairs = pair_scores({str(i): float(v) for i, v in enumerate(ref)}, {str(i): float(v) for i, v in enumerate(new)})
    return paired_claims(pairs, HypothesisParams(ALPHA, 0.2, 10.0, len(ref), hib), StatsConfig(), margin, tolerance, None,
                   [], (0.0, 100.0))[1]


def test_dispatch_and_bounds() -> None:
    pairs = pair_scores({"1": 30.0, "2": 40.0, "3": 50.0}, {"1": 29.0, "2": 38.0, "3": 47.0})
    assert paired_test(pairs, ALPHA, 0.2, bounds=(0.0, 100.0)).method == BETTING
    assert paired_test(pairs, ALPHA, 0.2).method == "paired t-test"  # unbounded: the asymptotic t-test
    with pytest.raises(ConfigError, match="bounded"):
        paired_test(pairs, ALPHA, 0.2, method="betting")
    with pytest.raises(ValueError, match="within the task's score bounds"):
        paired_test(pairs, ALPHA, 0.2, bounds=(0.0, 45.0))
    binary = pair_scores({"1": 100.0, "2": 0.0}, {"1": 0.0, "2": 0.0})
    assert paired_test(binary, ALPHA, 0.2, method="betting").method == BETTING  # 0/100 scores: within [0, 100]
    with pytest.raises(ValueError, match="tolerance"):
        paired_continuous([1.0, 2.0], [1.0, 2.0], ALPHA, 0.2, method="betting", bounds=(0.0, 10.0), tolerance=10.0)


def test_a_sorted_dataset_does_not_fool_the_test() -> None:
    """Differences sorted gains-first (a dataset ordered by subject) with mean exactly at the GO edge: betting in the
    dataset's order grows the capital on the early gains and shows GO; the order of the ids' hashes does not."""
    gain = np.concatenate((np.full(200, 20.0), np.full(200, -25.5)))  # mean -2.75: H0 of GO at tolerance 2.75
    res = paired_continuous(50 - gain / 2, 50 + gain / 2, ALPHA, 0.2, method="betting", bounds=(0.0, 100.0),
                            tolerance=2.75, gate="noninferiority")
    assert res.passed is False and res.ci[0] <= -2.75


def test_truncation_is_checked_and_used() -> None:
    from runner.stats.settings import StatsConfig, validate

    for bad in (0.0, 1.0, 1.5, True):
        with pytest.raises(ConfigError, match="betting_truncation"):
            validate(StatsConfig(betting_truncation=bad))
    # x = [1, 1], m = 1/2 with c = 1/2: each factor 1 + 1 * 0.5, capital 2.25
    assert betting.upper_p([1.0, 1.0], 0.5, ALPHA, truncation=0.5) == pytest.approx(1 / 1.5**2, rel=1e-12)


def test_advice_for_the_betting_test_reaches_go_about_80_percent() -> None:
    """n = 57, dense differences (sd 10, mean 0), tolerance 5: the z formula, (1.645 + 0.842)^2 10^2 / 5^2 = 25,
    says n = 58, where the betting test rarely says GO; the betting advice, followed with runs drawn from the
    truth, reaches GO within 0.75-0.85 (2 SE of 160 draws around it)."""
    from benchmarks.calibration_grid.continuous import _advice_rate, advice_for

    advice = advice_for(57, 0.0, 5.0, 0.0, seed=7)
    assert advice.target == "GO" and advice.n_total > 80
    rate = _advice_rate(57, 0.0, 5.0, 0.0, trials=160, seed=7)
    assert 0.75 - 2 * rate.se <= rate.value <= 0.85 + 2 * rate.se
