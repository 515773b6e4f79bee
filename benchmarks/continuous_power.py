"""What the finite-sample betting test costs and buys against the paired t-test, for continuous 0-100 scores.

    python benchmarks/continuous_power.py --trials 1000

Each row runs the job's own paired decision (benchmarks.calibration_grid.continuous) with stats.paired_test=auto
(the betting test, bounds 0-100) and =t: the GO rate when nothing changed (power; dense differences, sd 10),
and the false GO / NO-GO rates where the t-test fails (sparse and skewed differences).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

import numpy as np

from benchmarks.calibration_grid.continuous import draw
from runner.stats.dispatch import paired_claims
from runner.stats.data.pairing import PairedScores
from runner.stats.settings import StatsConfig
from runner.stats.data.hypothesis import HypothesisParams

ROWS = [  # (what, shape, n, true drop, tolerance, margin, claim)
    ("power: GO at drop 0", "dense", 100, 0.0, 2.75, 0.0, "go"),
    ("power: GO at drop 0", "dense", 500, 0.0, 1.0, 0.0, "go"),
    ("power: GO at drop 0", "dense", 500, 0.0, 2.75, 0.0, "go"),
    ("power: GO at drop 0", "dense", 4096, 0.0, 1.0, 0.0, "go"),
    ("power: NO-GO at drop 2.75", "dense", 500, 2.75, 5.0, 0.0, "no_go"),
    ("false GO at drop = t", "sparse 2%", 57, 1.0, 1.0, 0.0, "go"),
    ("false GO at drop = t", "sparse 2%", 500, 1.0, 1.0, 0.0, "go"),
    ("false NO-GO at drop 0", "skewed", 57, 0.0, 5.0, 0.0, "no_go"),
]


def rate(test: str, shape: str, n: int, drop: float, tol: float, margin: float, claim: str, trials: int) -> float:
    rng = np.random.default_rng(20261127)
    stats = replace(StatsConfig(), paired_test=test)
    params = HypothesisParams(0.05, 0.2, 10.0, n, True)
    hits = 0
    for _ in range(trials):
        d = draw(shape, -drop, n, rng, against_go=claim == "go")
        pairs = PairedScores(tuple(map(str, range(n))), tuple(50 - d / 2), tuple(50 + d / 2), (), ())
        c = paired_claims(pairs, params, stats, margin, tol, None, [], (0.0, 100.0))[1]
        hits += c.within if claim == "go" else c.regression
    return hits / trials


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=1000)
    args = ap.parse_args()
    start = time.perf_counter()
    print("| what | differences | n | drop | t | betting (auto) | t-test |\n|---|---|---|---|---|---|---|")
    for what, shape, n, drop, tol, margin, claim in ROWS:
        b, t = (rate(x, shape, n, drop, tol, margin, claim, args.trials) for x in ("auto", "t"))
        se = math.sqrt(max(b * (1 - b), 1 / args.trials) / args.trials)
        print(f"| {what} | {shape} | {n} | {drop:g} | {tol:g} | {b:.3f} (SE {se:.3f}) | {t:.3f} |")
    print(f"\n{args.trials} trials per figure, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
