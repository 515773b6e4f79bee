"""benchmarks/gpu_throughput.py on CPU: its plan, the lm-eval task it writes and how it reads lm-eval's results,
and a step's process run, timed, read and tabulated."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("gpu_throughput", ROOT / "benchmarks" / "gpu_throughput.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_plan_names_every_step_and_skips_cuda_only_calibration_on_cpu(bench, tmp_path):
    args = bench.parse_args(["--device", "cpu", "--mmlu-samples", "3", "--lm-eval-samples", "5", "--skip", "gsm8k"])
    steps = {s.name: s for s in bench.plan(args, tmp_path, "/m", tmp_path / "tasks")}
    assert list(steps) == ["mmlu", "mmlu_0shot", "gsm8k", "nvfp4_calibration", "lm_eval_runner", "lm_eval_hf"]
    assert steps["nvfp4_calibration"].cmd == [] and "CUDA" in steps["nvfp4_calibration"].note
    assert steps["gsm8k"].cmd == []
    assert "task.num_samples=3" in steps["mmlu"].cmd and "backend.device=cpu" in steps["mmlu"].cmd
    hf = steps["lm_eval_hf"].cmd
    assert hf[1:5] == ["-m", "lm_eval", "--model", "hf"] and hf[hf.index("--device") + 1] == "cpu"
    assert hf[hf.index("--tasks") + 1] == bench.LM_EVAL_TASK
    assert f"task.lm_eval_task={bench.LM_EVAL_TASK}" in steps["lm_eval_runner"].cmd
    cuda = bench.parse_args([])
    assert bench.plan(cuda, tmp_path, "/m", tmp_path)[3].cmd[-1] == "quant=nvfp4"


def test_lm_eval_side_reads_the_first_packaged_questions_and_its_results(bench, tmp_path):
    tasks = bench.write_lm_eval_task(tmp_path, 5)
    rows = [json.loads(line) for line in (tmp_path / "lm_eval_data" / "mmlu_packaged.jsonl").read_text().splitlines()]
    assert len(rows) == 5 and all(r["correct_answer"] in "ABCD" for r in rows)
    text = (tasks / f"{bench.LM_EVAL_TASK}.yaml").read_text()
    assert f"task: {bench.LM_EVAL_TASK}" in text and "mmlu_packaged.jsonl" in text and "Answer:" in text
    out = tmp_path / "lm_eval_hf" / "model"
    out.mkdir(parents=True)
    (out / "results_2026.json").write_text(json.dumps({"total_evaluation_time_seconds": "2.5",
                                                       "results": {bench.LM_EVAL_TASK: {"acc,none": 0.4}}}))
    step = bench.Step("lm_eval_hf", ["x"], "lm_eval", 5, requests_per_sample=4, out_dir=str(tmp_path / "lm_eval_hf"))
    assert bench.read_lm_eval(step) == {"total_evaluation_time_s": 2.5, "samples_per_s_incl_load": 2.0,
                                        "requests_per_s_incl_load": 8.0, "metrics": {"acc,none": 0.4}}


def test_a_step_runs_its_process_and_reads_the_report(bench, tmp_path, capsys):
    # a real job costs 10 s idle and 90 s on a loaded 2-core host (docs/measurements.md, "GPU throughput");
    # here a process writes the report a job writes, so running, timing, reading and tabulating are exercised
    out_dir = tmp_path / "job"
    report = {"eval_time_s": 4.0, "num_evaluated": 57, "metrics": {"accuracy": 25.0},
              "backend": {"device": "cpu", "details": {"torch_dtype": "float32", "quant_calib_time_s": "2.5",
                                                       "quant_calibration_rows": "512 rows, 16 forward calls"}}}
    code = (f"import json, pathlib; d = pathlib.Path({str(out_dir)!r}); d.mkdir(); "
            f"(d / 'report.json').write_text(json.dumps({report!r}))")
    step = bench.Step("mmlu_0shot", [sys.executable, "-c", code, f"output_dir={out_dir}"], "runner", 57,
                      requests_per_sample=4)
    row = bench.run_step(step, timeout=60)
    assert row["status"] == "ok" and row["samples"] == 57 and row["eval_time_s"] == 4.0
    assert (row["samples_per_s"], row["requests_per_s"], row["calib_time_s"]) == (14.2, 57.0, 2.5)
    failed = bench.run_step(bench.Step("gsm8k", [sys.executable, "-c", "raise SystemExit(1)"], "runner", 1), timeout=60)
    assert failed["status"] == "exit 1"
    late = bench.run_step(bench.Step("gsm8k", [sys.executable, "-c", "import time; time.sleep(5)"], "runner", 1), timeout=0.5)
    assert late["status"].startswith("timed out")
    assert "| mmlu_0shot | 57 | ok | 4.0 | 14.2 | 57.0 | 2.5 |" in bench.table([row, failed, late])
