"""Paired tests against numbers worked out by hand.

Golden values come from exact binomial sums, closed-form Student-t CDFs (1 and 2 degrees of
freedom) and the published normal quantiles, never from the functions under test.
"""

from __future__ import annotations

import json
import math
import statistics

import pytest

from runner.contract.errors import UserError
from runner.stats.rules.paired_binary import mcnemar_exact
from runner.stats.rules.paired_continuous import paired_continuous
from runner.stats.dispatch import paired_test
from runner.stats.data.paired_result import PairedResult, min_discordant_to_reject
from runner.stats.data.pairing import PairingError, pair_scores
from runner.stats.planning.paired import paired_feasible, paired_min_samples, paired_theta
from runner.stats.numerics.scale import estimate_sigma, near_chance_warning

Z_005 = -1.6448536
Z_020 = -0.8416212
K = 1.6448536 + 0.8416212  # |z(0.05)| + |z(0.2)| = 2.4864748
TOL = 1e-5


def runs(b: int, c: int, both_right: int = 0, both_wrong: int = 0, hi: float = 100.0) -> tuple[list[float], list[float]]:
    """Reference and new 0/hi scores with b (ref right, new wrong) and c (ref wrong, new right)."""
    ref = [hi] * b + [0.0] * c + [hi] * both_right + [0.0] * both_wrong
    new = [0.0] * b + [hi] * c + [hi] * both_right + [0.0] * both_wrong
    return ref, new


# --------------------------------------------------------------------------- McNemar


def test_mcnemar_b8_c2_matches_binomial_tail() -> None:
    ref, new = runs(8, 2, both_right=5, both_wrong=5)
    res = mcnemar_exact(ref, new, alpha=0.05, beta=0.2)
    # P(X >= 8), X ~ Bin(10, 1/2) = (C(10,8) + C(10,9) + C(10,10)) / 2^10 = (45 + 10 + 1) / 1024
    assert res.p_value == pytest.approx(56 / 1024, abs=1e-12)
    assert res.p_value == pytest.approx(0.0546875, abs=1e-12)
    assert res.passed is True  # 0.0547 is not < 0.05
    assert res.discordant == (8, 2)
    assert res.n == 20
    assert res.discordance_rate == pytest.approx(0.5)
    # reference right on 8 + 5 = 13 of 20 (65), new on 2 + 5 = 7 of 20 (35)
    assert res.reference_mean == pytest.approx(65.0)
    assert res.new_mean == pytest.approx(35.0)
    assert res.mean_diff == pytest.approx(-30.0)
    # theta = 100 * (K * sqrt(0.5 / 20) + 1 / 20) = 100 * (2.4864748 * 0.1581139 + 0.05) = 44.31462
    assert res.theta_paired == pytest.approx(100 * (K * math.sqrt(0.5 / 20) + 1 / 20), abs=TOL)
    assert res.theta_paired == pytest.approx(44.31462, abs=1e-4)


def test_mcnemar_b9_c1_is_a_regression() -> None:
    ref, new = runs(9, 1, both_right=10)
    res = mcnemar_exact(ref, new, alpha=0.05, beta=0.2)
    assert res.p_value == pytest.approx(11 / 1024, abs=1e-12)  # (C(10,9) + C(10,10)) / 2^10
    assert res.passed is False


def test_mcnemar_five_losses_no_wins() -> None:
    ref, new = runs(5, 0, both_right=3)
    res = mcnemar_exact(ref, new, alpha=0.05, beta=0.2)
    assert res.p_value == pytest.approx(1 / 32, abs=1e-12)  # 0.5^5
    assert res.passed is False


def test_mcnemar_no_discordant_pairs() -> None:
    ref, new = runs(0, 0, both_right=6, both_wrong=4)
    res = mcnemar_exact(ref, new, alpha=0.05, beta=0.2)
    assert res.p_value == 1.0 and res.passed is True
    assert res.discordant == (0, 0) and res.mean_diff == 0.0
    assert math.isinf(res.theta_paired)  # no disagreement: nothing can be detected
    d = res.to_dict()
    assert d["theta_paired"] is None
    json.dumps(d)  # JSON-friendly
    assert "undefined" in res.render()


def test_mcnemar_tie() -> None:
    ref, new = runs(3, 3, both_right=4)
    res = mcnemar_exact(ref, new, alpha=0.05, beta=0.2)
    # P(X >= 3), X ~ Bin(6, 1/2) = (20 + 15 + 6 + 1) / 64
    assert res.p_value == pytest.approx(42 / 64, abs=1e-12)
    assert res.passed is True and res.mean_diff == 0.0


