"""Start-up time of the command line: ``python -m runner --help`` and ``--cfg job``.

Each command runs ``--repeat`` times as a fresh process (after one warm-up run, so the OS file
cache is warm as it is for a user); the script prints the minimum, median and maximum wall time and
the bare interpreter's start-up beside them for scale.

    python benchmarks/startup.py [--repeat 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -m runner --help": [sys.executable, "-m", "runner", "--help"],
    "python -m runner --cfg job": [sys.executable, "-m", "runner", "--cfg", "job"],
    "python -m runner task=gsm8k quant=fp8 --cfg job": [sys.executable, "-m", "runner", "task=gsm8k", "quant=fp8",
                                                        "--cfg", "job"],
}


def wall_times(cmd: list[str], repeat: int) -> list[float]:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=True)  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = {}
    print(f"host: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'command':50} {'min':>7} {'median':>7} {'max':>7}")
    for name, cmd in COMMANDS.items():
        times = wall_times(cmd, args.repeat)
        results[name] = {"min": min(times), "median": statistics.median(times), "max": max(times), "runs": times}
        print(f"{name:50} {min(times):7.2f} {statistics.median(times):7.2f} {max(times):7.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
