"""Seed shopping against the betting test: what retrying ``stats.bootstrap_seed`` buys, and what an order fixed
by the sample ids costs.

    python benchmarks/betting_order.py --trials 2000

Each trial draws one data set of paired differences at the least favourable truth of the GO claim (mean drop =
tolerance) or, for power, at drop 0. The betting test (runner.stats.numerics.betting, c = 0.9, bounds 0-100)
decides the GO claim in the order a seeded generator draws (the rule before) for seeds 0..S-1, and in the order
of the SHA-256 of the sample ids (runner.stats.numerics.betting_order). "retry S" is GO when any of the first S
seeds is: what a user who reruns with another seed until GO gets. Standard errors are binomial over trials.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from runner.stats.numerics import betting
from runner.stats.numerics.betting_order import order

ALPHA, WIDTH, C = 0.05, 100.0, betting.TRUNCATION
SETTINGS = {  # name: (n, tolerance, values of the difference, probabilities at drop = t, at drop 0)
    "GSM8K-like 0/50/100": (1319, 2.0, (-100.0, -50.0, 0.0, 50.0, 100.0),
                            (0.05, 0.04, 0.84, 0.04, 0.03), (0.04, 0.04, 0.84, 0.04, 0.04)),
    "dense sd 10": (500, 2.0, None, None, None),
}


def draw(rng: np.random.Generator, setting: str, trials: int, drop: float) -> np.ndarray:
    n, tol, values, at_t, at_0 = SETTINGS[setting]
    if values is None:
        return np.clip(rng.normal(-drop, 10.0, size=(trials, n)), -WIDTH, WIDTH)
    probs = at_t if drop else at_0
    return rng.choice(np.asarray(values), size=(trials, n), p=np.asarray(probs))


def go(diffs: np.ndarray, tol: float, perm: np.ndarray) -> np.ndarray:
    """The GO claim of the betting test for each row, betting in the order ``perm``."""
    x = (diffs[:, perm] + WIDTH) / (2.0 * WIDTH)
    return betting.rejects(x, (WIDTH - tol) / (2.0 * WIDTH), ALPHA, C)


def measure(setting: str, trials: int, seeds: int, drop: float) -> dict[str, tuple[float, float]]:
    n, tol = SETTINGS[setting][:2]
    rng = np.random.default_rng(20261129)
    diffs = draw(rng, setting, trials, drop)
    by_seed = np.stack([go(diffs, tol, np.random.default_rng(s).permutation(n)) for s in range(seeds)])
    hashed = go(diffs, tol, np.asarray(order([f"{setting}/{i}" for i in range(n)])))

    def rate(hits: np.ndarray) -> tuple[float, float]:
        p = float(hits.mean())
        return p, math.sqrt(max(p * (1 - p), 1.0 / trials) / trials)

    out = {"seed 0": rate(by_seed[0]), "hash of ids": rate(hashed)}
    for s in (5, 20):
        if s <= seeds:
            out[f"retry {s}"] = rate(by_seed[:s].any(axis=0))
    out["verdict moves between seeds"] = rate(by_seed.any(axis=0) & ~by_seed.all(axis=0))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    start = time.time()
    print("| setting | n | t | truth | order | GO rate | SE |")
    print("|---|---|---|---|---|---|---|")
    for setting in SETTINGS:
        n, tol = SETTINGS[setting][:2]
        for drop, truth in ((tol, "drop = t (false GO)"), (0.0, "drop 0 (power)")):
            for name, (p, se) in measure(setting, args.trials, args.seeds, drop).items():
                print(f"| {setting} | {n} | {tol:g} | {truth} | {name} | {p:.4f} | {se:.4f} |")
    print(f"\n{args.trials} trials per row, {args.seeds} seeds, {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
