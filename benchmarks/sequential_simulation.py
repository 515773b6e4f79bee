"""Simulation figures of docs/sequential.md: false alarms, power and expected n of the sequential gate,
unpaired and paired (McNemar), with the simulators of tests/stats/test_sequential.py.

Run: .venv/bin/python benchmarks/sequential_simulation.py [--plan]   (44 s on one core of a 2-core AMD EPYC, 2026-11-26;
--plan adds the paired plan of `python -m runner.plan --sequential 4` run through the monitor, about 3 minutes more)
"""
import math, sys
import numpy as np
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
from runner.stats.numerics import group_sequential as gs
from runner.stats.rules.sequential import Monitor
from runner.stats.numerics.group_sequential import SequentialConfig
from tests.stats.test_sequential import _simulate_unpaired, _paired_decision

rng = np.random.default_rng(2026)
sizes = [100, 200, 300, 400]
d = gs.design(gs.unpaired_info([s / 400 for s in sizes]), 0.05, 0.2, "obf", "obf")
theta = d.drift * math.sqrt(2 * 2500 / 400)
reps = 100000
fa, n0 = _simulate_unpaired(rng, d, sizes, 0.6, 0.6, reps)
pw, n1 = _simulate_unpaired(rng, d, sizes, 0.6, 0.6 - theta / 100, reps)
print(f"unpaired n_max=400 sigma=50 alpha=0.05 beta=0.2 K=4 reps={reps}: theta={theta:.2f} false-alarm={fa:.4f} "
      f"power={pw:.4f} E[n|H0]={n0:.1f} E[n|theta]={n1:.1f}")
n, d0 = 400, 0.10
mon = Monitor(SequentialConfig(enabled=True), n, 0.05, 0.2, kind="mcnemar")  # the paired design, not the unpaired one
theta_p = mon.design.drift * 100 * math.sqrt(d0 / n)
def simulate(n, pb, pc, reps):
    """Regression rate and mean samples used of the paired monitor at n_max ``n`` when a sample is a loss with
    probability ``pb`` and a gain with ``pc``."""
    reg = used = 0
    for _ in range(reps):
        m = Monitor(SequentialConfig(enabled=True), n, 0.05, 0.2)
        b = c = prev = 0
        for nk in m.sizes:
            x = rng.multinomial(nk - prev, [pb, pc, 1 - pb - pc]); b += x[0]; c += x[1]; prev = nk
            m.observe(_paired_decision(b, c, nk), nk)
            if m.stopped: break
        reg += m.stopped == "regression"; used += m.looks[-1].n
    return reg / reps, used / reps
def run(delta, reps):
    return simulate(n, (d0 + delta) / 2, (d0 - delta) / 2, reps)
r = 5000
fa, n0 = run(0.0, r); pw, n1 = run(theta_p / 100, r)
print(f"paired McNemar n_max=400 discordance 0.10 alpha=0.05 beta=0.2 K=4 reps={r}: theta={theta_p:.2f} "
      f"false-alarm={fa:.4f} power={pw:.4f} E[n|H0]={n0:.1f} E[n|theta]={n1:.1f}")
if "--plan" in sys.argv:  # the paired plan of `python -m runner.plan --sequential 4` (agreement 0.9, theta 3), run by the monitor
    from runner.stats.planning.sequential import plans
    from runner.stats.planning.simulate import paired_flip_probabilities
    def run_plan(n, drop, reps):
        lose, win = paired_flip_probabilities(0.6, 0.9, drop, "added")  # added model: b = 0.05 + drop, c = 0.05
        return simulate(n, 0.6 * lose, 0.4 * win, reps)
    r = 3000
    for model in ("added", "split"):
        n_max = plans(4, 0.05, 0.2, 50.0, 0.9, 3.0, "obf", "obf", False, model)[1].max_n
        fa, n0 = run_plan(n_max, 0.0, r); pw, n1 = run_plan(n_max, 3.0, r)
        print(f"paired plan ({model} sizing) agreement 0.9 theta 3, data under the added model, n_max={n_max} reps={r}: "
              f"false-alarm={fa:.4f} power={pw:.4f} E[n|H0]={n0:.1f} E[n|theta]={n1:.1f}")
