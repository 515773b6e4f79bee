"""The paired t-test on unbounded scores, with and without its skewness check: false GO and NO-GO per shape and n,
and the n from which each holds.

    PYTHONPATH=. python benchmarks/t_skew.py --trials 20000

The shapes are the calibration family's (``benchmarks/calibration_grid/unbounded.py``), the tail against the claim.
For speed each trial is decided here by the rule's arithmetic on arrays (Student's t at alpha, the one-term Edgeworth
excess of :mod:`runner.stats.numerics.t_skew` at the sample skewness against ``stats.t_skew_limit``); the grid's cells
decide the same draws through the job's own paired decision. "holds from": the smallest n of the grid from which
every larger n passes the acceptance rule (upper 95% bound <= alpha + 0.005).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.calibration_grid.cells import Rate  # noqa: E402
from benchmarks.calibration_grid.unbounded import ALPHA, NS, SHAPES, differences  # noqa: E402
from runner.stats.numerics.t_skew import DEFAULT_LIMIT, excess  # noqa: E402

BLOCK = 500  # trials drawn per batch


def rates(shape: str, n: int, claim: str, trials: int, seed: int, limit: float) -> tuple[Rate, Rate]:
    """(the t-test's rate, the rate with the skewness check) of a false ``claim`` ("go" at drop = tolerance 1,
    "no_go" at drop = margin 0)."""
    import numpy as np
    from scipy import stats

    rng = np.random.default_rng(seed)
    go = claim == "go"
    plain = checked = 0
    for start in range(0, trials, BLOCK):
        rows = min(BLOCK, trials - start)
        d = np.stack([differences(shape, -1.0 if go else 0.0, n, rng, against_go=go) for _ in range(rows)])
        shifted = d + (1.0 if go else 0.0)
        mean, sd = shifted.mean(axis=1), shifted.std(axis=1, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = mean / (sd / np.sqrt(n))
            p = stats.t.sf(t, n - 1) if go else stats.t.cdf(t, n - 1)
            z = d - d.mean(axis=1, keepdims=True)
            skew = np.nan_to_num((z ** 3).mean(axis=1) / (z ** 2).mean(axis=1) ** 1.5)
        made = (sd > 0) & (p < ALPHA)
        plain += int(made.sum())
        checked += int((made & (excess(skew, n, ALPHA, low_side=not go) <= limit)).sum())
    return Rate.monte_carlo(plain, trials), Rate.monte_carlo(checked, trials)


def holds(rate: Rate) -> bool:
    return rate.value + 1.6448536269514722 * rate.se <= ALPHA + 0.005


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=20000)
    ap.add_argument("--limit", type=float, default=DEFAULT_LIMIT, help="stats.t_skew_limit")
    ap.add_argument("--seed", type=int, default=20261129)
    args = ap.parse_args(argv)
    start = time.perf_counter()
    print(f"| shape | claim | {' | '.join(f'n={n}' for n in NS)} | t-test holds from | with the check holds from |")
    print("|---|---|" + "---|" * len(NS) + "---|---|")
    for i, shape in enumerate(SHAPES):
        for j, claim in enumerate(("go", "no_go")):
            found = [rates(shape, n, claim, args.trials, args.seed + 100 * i + 10 * j + k, args.limit)
                     for k, n in enumerate(NS)]
            cells = [f"{a.value:.4f} -> {b.value:.4f}" for a, b in found]
            since = [next((n for k, n in enumerate(NS) if all(holds(r[w]) for r in found[k:])), "none")
                     for w in (0, 1)]
            print(f"| {shape} | {'false GO' if claim == 'go' else 'false NO-GO'} | {' | '.join(cells)} | "
                  f"{since[0]} | {since[1]} |")
    print(f"\nt-test -> with the check (stats.t_skew_limit={args.limit:g}); alpha {ALPHA}; {args.trials} trials per "
          f"figure (SE at most {Rate.monte_carlo(args.trials // 2, args.trials).se:.4f}); "
          f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
