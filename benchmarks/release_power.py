"""Release power: how often a critical task that regressed by its theta blocks the release, with one Holm family
across the tiers (the rule before) and with the tiers' graph (Bretz et al. 2009), and the family-wise NO-GO rate
when nothing regressed.

    python benchmarks/release_power.py --trials 200000

Each task's regression test is taken as valid and its p-value modelled as a one-sided z-test's: uniform when the
task did not regress; ``p = Phi(-Z)``, ``Z ~ N(z(1 - alpha) + z(1 - beta), 1)`` when it regressed by its theta
(power 1 - beta alone, 0.80). Tasks independent; alpha 0.05 each. Standard errors binomial over the trials.
"""

from __future__ import annotations

import argparse
import math
import time
from statistics import NormalDist

import numpy as np

from runner.stats.multiple_testing import adjust
from runner.stats.numerics.graphical import reject, tiers

ALPHA, BETA = 0.05, 0.2
CONFIGS = [(1, 0), (1, 3), (1, 8), (2, 3), (2, 8)]  # (critical tasks, supporting tasks)


def _se(p: float, trials: int) -> float:
    return math.sqrt(max(p * (1 - p), 1.0 / trials) / trials)


def run(n_crit: int, n_supp: int, share: float | None, trials: int, regressed: bool, seed: int) -> tuple[float, float]:
    """(P(the first critical task is rejected), P(any task rejected)) with ``share`` for the graph (None: Holm)."""
    rng = np.random.default_rng(seed)
    m = n_crit + n_supp
    p = rng.uniform(size=(trials, m))
    if regressed:
        shift = NormalDist().inv_cdf(1 - ALPHA) + NormalDist().inv_cdf(1 - BETA)
        p[:, 0] = 1.0 - np.vectorize(NormalDist().cdf)(rng.normal(shift, 1.0, trials))
    graph = tiers([i < n_crit for i in range(m)], share) if share is not None else None
    alphas = [ALPHA] * m
    first = anything = 0
    for row in p:
        rej = reject(graph, list(row), alphas) if graph else list(adjust(list(row), alphas, "holm").reject)
        first += rej[0]
        anything += any(rej)
    return first / trials, anything / trials


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=200_000)
    ap.add_argument("--shares", type=float, nargs="*", default=[0.8, 0.9])
    args = ap.parse_args()
    start = time.time()
    print("| critical + supporting | procedure | critical at theta caught | SE | any NO-GO, nothing regressed | SE |")
    print("|---|---|---|---|---|---|")
    for n_crit, n_supp in CONFIGS:
        for share in [None, *args.shares]:
            if n_supp == 0 and share is not None:
                continue
            name = "Holm across tiers" if share is None else f"graph, critical share {share:g}"
            caught, _ = run(n_crit, n_supp, share, args.trials, True, 1)
            _, fwer = run(n_crit, n_supp, share, args.trials, False, 2)
            print(f"| {n_crit} + {n_supp} | {name} | {caught:.4f} | {_se(caught, args.trials):.4f} | {fwer:.4f} | "
                  f"{_se(fwer, args.trials):.4f} |")
    print(f"\n{args.trials} trials per figure, {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