def test_mcnemar_improvement_passes() -> None:
    ref, new = runs(2, 8)
    res = mcnemar_exact(ref, new, alpha=0.05, beta=0.2)
    # P(X >= 2), X ~ Bin(10, 1/2) = 1 - (1 + 10) / 1024
    assert res.p_value == pytest.approx(1013 / 1024, abs=1e-12)
    assert res.passed is True and res.mean_diff == pytest.approx(60.0)


def test_mcnemar_accepts_0_1_and_booleans() -> None:
    r100, n100 = runs(8, 2, both_right=5, both_wrong=5)
    r1, n1 = runs(8, 2, both_right=5, both_wrong=5, hi=1.0)
    a = mcnemar_exact(r100, n100, 0.05, 0.2)
    b = mcnemar_exact(r1, n1, 0.05, 0.2)
    c = mcnemar_exact([bool(v) for v in r1], [bool(v) for v in n1], 0.05, 0.2)
    assert a.p_value == b.p_value == c.p_value
    assert a.discordant == b.discordant == c.discordant == (8, 2)
    assert b.mean_diff == pytest.approx(-30.0)  # reported on the 0-100 scale


def test_mcnemar_lower_is_better_swaps_roles() -> None:
    # An error-rate style 0/100 metric: 100 is bad. The same arrays read the other way round.
    ref, new = runs(8, 2)
    res = mcnemar_exact(ref, new, 0.05, 0.2, higher_is_better=False)
    assert res.discordant == (2, 8)
    assert res.p_value == pytest.approx(1013 / 1024, abs=1e-12)
    res = mcnemar_exact(new, ref, 0.05, 0.2, higher_is_better=False)  # new has more 100s: worse
    assert res.discordant == (8, 2) and res.p_value == pytest.approx(56 / 1024, abs=1e-12)


def test_mcnemar_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="binary"):
        mcnemar_exact([0, 50, 100], [0, 100, 100], 0.05, 0.2)
    with pytest.raises(ValueError):
        mcnemar_exact([0, 100], [0], 0.05, 0.2)
    with pytest.raises(ValueError):
        mcnemar_exact([], [], 0.05, 0.2)
    with pytest.raises(ValueError):
        mcnemar_exact([0, 100], [100, 0], 1.5, 0.2)


def test_min_discordant_to_reject() -> None:
    assert min_discordant_to_reject(0.05) == 5  # 0.5^4 = 0.0625 >= 0.05 > 0.5^5 = 0.03125
    assert min_discordant_to_reject(0.01) == 7  # 0.5^6 = 0.0156 >= 0.01 > 0.5^7 = 0.0078


def test_result_render_and_dict() -> None:
    ref, new = runs(8, 2, both_right=5, both_wrong=5)
    res = mcnemar_exact(ref, new, 0.05, 0.2)
    assert isinstance(res, PairedResult)
    text = res.render()
    assert "McNemar" in text and "b=8 c=2" in text and "p-value" in text and "paired test: no regression shown" in text
    d = json.loads(json.dumps(res.to_dict()))
    assert d["discordant_b"] == 8 and d["discordant_c"] == 2 and d["method"] == "McNemar exact"
    assert d["p_value"] == pytest.approx(0.0546875)
    assert "paired test: regression shown" in mcnemar_exact(*runs(9, 1), 0.05, 0.2).render()


# --------------------------------------------------------------------------- continuous


def test_t_test_three_samples_closed_form() -> None:
    # differences -1, -2, -3: mean -2, sd 1, t = -2 / (1 / sqrt 3) = -3.4641016, df 2:
    # F(t) = 1/2 + t / (2 sqrt(2 + t^2)) = 0.5 - 3.4641016 / (2 sqrt 14) = 0.0370899
    res = paired_continuous([30.0, 40.0, 50.0], [29.0, 38.0, 47.0], 0.05, 0.2, True)
    t = -2 * math.sqrt(3)
    assert res.p_value == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-9)
    assert res.p_value == pytest.approx(0.0370899, abs=1e-6)
    assert res.passed is False
    assert res.mean_diff == pytest.approx(-2.0)
    assert res.sd_diff == pytest.approx(1.0)
    assert res.theta_paired == pytest.approx(K / math.sqrt(3), abs=TOL)  # K * sd / sqrt(n)
    assert res.discordant is None and res.method == "paired t-test"


