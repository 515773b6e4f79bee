"""Fidelity signals plan a run (runner/stats/planning/fidelity.py): a look whose pick changes lie far above the A/A
replicate's says the run is likely to fail and how many samples would show it; one within the floor says how many a
GO needs; a teacher-forced look's NLL change beside the replicates'. The planner prints the A/A agreement's n."""

from __future__ import annotations

import json

import pytest

from runner.commands.plan import main as plan_main
from runner.stats.data.noise import Fidelity, Replicate, Spread, TokenFidelity
from runner.stats.planning.fidelity import aa_pick_rate, look_plan, rate_bounds, samples_for
from runner.stats.planning.paired import paired_min_samples


def _rep(changes: int, n: int, tokens: TokenFidelity | None = None) -> Replicate:
    return Replicate("batch_size=1", n, changes, 0.0, -0.1, 0.1, changes // 2, changes - changes // 2,
                     option_kl=0.001, tokens=tokens)


def test_rate_bounds_by_hand():
    # 0 of 24: the one-sided 95% upper bound solves (1 - p)^24 = 0.05: p = 1 - 0.05^(1/24) = 0.117346
    assert rate_bounds(0, 24) == (0.0, pytest.approx(0.117346, abs=1e-6))
    # 24 of 24: the lower bound solves p^24 = 0.05: p = 0.05^(1/24) = 0.882654
    assert rate_bounds(24, 24) == (pytest.approx(0.882654, abs=1e-6), 1.0)


def test_pick_changes_far_above_the_floor_say_likely_to_fail_and_how_many_samples_show_it():
    reps = [_rep(2, 190)]
    found = Fidelity(100, 30, 0.02)
    plan = look_plan(found, reps, 3.0, 0.05, 0.2)
    n = paired_min_samples(3.0, 0.70, 0.05, 0.2)
    assert "picks changed at 0.300" in plan and "the run is likely to fail" in plan
    assert f"McNemar's test at agreement 0.700 needs about {n} samples to show a drop of 3 points" in plan
    assert plan.endswith("(a look that plans, never a verdict)")


def test_pick_changes_within_the_floor_say_how_many_samples_a_go_needs():
    reps = [_rep(2, 190), _rep(6, 190)]
    assert aa_pick_rate(reps)[0] == pytest.approx(6 / 190)
    plan = look_plan(Fidelity(100, 3, 0.001), reps, 3.0, 0.05, 0.2)
    agreement = 1 - 6 / 190  # the larger of the look's 0.03 and the noise's 0.0316
    n = paired_min_samples(3.0, agreement, 0.05, 0.2)
    assert f"a GO (a drop smaller than 3 points shown) needs about {n} samples at agreement {agreement:.3f}" in plan
    assert samples_for(100.0, 0.5, 0.05, 0.2) is None  # a drop that does not fit the agreement
    assert look_plan(Fidelity(100, 3, 0.001), [], 3.0, 0.05, 0.2) is None  # no replicate: nothing to plan with


def test_a_teacher_forced_look_beside_its_replicate():
    def tf(mean: float, half: float, n: int = 40) -> TokenFidelity:
        same = Spread(0.99, 0.98, 1.0)
        return TokenFidelity(n, 20000, same, Spread(0.001, 0.0, 0.002), Spread(mean, mean - half, mean + half))

    reps = [_rep(0, 40, tf(0.0005, 0.0010))]  # the floor: max |bound| = 0.0015 nats per token
    moved = look_plan(Fidelity(0, 0, None, tf(0.01, 0.002)), reps, None, 0.01, 0.2)
    assert "NLL change +0.01/token" in moved and "beyond the A/A floor +-0.0015" in moved
    # the paired t's n for a shift of 0.01 with sd = 0.002 sqrt(40) / t(0.975, 39) = 0.006254:
    # ((z(0.99) + z(0.8)) 0.006254 / 0.01)^2 = ((2.326348 + 0.841621) 0.6254)^2 = 3.93 -> 4
    assert "a paired t-test needs about 4 texts to show this change" in moved
    still = look_plan(Fidelity(0, 0, None, tf(0.0002, 0.0005)), reps, None, 0.01, 0.2)
    assert "within the A/A floor +-0.0015" in still


def test_the_planner_shows_the_agreement_the_replicate_leaves(capsys):
    assert plan_main(["task=arc_easy", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the embedded ARC-Easy entry's replicates: 6 and 1 of 190 answers changed; the larger rate's upper bound
    aa = out["aa"]
    assert aa["pick_change_rate"] == pytest.approx(6 / 190)
    assert aa["pick_change_upper"] == pytest.approx(rate_bounds(6, 190)[1])
    assert aa["paired_min_num_samples"] == paired_min_samples(aa["theta"], 1 - aa["pick_change_upper"], 0.05, 0.2)
