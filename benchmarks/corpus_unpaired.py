"""The unpaired corpus bootstrap-t (a reference recorded without items) across n: its false GO and NO-GO and its GO
power, alone and with the fewest documents it claims on (``stats.corpus_rare_share``).

    PYTHONPATH=. python benchmarks/corpus_unpaired.py --n 57 100 129 200 500 --trials 4000

The calibration grid's pooled word perplexity (``benchmarks/calibration_grid/corpus.py``: lognormal document lengths,
log-sd 1), 999 resamples, alpha 0.05, tolerance 1 point; the reference a figure recorded on other documents. Below
the fewest documents the rule makes no claim, so its rates there are 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.calibration_grid.corpus import TOLERANCE, UNPAIRED_LEAST, _unpaired_rate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[57, 100, UNPAIRED_LEAST, 200, 500])
    ap.add_argument("--trials", type=int, default=4000, help="draws per error figure (power: a quarter)")
    ap.add_argument("--resamples", type=int, default=999)
    ap.add_argument("--seed", type=int, default=20261129)
    args = ap.parse_args(argv)
    print(f"fewest documents: {UNPAIRED_LEAST} (alpha 0.05); {args.trials} draws per error figure\n")
    print("| n | false GO (drop = t) | false NO-GO (drop 0) | GO power (drop 0) | with the fewest documents |")
    print("|---|---|---|---|---|")
    for n in args.n:
        start = time.perf_counter()
        go = _unpaired_rate(n, TOLERANCE, "go", args.resamples, args.trials, args.seed + n, least=0)
        nogo = _unpaired_rate(n, 0.0, "nogo", args.resamples, args.trials, args.seed + 2 * n, least=0)
        power = _unpaired_rate(n, 0.0, "go", args.resamples, max(1, args.trials // 4), args.seed + 3 * n, least=0)
        kept = "the same" if n >= UNPAIRED_LEAST else "no claim: 0 / 0 / 0"
        print(f"| {n} | {go.value:.4f} (SE {go.se:.4f}) | {nogo.value:.4f} (SE {nogo.se:.4f}) | "
              f"{power.value:.4f} (SE {power.se:.4f}) | {kept} | ({time.perf_counter() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
