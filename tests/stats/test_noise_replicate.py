"""The A/A replicate's figures (runner.stats.numerics.noise), against numbers worked by hand."""

from __future__ import annotations

import math

import pytest

from runner.stats.data.noise import Replicate
from runner.stats.numerics.noise import discordance_upper, expected_discordance, fidelity, floor, replicate


def test_a_binary_replicate_by_hand():
    # d = b - a = [+100, 0, -100, 0]: mean 0, sd sqrt(20000/3) = 81.6497, se 40.8248, t(0.95, 3) = 2.353363
    rep = replicate("batch_size=1", [0, 100, 100, 0], [100, 100, 0, 0], changed=3)
    assert (rep.worse, rep.better, rep.discordant, rep.answer_changes) == (1, 1, 2, 3)
    assert rep.shift_mean == 0.0
    assert rep.shift_upper == pytest.approx(96.0757, abs=1e-3) and rep.shift_lower == pytest.approx(-96.0757, abs=1e-3)
    assert rep.floor == pytest.approx(96.0757, abs=1e-3)
    assert expected_discordance([rep], 570) == pytest.approx(285.0)  # 2 of 4 flipped: half of 570
    assert rep.loglik_max is None


def test_a_systematic_shift_has_bounds_beside_its_mean():
    # every one of 40 documents up by 0.00015 (the float32 perplexity): sd 0, so both bounds are the mean
    rep = replicate("threads=1", [10.0] * 40, [10.00015] * 40, changed=40,
                    a_logliks=[[-1.0, -2.0]] * 40, b_logliks=[[-1.25, -2.0]] * 40)
    assert rep.worse is None and rep.better is None  # not a 0/100 metric
    assert rep.shift_mean == pytest.approx(0.00015) and rep.shift_lower == pytest.approx(0.00015)
    assert rep.floor == pytest.approx(0.00015)
    # 80 option moves: 40 of 0.25 and 40 of 0: the 99th percentile interpolates between the top two (both 0.25)
    assert (rep.loglik_max, rep.loglik_p99) == (0.25, 0.25)
    assert floor([rep, replicate("x", [1.0, 2.0], [1.0, 2.0], 0)]) == pytest.approx(0.00015)
    assert floor([]) == 0.0 and expected_discordance([rep], 10) is None


def test_the_stored_form_round_trips_and_names_a_bad_field():
    rep = replicate("dtype=float32", [0, 100, 0], [0, 0, 0], 1, [[-1.0]] * 3, [[-1.5]] * 3, {"a": {"x": "1"}})
    assert Replicate.from_dict(rep.to_dict()) == rep
    bad = rep.to_dict() | {"shift": {"mean": 0.0, "lower": "low", "upper": 0.0}}
    with pytest.raises(ValueError, match="shift.lower must be a finite number"):
        Replicate.from_dict(bad)
    with pytest.raises(ValueError, match="equal, non-empty"):
        replicate("x", [1.0], [1.0, 2.0], 0)


def test_the_noise_flips_upper_bound_is_clopper_pearson():
    # 0 of 190 flipped: the one-sided 95% Clopper-Pearson bound is 1 - 0.05^(1/190) = 0.015642 (the "rule of three")
    rep = replicate("batch_size=1", [100.0] * 95 + [0.0] * 95, [100.0] * 95 + [0.0] * 95, 0)
    assert discordance_upper([rep], 570) == pytest.approx(570 * (1 - 0.05 ** (1 / 190)), rel=1e-9)
    assert discordance_upper([replicate("x", [1.5, 2.0], [1.5, 2.0], 0)], 10) is None


def test_fidelity_counts_picks_and_the_options_kl_by_hand():
    # options [0, log 3] -> softmax (1/4, 3/4); [log 3, 0] -> (3/4, 1/4): the pick changes and
    # KL = 1/4 log(1/3) + 3/4 log(3) = 0.5 log 3 = 0.549306
    found = fidelity([[0.0, math.log(3)], [-1.0, -2.0], [-5.0]], [[math.log(3), 0.0], [-1.0, -2.0], [-4.0]])
    assert (found.n, found.picks) == (2, 1)
    assert found.option_kl == pytest.approx(0.5 * math.log(3) / 2, rel=1e-12)
    rep = replicate("x", [100.0, 0.0], [0.0, 0.0], 1, [[0.0, math.log(3)], [-1.0, -2.0]],
                    [[math.log(3), 0.0], [-1.0, -2.0]])
    assert rep.option_kl == pytest.approx(0.5 * math.log(3) / 2, rel=1e-12)
    assert Replicate.from_dict(rep.to_dict()) == rep
