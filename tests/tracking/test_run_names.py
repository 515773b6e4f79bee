"""How a person finds a job in MLflow (issue 31): run names carry the model, and the address printed at the
end of a job or sweep opens the experiment's runs table, not MLflow 3's home or overview page."""

from __future__ import annotations

from tests.conftest import compose

from runner.job.flow import typed
from runner.tracking.naming import run_identity, run_name
from runner.tracking.trackers import runs_table_url, ui_address


def test_two_models_runs_of_one_task_have_different_names():
    assert run_name("smollm2_135m", "w4a16", "mmlu") == "smollm2_135m/w4a16-mmlu"
    config = typed(compose(["model=llama31_8b", "quant=fp8", "output_dir=."]))
    name, tags = run_identity(config.model, config.quant, config.task, "hf", "check", None)
    assert name == "llama31_8b/fp8-mmlu" and tags["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert "mlflow.runType" not in tags  # a lone job: nothing to expand


def test_a_sweeps_jobs_are_evaluation_runs_so_the_runs_table_expands_their_parent():
    config = typed(compose(["output_dir=."]))
    _, tags = run_identity(config.model, config.quant, config.task, "hf", "check", "parent123")
    # MLflow 3.17's runs table expands, on first sight, the parents of runs whose mlflow.runType is "evaluation"
    assert tags["mlflow.parentRunId"] == "parent123" and tags["mlflow.runType"] == "evaluation"


def test_the_printed_address_is_the_experiments_runs_table():
    assert runs_table_url("http://127.0.0.1:5000/", "7") == (
        "http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning&viewStateShareKey=runner-verdicts")
    assert ui_address("sqlite:///mlflow.db") == "http://127.0.0.1:5000"  # `mlflow ui`'s default address
    assert ui_address("https://mlflow.example.org") == "https://mlflow.example.org"


def test_the_project_commit_is_found_from_the_checkout():
    """Recorded references said ``runner_commit: unknown``: the root was looked up from the package's directory."""
    import subprocess

    from runner.tracking.provenance import PACKAGE_DIR, project_commit

    head = subprocess.run(["git", "-C", str(PACKAGE_DIR), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert project_commit().removesuffix("-dirty") == head.strip() != ""


def test_a_local_stores_address_and_its_ui_command_agree_on_the_port(monkeypatch):
    from runner.tracking.trackers import browse_hint

    monkeypatch.delenv("RUNNER_MLFLOW_UI", raising=False)
    assert browse_hint("sqlite:///mlflow.db").startswith(
        "mlflow ui --backend-store-uri sqlite:///mlflow.db --host 127.0.0.1 --port 5000")
    monkeypatch.setenv("RUNNER_MLFLOW_UI", "http://127.0.0.1:5123/")  # port 5000 taken: another one, said once
    assert ui_address("sqlite:///mlflow.db") == "http://127.0.0.1:5123"
    assert "--port 5123" in browse_hint("sqlite:///mlflow.db")
    assert browse_hint("http://mlflow:5000") == ""  # a server: its own address, nothing to start
