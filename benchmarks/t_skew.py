"""The paired t-test on unbounded scores, with and without its skewness check: false GO and NO-GO per shape and n,
and the n from which each holds.

    PYTHONPATH=. python benchmarks/t_skew.py --trials 20000

The shapes are the calibration family's (``benchmarks/calibration_grid/unbounded.py``), the tail against the claim.
For speed each trial is decided here by the rule's arithmetic on arrays (Student's t at alpha; the check of
:mod:`runner.stats.numerics.t_skew`: the one-term Edgeworth term at the observed statistic and the sample skewness
within ``stats.t_skew_limit``, the skewness-corrected p-value below alpha, and at least
``min_samples(alpha, stats.t_rare_share)`` samples: 59); ``tests/stats/test_t_skew.py`` checks that the job's own paired
decision agrees on the same draws. "holds from": the smallest n of the grid from which
every larger n passes the acceptance rule (upper 95% bound <= alpha + 0.005).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.calibration_grid.cells import Rate  # noqa: E402
from benchmarks.calibration_grid.unbounded import ALPHA, NS, SHAPES, differences  # noqa: E402
from runner.stats.numerics.t_skew import DEFAULT_LIMIT, DEFAULT_RARE_SHARE, min_samples  # noqa: E402

BLOCK = 500  # trials drawn per batch
POWER = (("dense", 100, 2.75), ("perplexity-like 0.25", 40, 2.0), ("perplexity-like 0.25", 59, 2.0),
         ("perplexity-like 0.25", 200, 1.0),
         ("perplexity-like 0.25", 1000, 0.5))  # (shape, n, tolerance): the power rows, tail towards losses


def rates(shape: str, n: int, claim: str, trials: int, seed: int, limit: float, drop: float | None = None,
          tolerance: float = 1.0, losses: bool = False,
          rare_share: float = DEFAULT_RARE_SHARE) -> tuple[Rate, Rate]:
    """(the t-test's rate, the rate with the skewness check and its fewest samples) of ``claim`` ("go" against
    ``tolerance``, "no_go" against margin 0) at a true drop ``drop`` (by default the least favourable: the tolerance
    for GO, 0 for NO-GO); the tail against the claim, or (``losses``) towards large losses."""
    import numpy as np
    from scipy import stats

    rng = np.random.default_rng(seed)
    go = claim == "go"
    drop = (tolerance if go else 0.0) if drop is None else drop
    plain = checked = 0
    enough = n >= min_samples(ALPHA, rare_share)
    for start in range(0, trials, BLOCK):
        rows = min(BLOCK, trials - start)
        d = np.stack([differences(shape, -drop, n, rng, against_go=go or losses) for _ in range(rows)])
        shifted = d + (tolerance if go else 0.0)
        mean, sd = shifted.mean(axis=1), shifted.std(axis=1, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            x = np.nan_to_num(mean / (sd / np.sqrt(n))) * (1.0 if go else -1.0)  # large: the claim
            p = stats.t.sf(x, n - 1)
            z = d - d.mean(axis=1, keepdims=True)
            skew = np.nan_to_num((z ** 3).mean(axis=1) / (z ** 2).mean(axis=1) ** 1.5)
            harm = skew if not go else -skew
            term = np.nan_to_num(harm * (2 * x * x + 1) * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
                                 / (6 * math.sqrt(n)))
        made = (sd > 0) & (p < ALPHA)
        plain += int(made.sum())
        kept = (term <= limit) & (p + np.maximum(term, 0.0) < ALPHA)
        checked += int((made & kept).sum()) if enough else 0
    return Rate.monte_carlo(plain, trials), Rate.monte_carlo(checked, trials)


def holds(rate: Rate) -> bool:
    return rate.value + 1.6448536269514722 * rate.se <= ALPHA + 0.005


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=20000)
    ap.add_argument("--limit", type=float, default=DEFAULT_LIMIT, help="stats.t_skew_limit")
    ap.add_argument("--rare-share", type=float, default=DEFAULT_RARE_SHARE, help="stats.t_rare_share")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--shape", action="append", choices=SHAPES, help="only these shapes (default: every one)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    print(f"| shape | claim | {' | '.join(f'n={n}' for n in NS)} | t-test holds from | with the check holds from |")
    print("|---|---|" + "---|" * len(NS) + "---|---|")
    for i, shape in enumerate(SHAPES):
        if args.shape and shape not in args.shape:
            continue
        for j, claim in enumerate(("go", "no_go")):
            found = [rates(shape, n, claim, args.trials, args.seed + 100 * i + 10 * j + k, args.limit,
                           rare_share=args.rare_share)
                     for k, n in enumerate(NS)]
            cells = [f"{a.value:.4f} -> {b.value:.4f}" for a, b in found]
            since = [next((n for k, n in enumerate(NS) if all(holds(r[w]) for r in found[k:])), "none")
                     for w in (0, 1)]
            print(f"| {shape} | {'false GO' if claim == 'go' else 'false NO-GO'} | {' | '.join(cells)} | "
                  f"{since[0]} | {since[1]} |")
    print("\n| power | shape | n | tolerance | t-test | with the check |\n|---|---|---|---|---|---|")
    for k, (shape, n, t) in enumerate(POWER):
        for claim, drop in (("go", 0.0), ("no_go", 2 * t)):
            a, b = rates(shape, n, claim, args.trials, args.seed + 7 + k, args.limit, drop, t, losses=True,
                         rare_share=args.rare_share)
            what = "GO at drop 0" if claim == "go" else f"NO-GO at drop {2 * t:g}"
            print(f"| {what} | {shape} | {n} | {t:g} | {a.value:.4f} | {b.value:.4f} |")
    print(f"\nt-test -> with the check (stats.t_skew_limit={args.limit:g}, stats.t_rare_share={args.rare_share:g}: "
          f"no claim below {min_samples(ALPHA, args.rare_share)} samples); alpha {ALPHA}; {args.trials} trials per "
          f"figure (SE at most {Rate.monte_carlo(args.trials // 2, args.trials).se:.4f}); "
          f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
