"""task=lm_eval against lm-evaluation-harness's own CLI on the same local tasks: wall time per task, ratio.

The tasks are the test fixtures of ``tests/helpers/lm_eval_tasks.py`` at benchmark sizes: a two-subject MMLU group
(multiple choice), GSM8K generation (1-shot) and rolling log-likelihood over the packaged corpus. Each side runs
each task in its own process on the embedded SmolLM2-135M, in ``--dtype``, one thread (``OMP_NUM_THREADS=1``,
``backend.num_threads=1``), the generation cache off: ``lm_eval --model hf`` (batch ``--batch-size``) and
``python -m runner task=lm_eval``. Reported: each process's wall time and their ratio (lm-eval's over ours, the
headline figure), and the time each side writes: lm-eval's ``total_evaluation_time_seconds`` (from before its model
loads to the end) and our report.json ``eval_time_s`` (requests answered and scored, model loading excluded).
A benchmark, not a test: nothing asserts on timings.

    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 python benchmarks/lm_eval_task_speed.py --out-dir /tmp/lm_eval_speed
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runner`, `evaluators` and `tests` importable
    sys.path.insert(0, str(ROOT))

TASKS = ("mmlu_local", "gsm8k_local", "corpus_rolling")


def timed(cmd: list[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode not in (0, 3, 4):
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    return time.monotonic() - started


def main() -> None:
    from runner.files.assets import smollm2_checkpoint
    from tests.helpers.lm_eval_tasks import write_tasks

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch-size", default="8")
    parser.add_argument("--per-subject", type=int, default=24)
    parser.add_argument("--gsm8k-rows", type=int, default=6)
    parser.add_argument("--corpus-docs", type=int, default=12)
    args = parser.parse_args()
    tasks = write_tasks(args.out_dir, per_subject=args.per_subject, gsm8k_rows=args.gsm8k_rows,
                        corpus_docs=args.corpus_docs, doc_chars=1200)
    model = smollm2_checkpoint()
    env = dict(os.environ) | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
                              "PYTHONPATH": str(ROOT)}
    print(f"host: {os.uname().nodename}, load average before: {os.getloadavg()[0]:.1f}")
    for name in TASKS:
        cli_dir, ours_dir = args.out_dir / "cli" / name, args.out_dir / "ours" / name
        cli_wall = timed([sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
                          f"pretrained={model},dtype={args.dtype}", "--tasks", name, "--include_path", str(tasks),
                          "--output_path", str(cli_dir), "--batch_size", args.batch_size, "--device", "cpu"], env)
        ours_wall = timed([sys.executable, "-m", "runner", "task=lm_eval", f"task.lm_eval_task={name}",
                           f"task.include_path={tasks}", "task.num_samples=100000", "backend=hf",
                           f"backend.dtype={args.dtype}", "backend.num_threads=1", "cache=off", "tracking=none",
                           "reference.mode=skip", f"output_dir={ours_dir}"], env)
        cli_eval = float(json.loads(next(cli_dir.rglob("results_*.json")).read_text())["total_evaluation_time_seconds"])
        ours_eval = float(json.loads((ours_dir / "report.json").read_text())["eval_time_s"])
        print(f"{name}: lm_eval CLI {cli_wall:.1f} s wall ({cli_eval:.1f} s loading + evaluating), runner "
              f"{ours_wall:.1f} s wall ({ours_eval:.1f} s evaluating); lm-eval / runner wall: "
              f"{cli_wall / ours_wall:.2f}x; load average {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
