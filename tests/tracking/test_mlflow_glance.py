"""MLflow at a glance: run names that lead with what differs, verdict/score/reference/delta as
columns, readable p-values, breakdowns and samples as tables, the report as the description, the
evaluated samples as the run's dataset, and the samples that flipped against the reference."""

from __future__ import annotations

import json
import re

import mlflow

from runner.tracking.naming import breakdown_table
from runner.tracking.view import VIEW_TAG, saved_state
from tests.conftest import ROOT, run_in_process

GSM8K = ["backend=fake", "task=gsm8k", "task.dataset.source=local",
         f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "task.num_samples=8", "stats.method=paired"]


def test_a_checked_run_reads_at_a_glance(tmp_path, sqlite_store):
    uri = sqlite_store(tmp_path / "mlflow.db")
    common = [*GSM8K, f"tracking.tracking_uri={uri}", f"reference.dir={tmp_path / 'refs'}"]
    # both jobs in this process, through the command line's glue (exit status and all): what is checked is what
    # MLflow holds, not the process
    recorded = run_in_process([*common, "reference.mode=record", f"output_dir={tmp_path / 'rec'}"], tmp_path)
    assert recorded.returncode == 0, recorded.stderr
    # the fake backend echoes the prompt's end (every answer wrong); now one answer becomes right:
    # the first fixture question's answer is 1,000, and lm-eval's flexible filter takes the last number
    checked = run_in_process([*common, "backend.default_answer=The answer is 1000", f"output_dir={tmp_path / 'chk'}"],
                             tmp_path)
    assert checked.returncode == 4, checked.stderr  # one gained answer of 8: INCONCLUSIVE

    client = mlflow.MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("runner").experiment_id], order_by=["attributes.start_time"])
    run = runs[-1]
    assert run.info.run_name == "smollm2_135m/none-gsm8k"
    tags, metrics = run.data.tags, run.data.metrics
    assert tags["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and tags["backend"] == "fake"
    assert tags["verdict"] == "inconclusive" and metrics["verdict"] == 2.0 and metrics["inconclusive"] == 1.0
    assert metrics["reference"] == 0.0 and metrics["score"] > 0.0
    assert metrics["delta"] == metrics["score"] - metrics["reference"]
    assert "delta_pct" not in metrics  # undefined against a reference of 0
    assert tags["p_value"] == f"{metrics['p_value']:.4g}" and tags["delta"].startswith("+")
    assert (tags["score"], tags["reference"]) == (f"{metrics['score']:.4g}", "0")  # the table's rounded copies
    assert "accuracy:" in tags["mlflow.note.content"] and "INCONCLUSIVE" in tags["mlflow.note.content"]
    assert tags["mlflow.note.content"].startswith("**INCONCLUSIVE")  # the verdict first, where the run page opens
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"samples.json", "flipped_samples.json", "results.json", "report.txt"} <= artifacts
    flipped = json.loads(open(client.download_artifacts(run.info.run_id, "flipped_samples.json")).read())
    rows = [dict(zip(flipped["columns"], row)) for row in flipped["data"]]
    assert len(rows) == 1 and rows[0]["change"] == "better" and rows[0]["reference_score"] == 0.0
    assert run.inputs.dataset_inputs and run.inputs.dataset_inputs[0].dataset.name == "gsm8k-8"
    assert runs[0].data.tags["verdict"] == "no verdict" and runs[0].data.metrics["verdict"] == 3.0
    assert_the_saved_view_shows_the_decision(client.get_experiment_by_name("runner").tags, run)


def assert_the_saved_view_shows_the_decision(experiment_tags, run):
    """The experiment's saved view (what the printed address opens) selects the decision's columns, and each
    names a value the run carries: MLflow shows an empty cell for a name nothing logged."""
    envelope = json.loads(experiment_tags[VIEW_TAG])
    assert isinstance(envelope["name"], str) and isinstance(envelope["createdAt"], int)  # MLflow's envelope check
    columns = [re.fullmatch(r"(\w+)\.`(.+)`", key).groups() for key in saved_state(experiment_tags[VIEW_TAG])["selectedColumns"]]
    carried = {"metrics": run.data.metrics, "tags": run.data.tags,
               "attributes": {"Dataset"} if run.inputs.dataset_inputs else set()}
    assert all(name in carried[kind] for kind, name in columns), columns
    assert {"verdict", "score", "reference", "delta", "p_value"} <= {name for _, name in columns}


def test_the_saved_view_is_written_once_and_restored_when_changed(tmp_path, sqlite_store):
    from types import SimpleNamespace

    from runner.tracking.trackers import MlflowTracker

    uri = sqlite_store(tmp_path / "m.db")
    client = mlflow.MlflowClient(tracking_uri=uri)

    def job() -> str:
        tracker = MlflowTracker(SimpleNamespace(tracking_uri=uri, experiment="e", connect_timeout_s=5))
        tracker.start("none-perplexity", {}, {})
        tracker.end("FINISHED")
        return client.get_experiment_by_name("e").tags[VIEW_TAG]

    first = job()
    assert job() == first  # the same view is not rewritten (its createdAt stays)
    experiment_id = client.get_experiment_by_name("e").experiment_id
    edited = json.dumps({"name": "mine", "createdAt": 1, "state": json.dumps({"selectedColumns": ["tags.`verdict`"]})})
    client.set_experiment_tag(experiment_id, VIEW_TAG, edited)
    assert job() == edited  # a person's edits to the view stay: it is written only when absent


def test_breakdowns_become_one_table_not_many_columns():
    metrics = {"accuracy": 30.0, "subject/anatomy": 25.0, "subject/virology": 40.0}
    assert breakdown_table(metrics) == {"group": ["subject", "subject"], "name": ["anatomy", "virology"],
                                        "value": [25.0, 40.0]}
    assert breakdown_table({"accuracy": 30.0}) is None


def test_a_dataset_label_that_is_no_file_or_url_still_logs(tmp_path, sqlite_store):
    from types import SimpleNamespace

    from runner.tracking.trackers import MlflowTracker

    uri = sqlite_store(tmp_path / "m.db")
    tracker = MlflowTracker(SimpleNamespace(tracking_uri=uri, experiment="e", connect_timeout_s=5))
    tracker.start("none-perplexity", {}, {})
    for label in ("packaged", "corpus=pydoc_topics-32e8236b", "cais/mmlu"):
        tracker.log_dataset({"sample_id": ["a"], "prompt": ["p"], "target": ["t"]}, f"x-{label}", label)
    tracker.end("FINISHED")
    run = mlflow.MlflowClient(tracking_uri=uri).get_run(tracker.run_id)
    assert len(run.inputs.dataset_inputs) == 3 and run.info.status == "FINISHED"
