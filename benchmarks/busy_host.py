"""The same job on a quiet host and on one loaded by a known process: does it stay within 2x of its quiet time?

Issue 50's point 5: torch's default of one compute thread per core collapses when another process holds a core
(its threads spin-wait for each other); the hf backend therefore takes the cores free when a job starts
(``backend.num_threads=null``, runner/backends/threads.py). This script runs one job command, alternating, alone
and beside ``--busy`` busy-loop processes it starts itself (``while True: pass``, one core each) and stops when
the job ends, and prints each run's answering time (``eval_time_s`` of the job's report), the compute threads the
job chose and the one-minute load average before and after. On a host others also use, say their load beside the
figures: this script controls only the load it adds.

    python benchmarks/busy_host.py                                   # 114 MMLU questions 0-shot, 2 rounds, 1 busy core
    python benchmarks/busy_host.py --busy 1 --rounds 3 --override backend.num_threads=2   # the old default, for contrast
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_job(num_samples: int, overrides: list[str], out_dir: Path, busy: int) -> dict[str, Any]:
    """One job in its own process, beside ``busy`` busy loops started here and stopped when it ends."""
    cmd = [sys.executable, "-m", "runner", "task=mmlu_0shot", f"task.num_samples={num_samples}", "tracking=none",
           "reference.mode=skip", "cache=off", f"output_dir={out_dir}"] + overrides
    env = dict(os.environ) | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(1.0 if busy else 0.0)  # the loops hold their cores before the job counts the free ones
        load = os.getloadavg()[0]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    if proc.returncode not in (0, 3, 4):
        raise SystemExit(f"[busy_host] the job failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}")
    report = json.loads((out_dir / "report.json").read_text())
    return {"busy": busy, "eval_time_s": float(report["eval_time_s"]),
            "threads": report["backend"]["details"].get("threads"), "loadavg_1m": [load, os.getloadavg()[0]]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", type=int, default=114, help="MMLU questions (0-shot, log-likelihood)")
    parser.add_argument("--busy", type=int, default=1, help="busy-loop processes beside the loaded runs")
    parser.add_argument("--rounds", type=int, default=2, help="alternating pairs: quiet, loaded (then loaded, quiet)")
    parser.add_argument("--override", action="append", default=[], help="a Hydra override for every job")
    parser.add_argument("--out-dir", type=Path)
    args = parser.parse_args(argv)
    out = args.out_dir or Path(tempfile.mkdtemp(prefix="busy_host_"))
    runs: list[dict[str, Any]] = []
    for i in range(args.rounds):
        for busy in ((0, args.busy) if i % 2 == 0 else (args.busy, 0)):
            run = run_job(args.num_samples, args.override, out / f"run{len(runs)}", busy)
            runs.append(run)
            print(f"[busy_host] {busy} busy loop(s): {run['eval_time_s']:.1f} s answering, threads {run['threads']}, "
                  f"load {run['loadavg_1m'][0]:.1f} -> {run['loadavg_1m'][1]:.1f}", file=sys.stderr, flush=True)
    quiet = statistics.median(r["eval_time_s"] for r in runs if r["busy"] == 0)
    loaded = statistics.median(r["eval_time_s"] for r in runs if r["busy"])
    print(f"{args.num_samples} questions; median answering time alone {quiet:.1f} s, beside {args.busy} busy "
          f"loop(s) {loaded:.1f} s: {loaded / quiet:.2f}x (goal: within 2x); "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    (out / "busy_host.json").write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
