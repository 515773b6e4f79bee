"""False alarms and false passes of extending a run while it is INCONCLUSIVE (docs/statistics.md, "Extending a run").

Unpaired test (TensorRT-LLM's, sigma 50, reference of n = 400 fixed), tolerance 2.75 points, alpha 0.05, up to
3 extensions. Three ways to add samples after an INCONCLUSIVE first look:
- planned: `stats.extensions=3`, each extension adds 400 samples (runner.stats.rules.extension);
- planned, sized by the advice: each extension adds what the fixed-look advice would suggest (capped at 1600): a
  size that follows the data, which the runner now refuses (stats.extend must repeat look 1's size);
- naive: a fresh fixed test at full alpha on all samples after each extension (what the runner refuses).
Rates at drop 0 (a NO-GO is a false alarm) and drop = the tolerance (a GO is a false pass).

Run: .venv/bin/python benchmarks/extension_simulation.py [--reps 50000]   (about 2 minutes on a 2-core AMD EPYC)
"""
import argparse
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from runner.stats.numerics.advice import more_samples  # noqa: E402
from runner.stats.rules.extension import Extensions  # noqa: E402

SIGMA, N, TOL, ALPHA, PLANNED = 50.0, 400, 2.75, 0.05, 3
Z = 1.6448536269514722


def decision(diff):
    params = SimpleNamespace(higher_is_better=True, sigma=SIGMA)
    return SimpleNamespace(rule="unpaired", paired=None,
                           verdict=SimpleNamespace(params=params, difference=diff, tolerance=0.0))


def run(rng, drop, reps, mode):
    no_go = go = 0
    used = 0
    for _ in range(reps):
        ref = rng.normal(0, SIGMA / math.sqrt(N))
        n, total, sizes = 0, 0.0, [N]
        ext = Extensions(PLANNED, sizes, ALPHA, "obf", TOL, True)
        for k in range(PLANNED + 1):
            step = sizes[-1] - n
            total += rng.normal(-drop * step, SIGMA * math.sqrt(step))
            n = sizes[-1]
            diff = total / n - ref
            if mode == "naive":
                se = SIGMA * math.sqrt(1 / n + 1 / N)
                verdict = "regression" if diff + Z * se < 0 else "go" if diff - Z * se > -TOL else None
            else:
                ext.observe(decision(diff), n)
                verdict = ext.stopped
            if verdict or k == PLANNED:
                break
            if mode == "advice":
                advice = more_samples(-diff, SIGMA, n, 0.0, TOL, ALPHA, n_ref=N)
                more = min(advice.n_more, 4 * N) if advice is not None and advice.n_more else 4 * N
            else:
                more = N
            sizes.append(n + more)
        no_go += verdict == "regression"
        go += verdict == "go"
        used += n
    return no_go / reps, go / reps, used / reps


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=50000)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--modes", default="planned,advice,naive", help="comma-separated: planned, advice, naive")
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    se = 1.96 * math.sqrt(ALPHA * (1 - ALPHA) / args.reps)
    print(f"unpaired, sigma {SIGMA:g}, reference n {N}, tolerance {TOL}, alpha {ALPHA}, up to {PLANNED} extensions, "
          f"{args.reps} runs per cell (+-{se:.4f} at 95%)")
    print(f"{'mode':<22} {'false alarm (drop 0)':>21} {'false pass (drop=t)':>20} {'E[n] drop 0':>12} {'E[n] drop t':>12}")
    for mode in args.modes.split(","):
        fa, _, n0 = run(rng, 0.0, args.reps, mode)
        _, fp, n1 = run(rng, TOL, args.reps, mode)
        print(f"{mode:<22} {fa:>21.4f} {fp:>20.4f} {n0:>12.0f} {n1:>12.0f}")


if __name__ == "__main__":
    main()
