"""Perplexity of the embedded model under every quantization spec that runs on a CPU, with timings.

Each spec runs as a separate ``python -m runner task=<task> quant=<spec> ...`` process (no verdict,
no tracking, generation cache off, so every figure is measured, not replayed), and the figures are
read back from the run's ``report.json``:

- the task metric and, for perplexity, the token-weighted (corpus-level) perplexity;
- calibration time: ``backend.details.quant_calib_time_s``, measured by ``runner/backends/hf_quant.py``
  when ModelOpt calibrates. When the quantized model came from the cache (``quant_cache=hit``) it is
  the time recorded when that cache entry was built, and the table says so;
- evaluation time: ``eval_time_s``, the job's time answering and scoring the requests (model
  loading and quantization excluded); wall time is the whole process.

Specs that need CUDA (``nvfp4``, ``nvfp4_kv``) are run too when asked for (``--specs``) and their error
message is shown instead of figures. This is a measurement, not a test: it asserts nothing.

Usage (repository root; ModelOpt comes with ``pip install -e .[quant]``):

    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 python benchmarks/quant_specs_cpu.py
    python benchmarks/quant_specs_cpu.py --specs none w8a16 nvfp4 --out /tmp/q.md
    python benchmarks/quant_specs_cpu.py --override quant.calib_num_samples=64 --override quant.calib_max_seq_length=256
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CPU_SPECS = ("none", "fp8", "fp8_kv", "fp8_per_channel_per_token", "w8a16", "w4a16", "w4a16_awq", "w4a8_awq",
             "int8_sq")


def run_spec(spec: str, task: str, overrides: list[str], out_dir: Path) -> dict[str, Any]:
    """One job in its own process; its report.json figures, or the error it stopped with.

    A run directory that already holds a report (an earlier, interrupted invocation with the same
    ``--out-dir``) is read back instead of run again.
    """
    run_dir = out_dir / spec
    report = run_dir / "report.json"
    if report.is_file():
        wall_file = run_dir / "wall_s"
        wall = float(wall_file.read_text()) if wall_file.is_file() else None
        return _figures(spec, json.loads(report.read_text()), {"spec": spec, "exit": 0, "wall_s": wall})
    cmd = [sys.executable, "-m", "runner", f"task={task}", f"quant={spec}", "tracking=none", "reference.mode=skip",
           "cache=off", f"hydra.run.dir={run_dir}", *overrides]
    env = dict(os.environ) | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    row: dict[str, Any] = {"spec": spec, "exit": proc.returncode, "wall_s": wall}
    if proc.returncode != 0 or not report.is_file():
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        row["error"] = lines[0] if lines else (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return row
    (run_dir / "wall_s").write_text(f"{wall:.1f}")
    return _figures(spec, json.loads(report.read_text()), row)


def _figures(spec: str, data: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    details = data["backend"]["details"]
    row |= {
        "quant_algo": data["spec"]["quant_algo"], "kv_cache_quant_algo": data["spec"]["kv_cache_quant_algo"],
        "metrics": data["metrics"], "num_evaluated": data["num_evaluated"], "eval_time_s": data.get("eval_time_s"),
        "calibration": details.get("quant_calibration", "-"), "calib_time_s": details.get("quant_calib_time_s") or details.get("quant_calib_time_s_at_build"),
        "quant_cache": details.get("quant_cache", "-"), "device": data["backend"]["device"],
        "dtype": details.get("torch_dtype"), "extra_acc_spec": data["spec"]["extra_acc_spec"],
    }
    return row


def markdown(rows: list[dict[str, Any]], metric: str) -> str:
    base = next((r["metrics"][metric] for r in rows if r["spec"] == "none" and "metrics" in r), None)
    head = (f"| spec | quant_algo / kv_cache_quant_algo | {metric} | vs none | token-weighted | calibration "
            "| calibration s | evaluation s | wall s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r:
            lines.append(f"| `{r['spec']}` | - | fails: {r['error'].removeprefix('error: ')} | | | | | | {r['wall_s']:.0f} |")
            continue
        value = r["metrics"][metric]
        delta = f"{100 * (value / base - 1):+.1f}%" if base else "-"
        weighted = r["metrics"].get("perplexity_token_weighted")
        calib = r["calib_time_s"] or "-"
        if r["quant_cache"] == "hit" and calib != "-":
            calib = f"{calib} (cached)"
        algo = f"{r['quant_algo'] or '-'} / {r['kv_cache_quant_algo'] or '-'}"
        wall = "-" if r["wall_s"] is None else f"{r['wall_s']:.0f}"
        data = r["calibration"].split(" of ")[0] if " tokens of " in r["calibration"] else "none"  # "N x L tokens"
        lines.append(f"| `{r['spec']}` | {algo} | {value:.3f} | {delta} | "
                     f"{'-' if weighted is None else f'{weighted:.3f}'} | {data} | {calib} | "
                     f"{r['eval_time_s']:.0f} | {wall} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--specs", nargs="+", default=list(CPU_SPECS), help="quant options, in order (none first)")
    parser.add_argument("--task", default="perplexity")
    parser.add_argument("--metric", default="perplexity", help="the task metric to tabulate")
    parser.add_argument("--override", action="append", default=[], help="extra Hydra override for every job")
    parser.add_argument("--out-dir", type=Path, default=None, help="run directories (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    parser.add_argument("--json", type=Path, default=None, help="write every row here")
    parser.add_argument("--jobs", type=int, default=1, help="specs run at once (timings then share the CPU)")
    args = parser.parse_args(argv)
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="quant_specs_"))
    def one(spec: str) -> dict[str, Any]:
        print(f"[quant_specs] {spec} ...", file=sys.stderr, flush=True)
        row = run_spec(spec, args.task, args.override, out_dir)
        shown = row.get("error") or f"{args.metric}={row['metrics'][args.metric]:.4f}"
        print(f"[quant_specs] {spec}: {shown}", file=sys.stderr, flush=True)
        return row

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        rows = list(pool.map(one, args.specs))
    first = next((r for r in rows if "metrics" in r), {})
    calibrated = next((r["calibration"] for r in rows if " tokens of " in r.get("calibration", "")), None)
    header = (f"task={args.task} ({first.get('extra_acc_spec')}), n={first.get('num_evaluated')}, "
              f"{first.get('device')} {first.get('dtype')}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
              + (f", overrides: {' '.join(args.override)}" if args.override else "")
              + (f"; calibration data: {calibrated.split(' of ', 1)[1]}" if calibrated else ""))
    table = header + "\n\n" + markdown(rows, args.metric)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
