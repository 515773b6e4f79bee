"""Exact false-pass rate of the tolerance (GO) test for paired 0/100 scores, by enumeration.

A false pass is a GO when the true drop is exactly t: cells (b, c) are trinomial with
P(b) = (d + t)/2, P(c) = (d - t)/2, P(concordant) = 1 - d. Prints plain Tango's rate and that of
runner.stats.numerics.paired_binomial.tango.go_rejects at delta0 = -t (Tango and the exact unconditional
test, whose bound go_lower inverts it at every delta0).

Run: python benchmarks/tango_enumeration.py   (about 15 s for n = 100, 500 on one core)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.stats.numerics.paired_binomial.enumeration import false_pass_rate, go_regions  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100, 500])
    ap.add_argument("--d", type=float, nargs="+", default=[0.02, 0.05, 0.20], help="total discordance")
    ap.add_argument("--t", type=float, nargs="+", default=[0.5, 1, 2, 2.75, 5, 10], help="tolerance, points")
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args()
    print(f"{'n':>5} {'d':>7} {'t':>5} {'tango':>8} {'go_rejects':>10}")
    worst = [0.0, 0.0]
    for n in args.n:
        for t in args.t:
            drop = t / 100
            start = time.perf_counter()
            tango, exact = go_regions(n, drop, args.alpha)
            for d in sorted({drop, *args.d}):
                if d < drop:
                    continue
                a, b = false_pass_rate(n, drop, d, tango), false_pass_rate(n, drop, d, exact)
                worst = [max(worst[0], a), max(worst[1], b)]
                flag = "  > alpha" if a > args.alpha else ""
                label = f"{d:.4f}" + ("*" if d == drop else " ")
                print(f"{n:5d} {label:>7} {t:5g} {a:8.4f} {b:10.4f}{flag}")
            print(f"      (GO regions for n={n}, t={t:g}: {time.perf_counter() - start:.2f} s)")
    print(f"worst: tango {worst[0]:.4f}, go_rejects {worst[1]:.4f}  (* d = t/100: every discordance a loss)")


if __name__ == "__main__":
    main()