def test_t_test_two_samples_closed_form() -> None:
    # differences -1, -3: mean -2, sd sqrt 2, t = -2 / (sqrt 2 / sqrt 2) = -2, df 1:
    # F(t) = 1/2 + atan(t) / pi = 0.1475836
    res = paired_continuous([10.0, 10.0], [9.0, 7.0], 0.05, 0.2, True)
    assert res.p_value == pytest.approx(0.5 + math.atan(-2) / math.pi, abs=1e-9)
    assert res.passed is True


def test_t_test_lower_is_better() -> None:
    ref = [10.0, 10.0, 10.0]
    worse = [11.0, 12.0, 13.0]  # perplexity went up by 1, 2, 3: a regression
    res = paired_continuous(ref, worse, 0.05, 0.2, higher_is_better=False)
    t = -2 * math.sqrt(3)
    assert res.p_value == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-9)
    assert res.passed is False
    assert res.mean_diff == pytest.approx(2.0)  # new - reference, in metric units
    better = paired_continuous(ref, worse, 0.05, 0.2, higher_is_better=True)  # same numbers, accuracy-like
    assert better.p_value == pytest.approx(1 - res.p_value, abs=1e-9) and better.passed is True


def test_t_test_zero_variance_shows_nothing() -> None:
    """Differences that never vary carry no estimate of their spread: the t-test shows neither claim."""
    assert paired_continuous([5.0, 5.0, 5.0], [4.0, 4.0, 4.0], 0.05, 0.2).p_value == 1.0
    assert paired_continuous([5.0, 5.0, 5.0], [5.0, 5.0, 5.0], 0.05, 0.2).p_value == 1.0
    assert paired_continuous([5.0, 5.0, 5.0], [6.0, 6.0, 6.0], 0.05, 0.2, higher_is_better=False).passed is True
    same = paired_continuous([50.0] * 57, [50.0] * 57, 0.05, 0.2, tolerance=5.0, gate="noninferiority")
    assert same.passed is False and same.ci == (-math.inf, math.inf)


def test_bootstrap_direction_seed_and_bounds() -> None:
    ref = [float(v) for v in range(40)]
    worse = [v - 1.0 - (i % 3) for i, v in enumerate(ref)]  # every sample drops by 1 to 3
    res = paired_continuous(ref, worse, 0.05, 0.2, method="bootstrap", seed=7, n_boot=2000)
    assert res.method == "paired bootstrap"
    assert res.p_value == pytest.approx(1 / 2001)  # no centred resample mean is as low as -2
    assert res.passed is False
    again = paired_continuous(ref, worse, 0.05, 0.2, method="bootstrap", seed=7, n_boot=2000)
    assert again.p_value == res.p_value
    up = paired_continuous(ref, worse, 0.05, 0.2, higher_is_better=False, method="bootstrap", seed=7, n_boot=2000)
    assert up.p_value == pytest.approx(1.0) and up.passed is True  # lower is better: this is an improvement
    noisy_ref = [50.0 + (7 * i % 11) for i in range(60)]
    noisy_new = [v + ((-1) ** i) * 3.0 for i, v in enumerate(noisy_ref)]  # mean difference 0
    res = paired_continuous(noisy_ref, noisy_new, 0.05, 0.2, method="bootstrap", seed=1, n_boot=4000)
    assert 0.3 < res.p_value <= 1.0 and res.passed is True
    # the drop the design detects, (z_0.95 + z_0.8) sd(diff) / sqrt(n), is the same whatever test decides
    sd = statistics.stdev(b - a for a, b in zip(noisy_ref, noisy_new))
    assert res.theta_paired == pytest.approx((1.6448536 + 0.8416212) * sd / math.sqrt(60), rel=1e-6)


def test_continuous_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        paired_continuous([1.0], [1.0], 0.05, 0.2)
    with pytest.raises(ValueError):
        paired_continuous([1.0, 2.0], [1.0], 0.05, 0.2)
    with pytest.raises(ValueError):
        paired_continuous([1.0, 2.0], [1.0, 2.0], 0.05, 0.2, method="wilcoxon")
    with pytest.raises(ValueError):
        paired_continuous([1.0, math.nan], [1.0, 2.0], 0.05, 0.2)


# --------------------------------------------------------------------------- pairing


