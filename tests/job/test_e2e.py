"""End to end on the real embedded model at small n, against a real MLflow server on 127.0.0.1."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from runner.contract.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION
from runner.job.flow import run
from tests.conftest import ROOT, compose, run_cli

pytestmark = pytest.mark.e2e
FIXTURE = str(ROOT / "tests" / "data" / "mmlu_cais")
SMALL = ["task.dataset.source=local", f"task.dataset.local_path={FIXTURE}", "task.num_fewshot=2"]


def test_record_then_check_logs_everything_to_mlflow(tmp_path, mlflow_server, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    refs = tmp_path / "refs"
    common = [*SMALL, f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=e2e", f"reference.dir={refs}"]

    recorded = run(compose([*common, "reference.mode=record", f"output_dir={tmp_path / 'rec'}"]))
    assert recorded.exit_status == EXIT_OK and recorded.decision is None
    text = (refs / "mmlu.yaml").read_text()
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in text and recorded.run_id in text
    assert "extra_acc_spec: num_fewshot=2" in text
    from runner.references import samples as reference_samples
    from runner.references.store import lookup
    from runner.contract.spec import AccuracySpec
    from runner.stats.data.hypothesis import HypothesisParams

    entry = lookup(refs, "mmlu", "accuracy", "HuggingFaceTB/SmolLM2-135M-Instruct",
                   AccuracySpec(extra_acc_spec="num_fewshot=2"), HypothesisParams(0.05, 0.2, 50.0, 4096))
    per_sample = reference_samples.load(refs, entry.recorded["samples"], entry.recorded["samples_sha256"])
    assert len(per_sample) == 7 and sum(per_sample.values()) / 7 == pytest.approx(recorded.score)

    checked = run(compose([*common, f"output_dir={tmp_path / 'chk'}"]))
    # identical answers on 7 questions: no regression, and 7 questions cannot show a drop < 2.75 either
    assert checked.exit_status == EXIT_INCONCLUSIVE and checked.decision.outcome == "INCONCLUSIVE"
    assert checked.decision.advice is not None and checked.decision.advice.target == "GO"
    assert checked.score == recorded.score  # same seed, same samples, greedy: identical
    decision = checked.decision
    assert decision is not None and decision.passed and decision.verdict.passed
    assert decision.verdict.reference == pytest.approx(recorded.score, abs=1e-4)
    # the reference kept per-sample scores for the same samples: the paired test decides
    assert decision.rule == "paired" and decision.paired.discordant == (0, 0)

    # a quantized spec against the unquantized baseline: paired, with its discordant counts logged
    quantized = run(compose([*common, "quant=w8a16", "reference.against=baseline", f"output_dir={tmp_path / 'q'}"]))
    assert quantized.spec.quant_algo == "W8A16" and quantized.decision.rule == "paired"
    b, c = quantized.decision.paired.discordant
    q_metrics = MlflowClient(tracking_uri=mlflow_server).get_run(quantized.run_id).data.metrics
    assert q_metrics["paired_discordant_b"] == b and q_metrics["paired_discordant_c"] == c
    assert "paired_p_value" in q_metrics
    # how the quantized model was obtained is searchable: tags, and this run's own timings as metrics
    q_tags = MlflowClient(tracking_uri=mlflow_server).get_run(quantized.run_id).data.tags
    assert q_tags["backend.quant_cache"] in ("hit", "miss") and q_tags["backend.quant_layers"] == "W8A16: 210"
    assert ("quant_calib_time_s" in q_metrics) == (q_tags["backend.quant_cache"] == "miss")

    client = MlflowClient(tracking_uri=mlflow_server)
    mlrun = client.get_run(checked.run_id)
    assert mlrun.info.status == "FINISHED"
    assert mlrun.info.run_name == "smollm2_135m/none-mmlu"
    metrics = mlrun.data.metrics
    assert "theta" not in metrics  # identical answers: the deciding (paired) theta is undefined, so none is logged
    for key in ("score", "accuracy", "reference", "unpaired_threshold", "num_samples", "passed", "unpaired_room",
                "p_value", "p_regression", "diff_ci_low", "diff_ci_high", "paired_p_value", "paired_discordant_b"):
        assert key in metrics, key
    assert "threshold" not in metrics  # the paired rule decided: the unpaired threshold keeps its own name
    assert metrics["passed"] == 1.0 and metrics["score"] == pytest.approx(checked.score)
    assert metrics["unpaired_room"] == pytest.approx(metrics["run_score"] - metrics["unpaired_threshold"])
    assert metrics["p_regression"] == metrics["paired_p_value"] == 1.0  # identical answers: difference 0, p 1
    assert metrics["diff_ci_low"] <= 0.0 <= metrics["diff_ci_high"]
    params = mlrun.data.params
    assert params["task.num_fewshot"] == "2" and params["model.hf_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    tags = mlrun.data.tags
    assert tags["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and tags["backend"] == "hf"
    assert tags["quant_algo"] == "None" and tags["verdict"] == "inconclusive" and tags["decided_by"] == "paired"
    assert "version.torch" in tags and "version.transformers" in tags and tags["runner_commit"]
    artifacts = {a.path for a in client.list_artifacts(checked.run_id)}
    assert {"samples.jsonl", "report.txt", "report.json", "config.yaml"} <= artifacts
    local = client.download_artifacts(checked.run_id, "samples.jsonl", str(tmp_path))
    rows = [json.loads(line) for line in open(local)]
    assert len(rows) == 7 and {"sample_id", "prompt", "prediction", "target", "score"} <= set(rows[0])


def test_cli_exits_with_the_regression_status(tmp_path):
    """A NO-GO single job through the real command line exits 3 and says why. The answers come from the scripted
    backend: the test is about the command line's verdict, report and exit status (which answers they are does
    not matter against a reference of 99%), and the embedded model's own answers are the other tests' here."""
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "mmlu.yaml").write_text(
        "HuggingFaceTB/SmolLM2-135M-Instruct:\n"
        "  - extra_acc_spec: num_fewshot=2\n"
        "    accuracy: 99.0\n"
        "    sigma: 5.0\n")
    # the fixture's 7 questions come from 2 subjects, too few clusters for a clustered claim (stats.min_clusters):
    # the samples are taken as independent here, as stats.cluster=off says
    proc = run_cli(["backend=fake", *SMALL, "tracking=none", f"reference.dir={refs}", "stats.cluster=off"], tmp_path)
    assert proc.returncode == EXIT_REGRESSION, proc.stdout + proc.stderr
    assert "verdict:     NO-GO" in proc.stdout and "threshold" in proc.stdout
    out_dir = next((tmp_path / "outputs").glob("*/*"))
    report = json.loads((out_dir / "report.json").read_text())
    assert report["verdict"] == "NO-GO" and report["passed"] is False and report["num_evaluated"] == 7
    assert report["decided_by"] == "unpaired"  # no per-sample reference scores in this entry
    assert os.path.exists(out_dir / "samples.jsonl")


def test_one_n_in_every_output(tmp_path, mlflow_server, monkeypatch):
    """task.num_samples=1 on two subjects evaluates one question per subject (the per-subject rule rounds
    up): 2 samples, said before any compute, and the same n in the report, report.json and MLflow."""
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    out = run(compose([*SMALL, "task.num_samples=1", "reference.mode=skip", f"tracking.tracking_uri={mlflow_server}",
                       "tracking.experiment=e2e-n", f"output_dir={tmp_path / 'n'}"]))
    report = (tmp_path / "n" / "report.txt").read_text()
    assert "on 2 samples" in report and "theta at n=2:" in report
    assert "2 samples are evaluated, not 1" in report
    payload = json.loads((tmp_path / "n" / "report.json").read_text())
    assert payload["num_evaluated"] == 2
    metrics = MlflowClient(tracking_uri=mlflow_server).get_run(out.run_id).data.metrics
    assert metrics["num_samples"] == metrics["num_evaluated"] == 2.0


def test_the_quantized_model_on_57_questions_is_not_a_go_and_two_way_passes_it(tmp_path, monkeypatch):
    """The issue's example: w4a16 against the committed unquantized MMLU 0-shot baseline (paired, 57 questions).
    GO is out of reach at n = 57 whatever the answers (zero discordant pairs prove a 2.75-point tolerance only
    from n = 108), so the verdict is INCONCLUSIVE (exit 4, with the advice) unless a regression is shown; the
    two-way rule passes everything that is not NO-GO, as TensorRT-LLM's does."""
    monkeypatch.chdir(tmp_path)
    common = ["quant=w4a16", "task=mmlu_0shot", "reference.against=baseline", "tracking=none"]
    three = run(compose([*common, f"output_dir={tmp_path / 'three'}"]))
    report = json.loads((tmp_path / "three" / "report.json").read_text())
    verdict = report["decision"]["verdict"]
    assert verdict in ("INCONCLUSIVE", "NO-GO") and report["decision"]["rule"] == "paired"
    if verdict == "INCONCLUSIVE":
        assert three.exit_status == EXIT_INCONCLUSIVE and report["advice"]["target"] in ("GO", "NO-GO")
        assert "more samples" in report["advice"]["text"]
    two = replace(three.decision, mode="two_way")  # what stats.verdicts=two_way makes of the same decision
    assert two.outcome == verdict and two.reported == ("FAIL" if verdict == "NO-GO" else "PASS")
    assert two.exit_status == (EXIT_REGRESSION if verdict == "NO-GO" else EXIT_OK)
