"""TensorRT-LLM's unpaired z-test on 0/100 scores against the exact unconditional test of two binomials: the
z-test's excess over alpha at every n, the exact rule's size, and what each costs in power.

    python benchmarks/unpaired_exact.py --max-n 5000

Exact throughout (binomial sums; no simulation). The z-test: sigma 50, equal n for the run and the reference
(the rates at p = 0.5, sigma 50's own truth; runner.stats.numerics.ztest_exact). The exact rule: the score
statistic's exact unconditional test (runner.stats.numerics.two_binomials), its size the largest rate over the
nuisance proportion on the boundary. Power: GO at drop 0 and NO-GO at a drop of the z-test's theta (beta 0.2),
at p_ref = 0.5.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from runner.stats.numerics import two_binomials as tb
from runner.stats.numerics.ztest_exact import claim_rate, rate
from runner.stats.numerics.ztest import compute_theta

ALPHA, SIGMA = 0.05, 50.0
CLAIMS = [("NO-GO", 0.0), ("GO", 1.0), ("GO", 2.75), ("GO", 5.0)]


def scan(max_n: int) -> None:
    print("z-test, equal n, p = 0.5: every n from 10 to", max_n)
    print("| claim | n where the rate exceeds alpha (count) | largest rate (at n) | largest n exceeding | "
          "largest excess for n >= 500 (at n) |")
    print("|---|---|---|---|---|")
    sizes = range(10, max_n + 1)
    for claim, delta in CLAIMS:
        rates = np.array([rate(n, n, SIGMA, ALPHA, claim, delta, 0.5) for n in sizes])
        over = [n for n, r in zip(sizes, rates) if r > ALPHA + 1e-12]
        top = int(np.argmax(rates))
        big = [(r, n) for n, r in zip(sizes, rates) if n >= 500]
        worst_big = max(big) if big else (float("nan"), 0)
        print(f"| {claim} at {delta:g} | {len(over)} of {len(rates)} | {rates[top]:.4f} ({list(sizes)[top]}) | "
              f"{max(over) if over else '-'} | {worst_big[0] - ALPHA:+.4f} ({worst_big[1]}) |")


def exact_rule(sizes: list[int]) -> None:
    print("\nexact unconditional rule vs the z-test, equal n")
    print("| n | claim | z-test rate at p=0.5 | exact rule's size (worst p) | z power | exact power |")
    print("|---|---|---|---|---|---|")
    for n in sizes:
        theta = compute_theta(n, SIGMA, ALPHA, 0.2)
        for claim, delta in CLAIMS:
            side = "above" if claim == "NO-GO" else "below"
            z = tb.critical(n, n, delta / 100.0, side, ALPHA)
            counts = tb.extreme_counts(n, n, delta / 100.0, side, z)
            size, _ = tb.supremum(counts, n, n, delta / 100.0, side, grid=401)
            if claim == "NO-GO":  # power: NO-GO at a drop of theta
                p_new, p_ref = 0.5 - theta / 100.0, 0.5
            else:  # power: GO at drop 0
                p_new, p_ref = 0.5, 0.5
            z_power = claim_rate(n, n, SIGMA, ALPHA, claim, delta, p_new, p_ref)
            exact_power = float(tb.rate(counts, n, n, side, [p_new], [p_ref])[0])
            print(f"| {n} | {claim} at {delta:g} | {rate(n, n, SIGMA, ALPHA, claim, delta, 0.5):.4f} | {size:.4f} | "
                  f"{z_power:.4f} | {exact_power:.4f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-n", type=int, default=5000)
    ap.add_argument("--sizes", type=int, nargs="*", default=[30, 57, 100, 200, 500, 1000, 4096])
    args = ap.parse_args()
    start = time.time()
    scan(args.max_n)
    exact_rule(args.sizes)
    print(f"\n{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
