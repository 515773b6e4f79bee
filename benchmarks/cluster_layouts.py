"""Clustered paired 0/100 rules on the layouts where single samples padded the cluster count: the false GO of
the rule that counted every cluster toward ``stats.min_clusters`` (before) and of the one that counts the clusters
that carry the variance (now).

    python benchmarks/cluster_layouts.py --trials 500

Layouts: 3 clusters of 150 and 9 single samples (12 "clusters"); 10 clusters of 200 down to 1; 20 of 100 down to 1;
MMLU's 57 unequal ones (the calibration grid's). Each paired 0/100 run is drawn at ICC 0.3 (the calibration
family's Dirichlet model, benchmarks.calibration_grid.clustered) at the least favourable truth of GO (drop =
tolerance) and decided by the job's own decision (the clustered CR2 t and the independent exact test, both
needed). "before": that decision with no floor (min_clusters 0), then the old floor (at least 10 clusters, single
samples included); "now": the decision as the job makes it. Standard errors binomial over trials.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

import numpy as np

from benchmarks.calibration_grid import clustered as cal
from runner.stats.numerics.clustered_paired import clustered_paired
from runner.stats.settings import StatsConfig

LAYOUTS = {
    "3 x 150 + 9 single": (150, 150, 150) + (1,) * 9,
    "10: 200 .. 1": tuple(int(round(x)) for x in np.geomspace(200, 1, 10)),
    "20: 100 .. 1": tuple(int(round(x)) for x in np.geomspace(100, 1, 20)),
    "57 unequal (MMLU)": cal.mmlu_like(),
}
CASES = [(0.02, 1.0), (0.05, 2.75), (0.2, 5.0)]  # (discordance, tolerance)


def rates(sizes: tuple[int, ...], pi: float, tol: float, trials: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    labels = cal._labels(sizes)
    before = now = 0
    for _ in range(trials):
        ref, new = cal._binary_run(rng, sizes, pi, tol, 0.3)
        alone = clustered_paired(ref, new, labels, "cluster", cal.ALPHA, 0.2, binary=True, tolerance=tol,
                                 gate="noninferiority")
        if not alone.passed:
            continue  # the clustered half does not show GO: neither rule does
        any_count = cal._decide(ref, new, labels, tol, paired=True, stats=replace(StatsConfig(), min_clusters=0))
        before += bool(any_count.claims.within and len(sizes) >= 10)
        now += bool(cal._decide(ref, new, labels, tol, paired=True).claims.within)
    return before / trials, now / trials


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=500)
    args = ap.parse_args()
    start = time.time()
    print("| layout | discordance | t | false GO before | false GO now | SE (at 0.05) |")
    print("|---|---|---|---|---|---|")
    for i, (name, sizes) in enumerate(LAYOUTS.items()):
        for j, (pi, tol) in enumerate(CASES):
            b, n = rates(sizes, pi, tol, args.trials, 1000 * i + j)
            print(f"| {name} | {pi:.0%} | {tol:g} | {b:.4f} | {n:.4f} | {math.sqrt(0.05 * 0.95 / args.trials):.4f} |")
    print(f"\nICC 0.3; {args.trials} trials per cell; {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
