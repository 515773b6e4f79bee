"""Monte Carlo: each design keeps its promises (false alarms <= alpha, power at theta >= 1 - beta).

Seeded, 2000 trials per cell; the tolerance is 4 binomial standard errors of the nominal rate.
McNemar's exact test is conservative, so its false-alarm rate is only bounded above.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from runner.stats.rules.paired_binary import mcnemar_exact
from runner.stats.planning.paired import mcnemar_power, paired_min_samples, paired_theta
from runner.stats.planning.simulate import _alarms_paired, _alarms_unpaired, _draw, simulate
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics.ztest import compute_theta, decide, min_samples_for_theta

ROOT = Path(__file__).resolve().parents[2]
ALPHA, BETA = 0.05, 0.2
TRIALS = 2000
AGREEMENT = 0.95


def tol(rate: float, trials: int = TRIALS) -> float:
    return 4 * math.sqrt(rate * (1 - rate) / trials)


@pytest.mark.parametrize("n", [256, 1024, 4096])
def test_unpaired_false_alarm_and_power(n: int) -> None:
    theta = compute_theta(n, 50, ALPHA, BETA)
    null = simulate("unpaired", n, 0.5, None, 0.0, ALPHA, BETA, TRIALS, seed=11)
    assert null.false_alarm_rate is not None and null.power is None
    # p = 0.5 is where sigma = 50 is exact, so the rate should sit at alpha itself
    assert abs(null.rate - ALPHA) <= tol(ALPHA), null
    alt = simulate("unpaired", n, 0.5, None, theta, ALPHA, BETA, TRIALS, seed=12)
    assert alt.theta == pytest.approx(theta)
    assert alt.power is not None and alt.power >= 1 - BETA - tol(1 - BETA), alt


@pytest.mark.parametrize("n", [256, 1024, 4096])
def test_paired_false_alarm_and_power(n: int) -> None:
    theta = paired_theta(n, AGREEMENT, ALPHA, BETA)
    null = simulate("paired", n, 0.65, AGREEMENT, 0.0, ALPHA, BETA, TRIALS, seed=21)
    assert null.rate <= ALPHA + tol(ALPHA), null  # exact test: conservative
    alt = simulate("paired", n, 0.65, AGREEMENT, theta, ALPHA, BETA, TRIALS, seed=22)
    assert alt.theta == pytest.approx(theta)
    assert alt.rate >= 1 - BETA - tol(1 - BETA), alt


def test_paired_power_at_lower_agreement() -> None:
    theta = paired_theta(1024, 0.90, ALPHA, BETA)
    alt = simulate("paired", 1024, 0.5, 0.90, theta, ALPHA, BETA, TRIALS, seed=31)
    assert alt.rate >= 1 - BETA - tol(1 - BETA), alt


def test_unpaired_is_conservative_away_from_half() -> None:
    # sigma = 50 overstates the spread of a Bernoulli(0.7) score: fewer false alarms than alpha
    null = simulate("unpaired", 1024, 0.7, None, 0.0, ALPHA, BETA, TRIALS, seed=41)
    assert null.rate <= ALPHA + tol(ALPHA)


def test_paired_models_hit_their_targets() -> None:
    rng = np.random.default_rng(5)
    drop = 2.0
    ref, new = _draw("paired", rng, 400, 1024, 0.65, AGREEMENT, drop, "split")
    assert (ref == new).mean() == pytest.approx(AGREEMENT, abs=0.002)  # split: the agreement holds
    assert 100 * (ref.mean() - new.mean()) == pytest.approx(drop, abs=0.1)
    assert ref.mean() == pytest.approx(0.65, abs=0.003)
    ref, new = _draw("paired", rng, 400, 1024, 0.65, AGREEMENT, drop, "added")
    assert (ref == new).mean() == pytest.approx(AGREEMENT - drop / 100, abs=0.002)  # added: flips on top
    assert 100 * (ref.mean() - new.mean()) == pytest.approx(drop, abs=0.1)


@pytest.mark.parametrize("n", [256, 1024, 4096])
@pytest.mark.parametrize("agreement", [0.90, 0.95, 0.98])
def test_planned_theta_has_its_power_exactly_and_needs_the_continuity_term(n: int, agreement: float) -> None:
    """Exact power (no Monte Carlo noise) of McNemar's exact test at the planned theta, under the
    added-flips model: at least 1 - beta, and below it at every n without the 1/n continuity term."""
    theta = paired_theta(n, agreement, ALPHA, BETA)
    assert mcnemar_power(n, agreement, theta, ALPHA) >= 1 - BETA
    plain = paired_theta(n, agreement, ALPHA, BETA, continuity=False)
    assert mcnemar_power(n, agreement, plain, ALPHA) < 1 - BETA


def test_planning_from_healthy_agreement_needs_more_samples_than_the_split_model_promised() -> None:
    """The split model plans n = 408 for theta 3 at agreement 0.95; if the regression adds flips on top
    of a healthy agreement of 0.95, that n has exact power 0.645 only."""
    split_n = paired_min_samples(3.0, 0.95, ALPHA, BETA, model="split")
    assert split_n == 408
    assert mcnemar_power(408, 0.95, 3.0, ALPHA, "added") == pytest.approx(0.645, abs=0.001)
    n = paired_min_samples(3.0, 0.95, ALPHA, BETA)  # added model
    assert 580 <= n <= 640 and mcnemar_power(n, 0.95, 3.0, ALPHA) >= 1 - BETA
    assert mcnemar_power(n - 40, 0.95, 3.0, ALPHA) < 1 - BETA
    assert min_samples_for_theta(3.0, 50.0, ALPHA, BETA) / n > 5  # still several times fewer than unpaired


def test_exact_power_agrees_with_the_simulation() -> None:
    n, drop = 512, 2.5
    exact = mcnemar_power(n, AGREEMENT, drop, ALPHA)
    sim = simulate("paired", n, 0.6, AGREEMENT, drop, ALPHA, BETA, 4000, seed=17)
    assert abs(sim.rate - exact) <= 4 * math.sqrt(exact * (1 - exact) / 4000), (sim.rate, exact)


def test_vectorized_decisions_match_the_tests() -> None:
    rng = np.random.default_rng(9)
    n = 256
    ref, new = _draw("paired", rng, 60, n, 0.6, 0.9, paired_theta(n, 0.9, ALPHA, BETA, model="split"), "split")
    fast = _alarms_paired(ref, new, ALPHA)
    slow = [not mcnemar_exact(r * 100.0, w * 100.0, ALPHA, BETA).passed for r, w in zip(ref, new)]
    assert fast.tolist() == slow and 0 < sum(slow) < 60
    ref, new = _draw("unpaired", rng, 60, n, 0.5, None, compute_theta(n, 50, ALPHA, BETA))
    fast = _alarms_unpaired(ref, new, ALPHA, 50.0)
    params = HypothesisParams(ALPHA, BETA, 50.0, n)
    slow = [not decide(100.0 * w.mean(), 100.0 * r.mean(), params).passed for r, w in zip(ref, new)]
    assert fast.tolist() == slow and 0 < sum(slow) < 60


def test_seeded_and_validated() -> None:
    a = simulate("paired", 512, 0.6, 0.95, 2.0, trials=300, seed=3)
    b = simulate("paired", 512, 0.6, 0.95, 2.0, trials=300, seed=3)
    assert a.alarms == b.alarms and a.se == pytest.approx(math.sqrt(a.rate * (1 - a.rate) / 300))
    json.dumps(a.to_dict())
    with pytest.raises(ValueError, match="answers to change"):
        simulate("paired", 512, 0.6, 0.98, 3.0, trials=10, model="split")  # a 3-point drop cannot keep 98% agreement
    with pytest.raises(ValueError):
        simulate("paired", 512, 0.6, None, 0.0, trials=10)
    with pytest.raises(ValueError):
        simulate("unpaired", 512, 65.0, None, 0.0, trials=10)  # p_ref is a probability
    with pytest.raises(ValueError):
        simulate("crossover", 512, 0.6, None, 0.0, trials=10)


def test_cli_json() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "runner.stats.planning.simulate", "--design", "both", "--n", "256", "--agreement", "0.95",
         "--trials", "200", "--json", "--regression-model", "split"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert [r["design"] for r in out["results"]] == ["unpaired", "paired"]
    for r in out["results"]:
        assert {"n", "theta", "false_alarm_rate", "false_alarm_se", "power", "power_se", "trials"} <= set(r)
        assert 0 <= r["false_alarm_rate"] <= 1 and 0 <= r["power"] <= 1
    assert out["results"][1]["theta"] == pytest.approx(100 * (2.4864748 * math.sqrt(0.05 / 256) + 1 / 256), abs=1e-5)


def test_cli_text_and_usage() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "runner.stats.planning.simulate", "--design", "paired", "--n", "256", "--trials", "50"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 2 and "--agreement" in res.stderr
    res = subprocess.run(
        [sys.executable, "-m", "runner.stats.planning.simulate", "--design", "unpaired", "--n", "256", "--trials", "50"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0 and "false alarms" in res.stdout and "power at theta" in res.stdout
