"""Every rule's claims on the calibration grid: error rates, interval coverage, advice hit rates.

    python benchmarks/calibration.py                     # the whole grid, the rule x claim table (markdown)
    python benchmarks/calibration.py --all               # every cell, not only the worst of each rule x claim
    python benchmarks/calibration.py --family binary --trials 2000 --jobs 2
    python benchmarks/calibration.py --family continuous --where "n=57 " --where "n=100 "   # only those settings

Exact cells enumerate every outcome the rule can see; Monte Carlo cells print their standard error. An error
cell holds when its exact rate is at most alpha, or its Monte Carlo upper 95% bound at most alpha + 0.005
(benchmarks/calibration_grid/cells.py); ``--confirm N`` measures the worst cells again with N draws. Exit
status 1 when a cell does not hold.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runner` and the calibration cells importable
    sys.path.insert(0, str(ROOT))

from benchmarks import calibration_grid as calibration  # noqa: E402
from benchmarks.calibration_grid.run import measure, table, worst  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", action="append", choices=calibration.FAMILIES, help="only these rule families")
    ap.add_argument("--trials", type=int, default=4000, help="Monte Carlo draws per cell (default 4000)")
    ap.add_argument("--seed", type=int, default=20261127)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--reduced", action="store_true", help="the reduced grid the test suite runs")
    ap.add_argument("--where", action="append", metavar="TEXT",
                    help="only the cells whose setting contains one of these texts (a partial grid: say so beside "
                         "its figures)")
    ap.add_argument("--rule", action="append", metavar="TEXT",
                    help="only the cells whose rule starts with one of these texts (e.g. --rule 'corpus: paired')")
    ap.add_argument("--claim", action="append", metavar="TEXT",
                    help="only the cells whose claim starts with one of these texts (e.g. --claim NO-GO)")
    ap.add_argument("--kind", action="append", choices=("error", "coverage", "advice", "power"),
                    help="only cells of these kinds (e.g. --kind power: the power cells alone)")
    ap.add_argument("--all", action="store_true", help="print every cell, not only the worst per rule x claim")
    ap.add_argument("--confirm", type=int, default=0, metavar="TRIALS",
                    help="measure again, with this many draws, each rule x claim's worst Monte Carlo cell and every "
                         "cell the first pass failed (the acceptance rule needs thousands of draws near alpha)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    cells = calibration.cells(calibration.Grid(full=not args.reduced), tuple(args.family or ()) or None)
    if args.where:
        cells = [c for c in cells if any(w in c.setting for w in args.where)]
    if args.rule:
        cells = [c for c in cells if c.rule.startswith(tuple(args.rule))]
    if args.claim:
        cells = [c for c in cells if c.claim.startswith(tuple(args.claim))]
    if args.kind:
        cells = [c for c in cells if c.kind in args.kind]
    measured = measure(cells, args.trials, args.seed, args.jobs)
    if args.confirm:
        worst_ids = {id(m.cell) for m in worst(measured)}
        picked = [i for i, m in enumerate(measured)
                  if not m.rate.exact and m.cell.kind != "power" and (id(m.cell) in worst_ids or not m.holds)]
        redone = measure([measured[i].cell for i in picked], args.confirm, args.seed + 1, args.jobs)
        for i, m in zip(picked, redone):  # by position: worker processes return copies of the cells
            measured[i] = m
    print(table(measured if args.all else worst(measured)))
    failed = [m for m in measured if not m.holds]
    print(f"\n{len(measured)} cells, {len(failed)} not holding; {args.trials} trials per Monte Carlo cell; "
          f"{time.perf_counter() - start:.0f} s on {platform.processor() or platform.machine()}, "
          f"python {platform.python_version()}")
    for m in failed:
        print(f"NOT HOLDING: {m.cell.rule} | {m.cell.claim} | {m.cell.setting}: {m.rate.value:.4f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
