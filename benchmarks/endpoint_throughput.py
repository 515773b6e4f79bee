"""MMLU through ``backend=openai`` (concurrency 1 and 8) against one ``transformers serve``, and ``backend=hf``
in-process, on the same questions, in one run.

The server serves the embedded SmolLM2-135M on the CPU in the dtype ``backend=hf`` picks (``auto``),
started once by the backend's own managed-server code and shared by the endpoint runs; every run
goes through ``python -m runner`` with the generation cache off, and throughput is questions / the
job's evaluation time (``report.json``: requests answered and scored; model loading and process start
excluded). Prediction agreement with ``backend=hf`` is reported per endpoint run. A benchmark, not a
test: it asserts nothing.

    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 python benchmarks/endpoint_throughput.py            # n=456
    python benchmarks/endpoint_throughput.py --num-samples 57 --concurrency 1 4 --json out.json
    python benchmarks/endpoint_throughput.py --num-samples 114 --concurrency 8 --dtype float32  # agreement check
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

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run_job(args: list[str], out: Path) -> dict:
    env = dict(os.environ) | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "runner", *args, "reference.mode=skip", "tracking=none",
                           "cache.enabled=false", f"output_dir={out}"], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"job failed ({' '.join(args)}):\n{proc.stderr[-3000:]}")
    report = json.loads((out / "report.json").read_text())
    predictions = {}
    for line in (out / "samples.jsonl").read_text().splitlines():
        row = json.loads(line)
        predictions[row["sample_id"]] = row["prediction"]
    return {"eval_time_s": report["eval_time_s"], "wall_s": time.monotonic() - started, "n": report["num_evaluated"],
            "accuracy": report["metrics"].get("accuracy"), "predictions": predictions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-samples", type=int, default=456)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--dtype", default="auto", help="auto (bf16 on a CPU with bf16 arithmetic) or float32: both sides")
    parser.add_argument("--continuous-batching", action="store_true", help="transformers serve --continuous-batching")
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args()

    from runner.files.assets import EMBEDDED_MODELS
    from runner.backends.openai.server import ManagedServer, free_port, render_command

    checkpoint = str(EMBEDDED_MODELS["smollm2_135m_gguf"]())
    work = Path(tempfile.mkdtemp(prefix="endpoint-bench-"))
    port = free_port("127.0.0.1")
    command = "transformers serve {checkpoint} --host {host} --port {port} --device cpu --dtype {dtype}" + \
        (" --continuous-batching" if opts.continuous_batching else "")
    server = ManagedServer(render_command(command, {"checkpoint": checkpoint, "host": "127.0.0.1", "port": port,
                                                  "dtype": opts.dtype}),
                           "127.0.0.1", port, "/health", 300, 30, {}, work / "server.log")
    task = ["task=mmlu", f"task.num_samples={opts.num_samples}"]
    served_dtype = [f"backend.served_spec.dtype={opts.dtype}"] if opts.dtype != "auto" else []
    results: dict[str, dict] = {}
    server.start()
    try:
        for c in opts.concurrency:
            results[f"openai c={c}"] = run_job(["backend=openai", f"backend.base_url={server.root_url}/v1",
                                                f"backend.max_concurrency={c}", *served_dtype, *task], work / f"openai-{c}")
    finally:
        server.stop()
    results["hf in-process"] = run_job(["backend=hf", f"backend.dtype={opts.dtype}", *task], work / "hf")

    hf = results["hf in-process"]["predictions"]
    print(f"MMLU (5-shot, generate 2 tokens) n={opts.num_samples}, dtype {opts.dtype}; host: {cpu_name()}, {os.cpu_count()} CPUs; "
          f"{time.strftime('%Y-%m-%d')}; server: transformers serve{' --continuous-batching' if opts.continuous_batching else ''}")
    print(f"{'run':<16} {'questions':>9} {'eval s':>8} {'q/s':>7} {'vs hf':>7} {'accuracy':>9} {'agree with hf':>14}")
    base = results["hf in-process"]["n"] / results["hf in-process"]["eval_time_s"]
    for name, r in results.items():
        qps = r["n"] / r["eval_time_s"]
        agree = sum(r["predictions"].get(k) == v for k, v in hf.items())
        print(f"{name:<16} {r['n']:>9} {r['eval_time_s']:>8.1f} {qps:>7.2f} {qps / base:>6.2f}x "
              f"{r['accuracy']:>9.2f} {agree:>6}/{len(hf):<7}")
    if opts.json:
        opts.json.write_text(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "predictions"} | {
            "agree_with_hf": sum(v["predictions"].get(i) == p for i, p in hf.items())} for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    main()
