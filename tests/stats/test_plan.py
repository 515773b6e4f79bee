"""``python -m runner.plan``: JSON out, exit statuses. Its entry point runs in this process
(:func:`tests.helpers.in_process.call_main`: what it prints and returns); the command line itself, as a user runs it,
in a subprocess for the missing reference's exit status and for the cheap ``--help``'s imports."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.in_process import call_main

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-5
MMLU_SCALE = 1.1048543456  # sqrt(2 * 50^2 / 4096)


def plan(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m runner.plan ARGS`` by its entry point in this process."""
    from runner.commands.plan import main

    return call_main(main, args, ROOT)


def plan_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m runner.plan ARGS`` as a user runs it."""
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
    res = plan_cli("--task", "mmlu", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--quant-algo", "NVFP4")
    assert res.returncode == 1
    assert "num_samples  4096" in res.stdout and "none registered yet" in res.stdout  # the task's n all the same
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


# --- paired design (McNemar on the same samples) and the savings table -------------------------

K_005_020 = 1.6448536 + 0.8416212  # |z(0.05)| + |z(0.2)| = 2.4864748


def hand_paired_theta(n: int, agreement: float) -> float:
    """100 * (K sqrt((1 - A) / n) + 1 / n): McNemar's MDE with the continuity term."""
    return 100 * (K_005_020 * math.sqrt((1 - agreement) / n) + 1 / n)


def test_table_paired_json() -> None:
    res = plan("--num-samples-total", "4096", "--design", "paired", "--agreement", "0.95", "--target-theta", "3", "--json",
               "--regression-model", "split")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["design"] == "paired" and out["agreement"] == 0.95
    rows = out["rows"]
    assert [r["num_samples"] for r in rows] == [32, 64, 128, 256, 512, 1024, 2048, 4096]
    for r in rows:  # the unpaired keys and values are unchanged
        assert {"num_samples", "theta", "threshold_minus_reference", "paired_theta", "paired_feasible"} == set(r)
        s = math.sqrt(5000 / r["num_samples"])
        assert r["theta"] == pytest.approx(K_005_020 * s, abs=TOL)
        assert r["threshold_minus_reference"] == pytest.approx(-1.6448536 * s, abs=TOL)
        assert r["paired_theta"] == pytest.approx(hand_paired_theta(r["num_samples"], 0.95), abs=TOL)
        assert r["paired_feasible"] is (r["paired_theta"] <= 5.0)
    # n = 1024: 248.64748 * sqrt(0.05 / 1024) + 100 / 1024 = 1.7374771 + 0.0976563
    assert rows[5]["paired_theta"] == pytest.approx(1.8351333, abs=TOL)
    assert [r["paired_feasible"] for r in rows[:4]] == [False, False, False, True]
    assert out["min_num_samples"] == 3435
    n = out["paired_min_num_samples"]
    assert hand_paired_theta(n, 0.95) <= 3 < hand_paired_theta(n - 1, 0.95)
    assert n == 408 and out["paired_target_feasible"] is True


def test_table_paired_human() -> None:
    res = plan("--num-samples-total", "1024", "--design", "paired", "--agreement", "0.9", "--target-theta", "3",
               "--regression-model", "split")
    assert res.returncode == 0, res.stderr
    assert "paired-theta" in res.stdout and "threshold-reference" in res.stdout
    assert "3435 unpaired, 753 paired" in res.stdout
    assert len([ln for ln in res.stdout.splitlines() if ln.strip()[:1].isdigit()]) == 6  # 32..1024


def test_table_explicit_unpaired_json_unchanged() -> None:
    res = plan("--num-samples-total", "64", "--design", "unpaired", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert list(out) == ["rows"]
    assert all(set(r) == {"num_samples", "theta", "threshold_minus_reference"} for r in out["rows"])


def test_savings_json() -> None:
    res = plan("--savings", "--json", "--regression-model", "split")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert (out["target_theta"], out["sigma"], out["alpha"], out["beta"]) == (3.0, 50.0, 0.05, 0.2)
    assert out["unpaired_num_samples"] == 3435  # ceil(2 * (2.4864748 * 50 / 3)^2) = ceil(3434.75)
    by_a = {r["agreement"]: r for r in out["paired"]}
    assert sorted(by_a) == [0.9, 0.95, 0.98]
    for a in (0.9, 0.95):
        n = by_a[a]["num_samples"]
        assert hand_paired_theta(n, a) <= 3 < hand_paired_theta(n - 1, a)
        assert by_a[a]["feasible"] is True and by_a[a]["ratio"] == pytest.approx(3435 / n)
    assert (by_a[0.9]["num_samples"], by_a[0.95]["num_samples"]) == (753, 408)
    # a 3-point drop changes at least 3% of the answers: 98% agreement cannot hold
    assert by_a[0.98] == {"agreement": 0.98, "num_samples": None, "feasible": False, "ratio": None}


def test_savings_human() -> None:
    res = plan("--savings", "--regression-model", "split")
    assert res.returncode == 0, res.stderr
    for text in ("3435", "753", "408", "n/a", "0.97"):
        assert text in res.stdout
    res = plan("--savings", "--agreement", "0.97", "--target-theta", "3", "--regression-model", "split")
    assert res.returncode == 0 and "269" in res.stdout and "n/a" not in res.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("--design", "paired"),  # no --agreement
        ("--design", "paired", "--agreement", "1.5"),
        ("--design", "paired", "--agreement", "1"),
        ("--agreement", "0.9"),  # without --design paired
        ("--design", "bogus", "--agreement", "0.9"),
        ("--savings", "--design", "paired", "--agreement", "0.9"),
        ("--task", "mmlu", "--model", "x", "--sequential", "3"),  # a sequential plan is the table's
    ],
)
def test_paired_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    res = plan(*args)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr


def test_default_plan_models_the_regression_as_added_flips() -> None:
    """From a healthy agreement of 0.95, theta 3 needs about 600 samples, not the 408 of the split model;
    the figure is checked against the exact power of McNemar's test."""
    from runner.stats.planning.paired import mcnemar_power

    res = plan("--num-samples-total", "4096", "--design", "paired", "--agreement", "0.95", "--target-theta", "3", "--json")
    out = json.loads(res.stdout)
    assert out["regression_model"] == "added"
    n = out["paired_min_num_samples"]
    assert 580 <= n <= 640
    assert mcnemar_power(n, 0.95, 3.0, 0.05) >= 0.8 > mcnemar_power(408, 0.95, 3.0, 0.05)
    text = plan("--savings", "--target-theta", "3").stdout
    assert "regression model 'added'" in text