def test_pair_scores_matches_ids() -> None:
    ref = {"a/1": 100.0, "a/2": 0.0, "b/1": 100.0, "x/9": 100.0}
    new = {"b/1": 0.0, "a/1": 100.0, "a/2": 100.0, "y/3": 0.0, "y/4": 0.0}
    pairs = pair_scores(ref, new)
    assert pairs.ids == ("a/1", "a/2", "b/1")
    assert pairs.reference == (100.0, 0.0, 100.0)
    assert pairs.new == (100.0, 100.0, 0.0)
    assert pairs.n_matched == 3
    assert pairs.reference_only == ("x/9",) and pairs.new_only == ("y/3", "y/4")
    assert "3 of 4" in pairs.summary()
    res = paired_test(pairs, 0.05, 0.2)
    assert res.method == "McNemar exact" and res.discordant == (1, 1)


def test_pair_scores_no_common_id() -> None:
    with pytest.raises(PairingError) as info:
        pair_scores({"a": 1.0}, {"b": 1.0})
    assert isinstance(info.value, UserError) and isinstance(info.value, ValueError)
    assert "no sample id in common" in str(info.value)


def test_pair_scores_bad_value() -> None:
    with pytest.raises(PairingError, match="finite"):
        pair_scores({"a": 1.0, "b": "x"}, {"a": 1.0, "b": 2.0})  # type: ignore[dict-item]
    with pytest.raises(PairingError):
        pair_scores({"a": math.nan}, {"a": 2.0})


def test_paired_test_dispatches_continuous() -> None:
    pairs = pair_scores({"1": 30.0, "2": 40.0, "3": 50.0}, {"1": 29.0, "2": 38.0, "3": 47.0})
    assert paired_test(pairs, 0.05, 0.2).method == "paired t-test"
    assert paired_test(pairs, 0.05, 0.2, method="bootstrap", seed=0).method == "paired bootstrap"


# --------------------------------------------------------------------------- planning


def hand_theta(n: int, agreement: float, continuity: bool = True) -> float:
    return 100 * (K * math.sqrt((1 - agreement) / n) + (1 / n if continuity else 0.0))


def test_paired_theta_hand_arithmetic() -> None:
    """The split model (the agreement holds under the regression): the closed form."""
    # 100 * 2.4864748 * sqrt(0.05 / 1024) = 248.64748 * 0.0069877 = 1.7374771; continuity adds 100 / 1024
    assert paired_theta(1024, 0.95, 0.05, 0.2, continuity=False, model="split") == pytest.approx(1.7374771, abs=TOL)
    assert paired_theta(1024, 0.95, 0.05, 0.2, model="split") == pytest.approx(1.7374771 + 0.09765625, abs=TOL)
    # 100 * 2.4864748 * sqrt(0.1 / 4096) = 248.64748 * 0.0049411 = 1.2285818
    assert paired_theta(4096, 0.90, 0.05, 0.2, continuity=False, model="split") == pytest.approx(1.2285818, abs=TOL)
    for n, a in ((256, 0.95), (512, 0.98), (4096, 0.9)):
        assert paired_theta(n, a, 0.05, 0.2, model="split") == pytest.approx(hand_theta(n, a), abs=TOL)


def test_paired_min_samples_plain_closed_form() -> None:
    # n >= (1 - A) * (100 K / T)^2: 0.10 * (248.64748 / 3)^2 = 686.95 -> 687; 0.05 -> 343.48 -> 344
    assert paired_min_samples(3, 0.90, 0.05, 0.2, continuity=False, model="split") == 687
    assert paired_min_samples(3, 0.95, 0.05, 0.2, continuity=False, model="split") == 344
    assert paired_min_samples(3, 0.98, 0.05, 0.2, continuity=False, model="split") == 138  # 137.39 -> 138


@pytest.mark.parametrize(("agreement", "expected"), [(0.90, 753), (0.95, 408), (0.97, 269)])
def test_paired_min_samples_with_continuity(agreement: float, expected: int) -> None:
    n = paired_min_samples(3, agreement, 0.05, 0.2, model="split")
    assert n == expected
    assert hand_theta(n, agreement) <= 3 < hand_theta(n - 1, agreement)
    assert n < 3435  # the unpaired n for theta 3 at sigma 50


