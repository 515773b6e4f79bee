"""``python -m runner.plan --sequential K``: the paired design is sized for the regression model users plan with.

Golden fixed n derived by hand from Connor (1987): with ``d0 = 1 - agreement = 0.10`` and a drop
``t = 0.03`` added on top (``b = d0/2 + t``, ``c = d0/2``), the discordance is ``psi = 0.13`` and
``n = (z_.95 sqrt(psi) + z_.8 sqrt(psi - t^2))^2 / t^2
  = (1.644854 * 0.360555 + 0.841621 * 0.359305)^2 / 0.0009 = (0.593066 + 0.302398)^2 / 0.0009 = 890.95``,
so 891. The old sizing held the agreement under the regression (the ``split`` model):
``(2.486475 * sqrt(0.10) / 0.03)^2 = 686.9``, so 687.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from runner.stats.planning.sequential import plans
from runner.stats.numerics import group_sequential as gs
from runner.stats.numerics.looks import look_sizes
from runner.stats.planning.simulate import paired_flip_probabilities

ALPHA, BETA, AGREEMENT, THETA = 0.05, 0.2, 0.9, 3.0


def _paired_plan(model: str = "added") -> gs.Plan:
    return plans(4, ALPHA, BETA, 50.0, AGREEMENT, THETA, "obf", "obf", False, model)[1]


def _sequential_power(plan: gs.Plan, drop: float, reps: int, seed: int) -> float:
    """Share of simulated runs of ``plan.max_n`` paired 0/100 samples that cross a regression bound.

    Added-model data (``runner.stats.planning.simulate``: reference right with probability 0.6, flips giving
    ``b = d0/2 + drop``, ``c = d0/2``); at each look ``Z = (b - c) / sqrt(b + c)`` against the plan's
    bounds, a pass bound crossed stops the run."""
    n, d = plan.max_n, plan.design
    lose, win = paired_flip_probabilities(0.6, AGREEMENT, drop, "added")
    rng = np.random.default_rng(seed)
    alive, hit = np.ones(reps, bool), np.zeros(reps, bool)
    bk, ck, prev = np.zeros(reps), np.zeros(reps), 0
    for k, nk in enumerate(look_sizes(list(d.info), n)):
        ref = rng.random((reps, nk - prev)) < 0.6  # the next block of samples, drawn look by look
        u = rng.random((reps, nk - prev))
        bk, ck, prev = bk + (ref & (u < lose)).sum(axis=1), ck + (~ref & (u < win)).sum(axis=1), nk
        zk = (bk - ck) / np.sqrt(np.maximum(bk + ck, 1))
        crossed = alive & (zk >= d.efficacy[k])
        hit |= crossed
        alive &= ~(crossed | (zk <= d.futility[k]))
    return float(hit.mean())


def test_the_paired_fixed_n_is_connors_under_the_added_model():
    assert _paired_plan().fixed_n == 891
    assert _paired_plan("split").fixed_n == 687  # the old sizing, kept as an option
    assert _paired_plan().max_n == math.ceil(891 * _paired_plan().design.inflation)


def test_the_planned_paired_design_has_its_power_at_theta_under_the_added_model():
    reps = 20_000
    tol = 3 * math.sqrt(BETA * (1 - BETA) / reps)  # 0.0085
    added, split = _paired_plan(), _paired_plan("split")
    assert _sequential_power(added, THETA, reps, seed=1) >= 1 - BETA - tol
    assert _sequential_power(split, THETA, reps, seed=1) < 1 - BETA - tol  # about 0.71: too few samples
    assert _sequential_power(added, 0.0, reps, seed=2) <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / reps)


def test_the_cli_plans_the_added_model_by_default(capsys):
    from runner.commands.plan import main

    assert main(["--sequential", "4", "--json"]) == 0
    paired = json.loads(capsys.readouterr().out)["designs"][1]
    assert paired["fixed_n"] == 891 and paired["regression_model"] == "added"
