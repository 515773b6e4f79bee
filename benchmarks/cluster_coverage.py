"""Coverage of the runner's intervals on clustered questions: independent versus cluster-robust errors.

Synthetic 0/100 scores with a known intra-cluster correlation (ICC): ``C`` clusters (subjects) of ``m``
questions (``--unequal``: MMLU-like sizes falling evenly from 17 to 2, 500 questions in 57 clusters);
a cluster's chance of a right answer is drawn from a Beta distribution with mean ``mu`` and ICC ``rho``
(beta-binomial clusters: ``a = mu (1 - rho) / rho``, ``b = (1 - mu) (1 - rho) / rho``), so the design
effect of a run's mean is about ``1 + (m - 1) rho``. Two intervals the runner prints, both
two-sided at ``1 - 2 alpha`` (90% at alpha 0.05), each checked against the true difference:

* **unpaired** (TensorRT-LLM's test): a reference run and a new run of the same model on independent
  draws of questions (true difference 0); ``diff +- z(1 - alpha) sqrt(2 sigma^2 / n)`` with sigma 50,
  against the product's clustered one, ``sigma sqrt(deff) t(df) / z``: deff estimated on the new run's
  scores (:func:`runner.stats.numerics.cluster_variance.design_effect`, floored at 1), ``df`` Imbens and Kolesar's.
* **paired 0/100**: both runs answer the same questions; the new run flips an answer with a chance
  drawn per cluster (mean ``flip``, the same ICC), so the true difference is
  ``100 flip (1 - 2 mu)``. Tango's score interval (the independent paired interval) against the
  clustered t interval alone (:func:`runner.stats.numerics.clustered_paired.clustered_paired`: CR2, Imbens-Kolesar
  df) and against the product's clustered interval, the hull of the two (a clustered claim needs both
  tests; the product's independent interval adds the exact unconditional check to Tango's, which this
  benchmark leaves out for speed, so its hull is at most as wide as the product's).

A benchmark, not a test: it asserts nothing.

    python benchmarks/cluster_coverage.py
    python benchmarks/cluster_coverage.py --unequal --icc 0 0.1 0.3
    python benchmarks/cluster_coverage.py --reps 500 --icc 0 0.1 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from runner.stats.numerics.cluster_variance import critical, design_effect  # noqa: E402
from runner.stats.numerics.paired_binomial.tango import tango_bounds  # noqa: E402
from runner.stats.numerics.clustered_paired import clustered_paired  # noqa: E402
from runner.stats.numerics.normal import z  # noqa: E402


def cluster_rates(rng: np.random.Generator, mean: float, icc: float, clusters: int) -> np.ndarray:
    """Each cluster's chance of a success: Beta with this mean and ICC (the mean itself when the ICC is 0)."""
    if icc == 0:
        return np.full(clusters, mean)
    a, b = mean * (1 - icc) / icc, (1 - mean) * (1 - icc) / icc
    return rng.beta(a, b, clusters)


def mmlu_like() -> list[int]:
    """57 unequal clusters of 500 questions, sizes falling evenly from 17 to 2 (the calibration grid's)."""
    sizes = [round(2 + 13.5 * (56 - i) / 56) for i in range(57)]
    sizes[0] += 500 - sum(sizes)
    return sizes


def one_setting(rng: np.random.Generator, icc: float, sizes: list[int], mu: float, flip: float,
                alpha: float, reps: int) -> dict[str, float]:
    """Coverage of the five intervals over ``reps`` replicates at one ICC."""
    n, clusters = sum(sizes), len(sizes)
    labels = np.repeat(np.arange(clusters), sizes).tolist()
    q = z(1 - alpha)
    hits = dict.fromkeys(("unpaired_iid", "unpaired_clustered", "paired_iid", "paired_clustered_t",
                          "paired_clustered"), 0)
    deffs = []
    truth_paired = 100.0 * flip * (1 - 2 * mu)
    for _ in range(reps):
        ref = np.where(rng.random(n) < np.repeat(cluster_rates(rng, mu, icc, clusters), sizes), 100.0, 0.0)
        new = np.where(rng.random(n) < np.repeat(cluster_rates(rng, mu, icc, clusters), sizes), 100.0, 0.0)
        diff = new.mean() - ref.mean()
        deff = design_effect(new.tolist(), labels, "cluster")
        deffs.append(deff.applied)
        half = q * math.sqrt(2 * 50.0 ** 2 / n)
        few = 1.0 if deff.df is None else critical(alpha, deff.df) / q
        hits["unpaired_iid"] += abs(diff) <= half
        hits["unpaired_clustered"] += abs(diff) <= half * math.sqrt(deff.applied) * few
        flips = rng.random(n) < np.repeat(cluster_rates(rng, flip, icc, clusters), sizes)
        paired_new = np.where(flips, 100.0 - ref, ref)
        b = int(np.sum((ref == 100) & (paired_new == 0)))
        c = int(np.sum((ref == 0) & (paired_new == 100)))
        low, high = tango_bounds(b, c, n, q)
        hits["paired_iid"] += 100 * low <= truth_paired <= 100 * high
        result = clustered_paired(ref.tolist(), paired_new.tolist(), labels, "cluster", alpha, 0.2, binary=True)
        hits["paired_clustered_t"] += result.ci[0] <= truth_paired <= result.ci[1]
        hull = (min(result.ci[0], 100 * low), max(result.ci[1], 100 * high))
        hits["paired_clustered"] += hull[0] <= truth_paired <= hull[1]
    out = {k: v / reps for k, v in hits.items()}
    out |= {"icc": icc, "mean_design_effect": float(np.mean(deffs))}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--icc", type=float, nargs="+", default=[0.0, 0.02, 0.05, 0.1, 0.2])
    p.add_argument("--clusters", type=int, default=57, help="clusters per run (MMLU's 57 subjects)")
    p.add_argument("--size", type=int, default=20, help="questions per cluster")
    p.add_argument("--unequal", action="store_true", help="57 unequal clusters of 2-17 questions (500 in all)")
    p.add_argument("--mu", type=float, default=0.6, help="mean chance of a right answer")
    p.add_argument("--flip", type=float, default=0.1, help="paired: mean chance the new run flips an answer")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--reps", type=int, default=3000)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    sizes = mmlu_like() if args.unequal else [args.size] * args.clusters
    rows = [one_setting(rng, icc, sizes, args.mu, args.flip, args.alpha, args.reps) for icc in args.icc]
    wall = time.monotonic() - started
    mc = 1.96 * math.sqrt(0.9 * 0.1 / args.reps)
    shape = "57 unequal clusters of 2-17" if args.unequal else f"{args.clusters} clusters x {args.size}"
    print(f"coverage of the two-sided {1 - 2 * args.alpha:.0%} intervals: {shape} "
          f"questions, mu {args.mu:g}, flip {args.flip:g}, {args.reps} replicates (+-{mc:.3f} at 95%), "
          f"seed {args.seed}")
    print(f"{'ICC':>5} {'deff':>6} {'unpaired iid':>13} {'clustered':>10} {'paired iid':>11} {'CR2 t':>7} "
          f"{'clustered':>10}")
    for r in rows:
        print(f"{r['icc']:>5.2f} {r['mean_design_effect']:>6.2f} {r['unpaired_iid']:>13.3f} "
              f"{r['unpaired_clustered']:>10.3f} {r['paired_iid']:>11.3f} {r['paired_clustered_t']:>7.3f} "
              f"{r['paired_clustered']:>10.3f}")
    print(f"{wall:.1f} s wall")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows,
                                         "wall_s": wall}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
