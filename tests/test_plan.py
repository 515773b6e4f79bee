"""``python -m runner.plan`` as a user runs it: a subprocess, JSON out, exit statuses."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-5
MMLU_SCALE = 1.1048543456  # sqrt(2 * 50^2 / 4096)


def plan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner.plan", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_table_json_gsm8k() -> None:
    res = plan("--sigma", "50", "--alpha", "0.05", "--beta", "0.2", "--num-samples-total", "1319", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert list(out) == ["rows"]
    rows = out["rows"]
    assert [r["num_samples"] for r in rows] == [32, 64, 128, 256, 512, 1024, 1319]
    assert all(set(r) == {"num_samples", "theta", "threshold_minus_reference"} for r in rows)
    # n = 32: scale = sqrt(5000 / 32) = 12.5
    assert rows[0]["theta"] == pytest.approx((1.6448536 + 0.8416212) * 12.5, abs=TOL)
    assert rows[0]["threshold_minus_reference"] == pytest.approx(-1.6448536 * 12.5, abs=TOL)
    s = math.sqrt(5000 / 1319)
    assert rows[-1]["theta"] == pytest.approx(2.4864748 * s, abs=TOL)


def test_table_power_of_two_and_target_theta() -> None:
    res = plan("--num-samples-total", "4096", "--target-theta", "3", "--json")  # upstream defaults: 50/0.05/0.2
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert [r["num_samples"] for r in out["rows"]] == [32, 64, 128, 256, 512, 1024, 2048, 4096]
    assert out["rows"][-1]["theta"] == pytest.approx(2.4864748 * MMLU_SCALE, abs=TOL)
    assert out["min_num_samples"] == 3435  # ceil(2 * (2.4864748 * 50 / 3)^2) = ceil(3434.75)


def test_table_human() -> None:
    res = plan("--sigma", "11.06", "--alpha", "0.002", "--beta", "0.2", "--num-samples-total", "512")
    assert res.returncode == 0, res.stderr
    assert "num_samples" in res.stdout and "theta" in res.stdout and "threshold-reference" in res.stdout
    assert len([ln for ln in res.stdout.splitlines() if ln.strip()[:1].isdigit()]) == 5  # 32..256, 512


def test_task_mmlu_llama_fp8() -> None:
    res = plan("--task", "mmlu", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--quant-algo", "FP8", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["reference"] == 67.93
    assert out["num_samples"] == 4096 and out["alpha"] == 0.05 and out["beta"] == 0.2 and out["sigma"] == 50.0
    assert out["higher_is_better"] is True
    # 67.93 - 1.6448536 * 1.1048543456 = 67.93 - 1.8173236 = 66.1126764
    assert out["threshold"] == pytest.approx(67.93 - 1.6448536 * MMLU_SCALE, abs=TOL)
    assert out["threshold"] == pytest.approx(66.11268, abs=1e-4)
    assert out["theta"] == pytest.approx(2.4864748 * MMLU_SCALE, abs=TOL)
    for key in ("reference", "num_samples", "alpha", "beta", "sigma", "theta", "threshold", "higher_is_better"):
        assert key in out


def test_task_human_output() -> None:
    res = plan("--task", "mmlu", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--quant-algo", "FP8", "--kv-cache-quant-algo", "FP8")
    assert res.returncode == 0, res.stderr
    assert "67.870" in res.stdout and "threshold" in res.stdout and "4096" in res.stdout


def test_task_entry_overrides(tmp_path: Path) -> None:
    (tmp_path / "mmlu.yaml").write_text(
        textwrap.dedent(
            """\
            org/m:
              - accuracy: 60.0
                alpha: 0.01
                sigma: 40
                num_samples: 1000
              - quant_algo: FP8
                accuracy: 59.0
                threshold: 55.5
            """
        ),
        encoding="utf-8",
    )
    res = plan("--task", "mmlu", "--model", "org/m", "--references", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert (out["alpha"], out["sigma"], out["num_samples"], out["beta"]) == (0.01, 40.0, 1000, 0.2)
    s = math.sqrt(2 * 1600 / 1000)
    assert out["threshold"] == pytest.approx(60.0 - 2.326348 * s, abs=TOL)
    assert out["theta"] == pytest.approx((2.326348 + 0.8416212) * s, abs=TOL)
    res = plan("--task", "mmlu", "--model", "org/m", "--quant-algo", "FP8", "--references", str(tmp_path), "--json")
    out = json.loads(res.stdout)
    assert out["threshold"] == 55.5 and out["explicit_threshold"] is True


def test_unknown_task_lists_tasks() -> None:
    res = plan("--task", "nosuchtask", "--model", "meta-llama/Llama-3.1-8B-Instruct")
    assert res.returncode == 2
    assert "nosuchtask" in res.stderr and "mmlu" in res.stderr
    assert "Traceback" not in res.stderr


def test_missing_reference_exits_1_without_traceback() -> None:
    res = plan("--task", "mmlu", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--quant-algo", "NVFP4")
    assert res.returncode == 1
    assert res.stdout == ""
    assert "Traceback" not in res.stderr
    assert "quant_algo=NVFP4" in res.stderr
    assert "quant_algo=FP8, kv_cache_quant_algo=FP8" in res.stderr  # the registered specs are listed
    assert "reference.mode=record" in res.stderr


def test_missing_reference_file(tmp_path: Path) -> None:
    res = plan("--task", "mmlu", "--model", "org/m", "--references", str(tmp_path))
    assert res.returncode == 1
    assert str(tmp_path / "mmlu.yaml") in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("--task", "mmlu"),  # no --model
        ("--task", "mmlu", "--model", "x", "--sigma", "3"),  # table flags with --task
        ("--alpha", "1.5"),
        ("--num-samples-total", "0"),
        ("--target-theta", "0"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    res = plan(*args)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr


def test_help_is_cheap() -> None:
    res = plan("--help")
    assert res.returncode == 0 and "--num-samples-total" in res.stdout and "--task" in res.stdout
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, runner.plan; print(sorted(m for m in ('hydra', 'omegaconf', 'scipy', 'ruamel') if m in sys.modules))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.strip() == "[]", probe.stderr
