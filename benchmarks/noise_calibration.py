"""The noise family of the calibration grid (benchmarks/calibration_grid/noise.py), with and without the floor.

    python benchmarks/noise_calibration.py                      # every cell, 4000 trials each
    python benchmarks/noise_calibration.py --trials 500 --n 20
    python benchmarks/noise_calibration.py --pairs-from RECORD_DIR   # write a record job's A/A pairs to tests/data/aa_pairs/

An A/A pair is one sample scored twice with nothing changed but the system (batch size 1, float32 for bfloat16):
the recording's ``samples.jsonl`` and its perturbed pass ``replicate-K.jsonl`` (reference.noise=replicate), shipped
in ``tests/data/aa_pairs/``. Each trial draws a replicate (n pairs, with replacement) and, independently, a run (n
pairs): the replicate's floor is measured on the first, the continuous paired t-test judges the second at
margin 0 (the rule without the floor) and at max(margin, floor) (with it). A NO-GO on an A/A run is a false
alarm; the cell holds when its rate is at most alpha + 2 SE. The floor's own bound is one-sided 95%, so a trial
can draw a floor below the true shift; the rate counts those trials too.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runner` and the calibration cells importable
    sys.path.insert(0, str(ROOT))

from benchmarks.calibration_grid.cells import Rate  # noqa: E402
from benchmarks.calibration_grid.noise import PAIRS, false_nogo, load  # noqa: E402


def cells(files: list[Path], n: int, alpha: float, trials: int, seed: int) -> list[tuple[str, str, Rate]]:
    """(pairs and direction, with or without the floor, rate) for every pairs file, both directions."""
    out = []
    for i, path in enumerate(files):
        pairs = load(path)
        for swap in (False, True):
            direction = f"{pairs.name}{' (swapped)' if swap else ''} n={n}"
            for floored in (False, True):
                rate = false_nogo(pairs, n, alpha, trials, seed + 7919 * i + 2 * swap + floored, floored, swap)
                out.append((direction, "with the floor" if floored else "margin 0 (no floor)", rate))
    return out


def write_pairs(record_dir: Path, out_dir: Path = PAIRS) -> list[Path]:
    """The A/A pairs of a ``reference.mode=record reference.noise=replicate`` job directory: its samples.jsonl against
    each replicate-K.jsonl, named after the task and the perturbation (report.json's ``noise.replicates``)."""
    report = json.loads((record_dir / "report.json").read_text(encoding="utf-8"))
    config = (record_dir / "config.yaml").read_text(encoding="utf-8")
    higher = "higher_is_better: false" not in config
    names = [r["perturbation"] for r in (report.get("noise") or {}).get("replicates", [])]

    def scores(path: Path) -> dict[str, float]:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return {str(r["sample_id"]): float(r["score"]) for r in rows}

    base, written = scores(record_dir / "samples.jsonl"), []
    for k, name in enumerate(names, start=1):
        other = scores(record_dir / f"replicate-{k}.jsonl")
        label = f"{report['task']} {name}"
        target = out_dir / f"{report['task']}_{re.sub(r'[^A-Za-z0-9.]+', '_', name)}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"name": label, "higher_is_better": higher, "source": str(report.get("model")),
                                      "host": report.get("host"),
                                      "pairs": [[base[sid], other[sid]] for sid in other if sid in base]}, indent=1)
                          + "\n", encoding="utf-8")
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=4000)
    ap.add_argument("--n", type=int, default=40, help="pairs per replicate and per run (default 40: perplexity's n)")
    ap.add_argument("--alpha", type=float, default=0.01, help="the rule's alpha (default 0.01: perplexity's)")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--pairs-from", type=Path, help="write this record job's A/A pairs to tests/data/aa_pairs/ and stop")
    args = ap.parse_args(argv)
    if args.pairs_from:
        for path in write_pairs(args.pairs_from):
            print(f"wrote {path}")
        return 0
    start = time.perf_counter()
    files = sorted(PAIRS.glob("*.json"))
    print("| A/A pairs | rule | false NO-GO rate | SE | nominal | holds |\n|---|---|---|---|---|---|")
    failed = 0
    for setting, rule, rate in cells(files, args.n, args.alpha, args.trials, args.seed):
        holds = rate.value <= args.alpha + 2 * rate.se
        failed += rule == "with the floor" and not holds
        print(f"| {setting} | {rule} | {rate.value:.4f} | {rate.se:.4f} | <= {args.alpha:g} | "
              f"{'yes' if holds else 'NO'} |")
    print(f"\n{args.trials} trials per cell; {time.perf_counter() - start:.0f} s on "
          f"{platform.processor() or platform.machine()}, python {platform.python_version()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
