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

from runner.paired import mcnemar_exact, paired_theta
from runner.simulate import _alarms_paired, _alarms_unpaired, _draw, simulate
from runner.stats import HypothesisParams, compute_theta, decide

ROOT = Path(__file__).resolve().parents[1]
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


def test_paired_model_hits_its_targets() -> None:
    rng = np.random.default_rng(5)
    drop = 2.0
    ref, new = _draw("paired", rng, 400, 1024, 0.65, AGREEMENT, drop)
    assert (ref == new).mean() == pytest.approx(AGREEMENT, abs=0.002)
    assert 100 * (ref.mean() - new.mean()) == pytest.approx(drop, abs=0.1)
    assert ref.mean() == pytest.approx(0.65, abs=0.003)


def test_vectorized_decisions_match_the_tests() -> None:
    rng = np.random.default_rng(9)
    n = 256
    ref, new = _draw("paired", rng, 60, n, 0.6, 0.9, paired_theta(n, 0.9, ALPHA, BETA))
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
        simulate("paired", 512, 0.6, 0.98, 3.0, trials=10)  # a 3-point drop cannot keep 98% agreement
    with pytest.raises(ValueError):
        simulate("paired", 512, 0.6, None, 0.0, trials=10)
    with pytest.raises(ValueError):
        simulate("unpaired", 512, 65.0, None, 0.0, trials=10)  # p_ref is a probability
    with pytest.raises(ValueError):
        simulate("crossover", 512, 0.6, None, 0.0, trials=10)


def test_cli_json() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "runner.simulate", "--design", "both", "--n", "256", "--agreement", "0.95",
         "--trials", "200", "--json"],
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
        [sys.executable, "-m", "runner.simulate", "--design", "paired", "--n", "256", "--trials", "50"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 2 and "--agreement" in res.stderr
    res = subprocess.run(
        [sys.executable, "-m", "runner.simulate", "--design", "unpaired", "--n", "256", "--trials", "50"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0 and "false alarms" in res.stdout and "power at theta" in res.stdout