def test_paired_feasible() -> None:
    assert paired_feasible(3, 0.97, "split") and paired_feasible(3, 0.95, "split")
    assert not paired_feasible(3, 0.98, "split")  # a 3-point drop needs 3% of answers to change
    assert paired_feasible(3, 0.98)  # added model: the flips come on top of the agreement


def test_planning_rejects_bad_agreement() -> None:
    for bad in (1.0, -0.1, 1.5):
        with pytest.raises(ValueError):
            paired_theta(100, bad, 0.05, 0.2)
        with pytest.raises(ValueError):
            paired_min_samples(3, bad, 0.05, 0.2)
    with pytest.raises(ValueError):
        paired_min_samples(0, 0.9, 0.05, 0.2)
    with pytest.raises(ValueError):
        paired_theta(0, 0.9, 0.05, 0.2)


# --------------------------------------------------------------------------- sigma, chance


def test_estimate_sigma_hand_values() -> None:
    # mean 50, squared deviations 4 x 2500 = 10000, / (4 - 1) -> sqrt(3333.33) = 57.735027
    assert estimate_sigma([0, 100, 100, 0]) == pytest.approx(57.735027, abs=1e-6)
    # mean 5, squared deviations 9+1+1+1+0+0+4+16 = 32, / 7 -> sqrt(4.5714286) = 2.1380899
    assert estimate_sigma([2, 4, 4, 4, 5, 5, 7, 9]) == pytest.approx(2.1380899, abs=1e-6)
    with pytest.raises(ValueError):
        estimate_sigma([1.0])
    with pytest.raises(ValueError):
        estimate_sigma([1.0, math.inf])


def test_near_chance_warning() -> None:
    # Llama-3.2-1B W4A16_AWQ MMLU 30.56 at n=4096 (theta 2.747): 27.81 is still above chance 25
    assert near_chance_warning(30.56, 2.747, 25.0, True) is None
    msg = near_chance_warning(26.0, 2.747, 25.0, True)
    assert msg is not None and "chance" in msg and "25" in msg
    assert near_chance_warning(27.75, 2.75, 25.0, True) is not None  # reference - theta == chance
    below = near_chance_warning(24.0, 1.0, 25.0, True)
    assert below is not None and "not above chance" in below
    # lower is better (perplexity): the "chance" is a ceiling
    assert near_chance_warning(7.663, 1.0, 8.0, False) is not None  # 8.663 >= 8
    assert near_chance_warning(5.0, 1.0, 8.0, False) is None
    with pytest.raises(ValueError):
        near_chance_warning(30.0, -1.0, 25.0, True)


# --------------------------------------------------------------------------- bootstrap interval = p-value


def test_bootstrap_interval_agrees_with_its_p_value() -> None:
    # The percentile interval (before) was (-1.625, -0.1375), entirely below 0, next to p = 0.062:
    # the basic interval of the same resampled means reaches above 0, as p >= alpha says it must.
    res = paired_continuous([50.0] * 40, [50.5] * 34 + [42.0] * 6, 0.05, 0.2, method="bootstrap")
    assert res.p_value >= 0.05 and res.passed is True
    assert res.ci is not None and res.ci[1] >= 0.0 and res.ci[0] < res.mean_diff < res.ci[1]
    assert res.ci_method == "bootstrap basic (inverts the shift p-value)"


def test_bootstrap_decision_equals_interval_random() -> None:
    import numpy as np

    rng = np.random.default_rng(17)
    for i in range(300):
        n = int(rng.integers(2, 25))
        ref = rng.choice([0.0, 50.0, 100.0], size=n) if i % 3 == 0 else rng.normal(50, 10, size=n).round(1)
        new = ref + rng.normal(float(rng.normal(0, 2)), float(rng.uniform(0, 5)), size=n).round(1)
        hib = bool(i % 2)
        tol = 0.0 if i % 4 < 2 else float(rng.uniform(0.1, 3.0))
        for gate in ("regression", "noninferiority"):
            res = paired_continuous(list(ref), list(new), 0.05, 0.2, higher_is_better=hib, method="bootstrap",
                                    seed=i, n_boot=199, tolerance=tol, gate=gate)
            low, high = res.ci if hib else (-res.ci[1], -res.ci[0])  # oriented: sign * (new - reference)
            if gate == "regression":
                assert (res.p_value < 0.05) == (high < -tol), (i, res.p_value, res.ci, tol)
            else:
                assert (res.p_value < 0.05) == (low > -tol), (i, res.p_value, res.ci, tol)
