"""The corpus paired bootstrap-t with few changed documents: its false GO at drop = tolerance by the number of
changed documents, and what a floor on that number (``stats.corpus_min_changed``) does to it.

    python benchmarks/corpus_sparse.py --n 500 --changed 0.05 0.02 --trials 1500

The pooled word perplexity of benchmarks.calibration_grid.corpus (lognormal document lengths; a changed document
carries ``delta / changed`` nats per word, so the pooled loss rises by the tolerance's ``delta``), decided by the
product's paired rule (999 resamples). Each trial records how many documents changed and whether the rule said
GO; the rate of GO with at least K changed documents is the rule with floor K. Standard errors binomial.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from runner.stats.numerics.corpus_bootstrap import paired_corpus_test, replicate
from benchmarks.calibration_grid.corpus import ALPHA, BETA, PERPLEXITY, TOLERANCE, delta_for, documents

FLOORS = (0, 10, 20, 30, 40)


def trials_of(n: int, changed: float, trials: int, seed: int) -> list[tuple[int, bool]]:
    rng = np.random.default_rng(seed)
    out = []
    for t in range(trials):
        ref, new = documents(rng, n, delta_for(TOLERANCE), changed)
        k = int(np.sum(np.any(ref != new, axis=1)))
        reps = replicate(ref, new, PERPLEXITY, 999, seed + t)
        out.append((k, paired_corpus_test(reps, ALPHA, BETA, False, TOLERANCE, "noninferiority").passed))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--changed", type=float, nargs="*", default=[0.05, 0.02])
    ap.add_argument("--trials", type=int, default=1500)
    args = ap.parse_args()
    start = time.time()
    print("| n | changed | changed documents (min-max) | floor K | false GO | SE |")
    print("|---|---|---|---|---|---|")
    for changed in args.changed:
        rows = trials_of(args.n, changed, args.trials, int(1000 * changed) + args.n)
        ks = [k for k, _ in rows]
        for floor in FLOORS:
            p = sum(1 for k, go in rows if go and k >= floor) / len(rows)
            se = math.sqrt(max(p * (1 - p), 1.0 / len(rows)) / len(rows))
            print(f"| {args.n} | {changed:.0%} | {min(ks)}-{max(ks)} | {floor} | {p:.4f} | {se:.4f} |")
    print(f"\n{args.trials} trials per row, {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
