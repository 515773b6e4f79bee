"""SCORE end to end on the embedded model cut to its first 2 layers (``two_layer_checkpoint``: trained weights, its
tokenizer and chat template) at tiny n (2 questions, 6 new tokens), one job per dataset family and task kind,
logging to a real MLflow server. The AGIEval job records both references (accuracy and consistency) and is checked
against them. What is checked is the job around the model (its variants, metrics, records, gate and MLflow), not
the model's answers, so the cut model does (its prompts of up to 10 variants cost the whole model seconds each);
the job's gate logic itself is covered without a model in tests/tasks/test_score.py."""

from __future__ import annotations

import json

import pytest

from runner.contract.errors import EXIT_OK
from runner.job.flow import run
from tests.conftest import ROOT, compose

pytestmark = pytest.mark.e2e
DATA = ROOT / "tests" / "data" / "score"
CASES = [("agieval", "option_order", "options_consistency_rate", "per_option_accuracy_D", 4),
         ("mmlu_pro", "prompt", "consistency_rate", "9_macro_accuracy", 10),
         ("math", "non_greedy", "consistency_rate", "seed_5_accuracy", 5)]
SUBSETS = {"agieval": ["task.subsets=[aqua_rat,sat_math]"], "math": ["task.subsets=[algebra,number_theory]"]}


@pytest.mark.parametrize("family,kind,cr,variant_metric,variants", CASES)
def test_score_job_on_the_embedded_model(family, kind, cr, variant_metric, variants, tmp_path, mlflow_server, monkeypatch,
                                         two_layer_checkpoint):
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    refs = tmp_path / "refs"
    common = [f"task=score_{kind}", f"model.path={two_layer_checkpoint}", f"task.family={family}", f"task.dataset.local_path={DATA}", "task.num_samples=2",
              "task.max_output_len=6", "task.bootstrap_samples=200", "cache=off", f"reference.dir={refs}",
              f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=score-e2e", *SUBSETS.get(family, [])]
    record = family == "agieval"
    first = run(compose([*common, f"reference.mode={'record' if record else 'skip'}", f"output_dir={tmp_path / 'a'}"]))
    assert first.exit_status in (EXIT_OK, 4)
    client = MlflowClient(tracking_uri=mlflow_server)
    metrics = client.get_run(first.run_id).data.metrics
    for key in ("accuracy", cr, f"{cr}_ci_low", f"{cr}_ci_high", "accuracy_min", "accuracy_range", variant_metric):
        assert key in metrics, key
    assert metrics["num_generations"] == 2 * variants
    rows = [json.loads(line) for line in open(tmp_path / "a" / "samples.jsonl")]
    assert len(rows) == 2 and all(len(r["meta"]["variants"]) == variants for r in rows)
    if kind == "non_greedy":  # five seeded samples per question, in one job
        assert [v["key"] for v in rows[0]["meta"]["variants"]] == [f"seed_{s}" for s in range(1, 6)]
    if not record:
        return
    text = (refs / f"score_{kind}_{family}.yaml").read_text()
    assert f"{cr}: " in text and f"{cr}_se: " in text
    checked = run(compose([*common, f"output_dir={tmp_path / 'b'}"]))
    assert checked.exit_status in (0, 4) and checked.metrics == pytest.approx(first.metrics)
    assert "Consistency gate: " + cr in (tmp_path / "b" / "report.txt").read_text()
    assert client.get_run(checked.run_id).data.metrics["passed"] == 1.0
