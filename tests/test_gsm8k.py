"""GSM8K: number extraction and normalisation, prompt construction, data sources, scoring."""

from __future__ import annotations

import json

import pytest

from evaluators.gsm8k import (GSM8KEvaluator, Problem, build_prompt, extract_flexible, extract_strict,
                              normalize_number)
from runner.backends.base import GenerationRequest
from runner.errors import ConfigError, DataError
from runner.schema import DatasetConfig, GSM8KTaskConfig
from tests.conftest import ROOT, compose

LOCAL = ROOT / "tests" / "data" / "gsm8k_local"


def task(**kw) -> GSM8KTaskConfig:
    dataset = kw.pop("dataset", DatasetConfig(source="local", local_path=str(LOCAL), hub_config="main"))
    base = dict(_target_="evaluators.gsm8k.GSM8KEvaluator", name="gsm8k", num_samples=1319, max_input_len=4096,
                max_output_len=256, dataset=dataset)
    return GSM8KTaskConfig(**(base | kw))


@pytest.mark.parametrize("text,value", [
    ("1,000", "1000"), ("$5.", "5"), ("-7", "-7"), ("5.00", "5"), ("5.50", "5.5"), ("$1,234.50", "1234.5"),
    ("-$3", "-3"), ("$-3", "-3"), ("0.0", "0"), ("-0", "0"), ("100", "100"), ("abc", None), ("", None),
])
def test_normalize_number(text, value):
    assert normalize_number(text) == value


@pytest.mark.parametrize("output,strict,flexible", [
    ("She pays 2 * 500 = 1,000 dollars.\n#### 1,000", "1000", "1000"),
    ("Each costs $5.\n#### $5.", "5", "5"),
    ("The loss is -12 dollars.\n#### -12", "-12", "-12"),
    ("It drops 3 - 8 = <<3-8=-5>>-5 degrees.\n#### -5", "-5", "-5"),
    ("The total is 5.00 dollars", None, "5"),  # no "#### ": strict finds nothing
    ("#### \nno number after the marker", None, None),
    ("I do not know.", None, None),
    ("", None, None),
    ("#### 7\nBut actually it is 9.", "7", "9"),  # strict: first marker; flexible: last number
    ("#### 3\n#### 4", "3", "4"),
    ("16-3-4=<<16-3-4=9>>9 eggs", None, "9"),  # a minus after a digit is subtraction, not a sign
    ("The answer is x2 or 1.5", None, "1.5"),
    ("He saves $1,250.75 in total.", None, "1250.75"),
])
def test_strict_and_flexible_extraction(output, strict, flexible):
    assert extract_strict(output) == strict
    assert extract_flexible(output) == flexible


def test_prompt_is_question_answer_with_worked_solutions():
    shot = Problem("Tom has 3 apples and buys 4 more. How many?", "3 + 4 = 7 apples.\n#### 7", "7", 0)
    q = Problem("  What is 2 + 2?  ", "2 + 2 = 4\n#### 4", "4", 1)
    assert build_prompt(q, [shot, shot]) == (
        "Question: Tom has 3 apples and buys 4 more. How many?\nAnswer: 3 + 4 = 7 apples.\n#### 7\n\n"
        "Question: Tom has 3 apples and buys 4 more. How many?\nAnswer: 3 + 4 = 7 apples.\n#### 7\n\n"
        "Question: What is 2 + 2?\nAnswer:"
    )
    assert build_prompt(q, []) == "Question: What is 2 + 2?\nAnswer:"


def test_local_source_takes_shots_from_train_and_evaluates_every_test_row():
    ev = GSM8KEvaluator(task(num_fewshot=2))
    samples = ev.samples(1319, seed=0)
    assert [s.id for s in samples] == [f"test/{i}" for i in range(5)]
    assert [s.target for s in samples] == ["1000", "-5", "4", "10", "20"]  # "#### 1,000" normalised
    first = samples[0]
    assert first.prompt.count("Question:") == 3 and first.prompt.endswith("How many remain?\nAnswer:")
    assert first.prompt.startswith("Question: Tom has 3 apples")  # train row 0
    assert "A box holds 12 pens" in first.prompt and "Mia had $20" not in first.prompt  # k=2
    assert ev.source_used == "local"


def test_single_file_source_holds_out_its_first_rows_as_shots():
    ev = GSM8KEvaluator(task(num_fewshot=2, dataset=DatasetConfig(source="local", local_path=str(LOCAL / "main" / "test.jsonl"))))
    samples = ev.samples(1319, seed=0)
    assert [s.id for s in samples] == ["test/2", "test/3", "test/4"]
    assert "1,200 chickens" in samples[0].prompt and "fell by 8 degrees" in samples[0].prompt


def test_packaged_copy_holds_out_the_shots_and_subsets_by_seed():
    ev = GSM8KEvaluator(task(dataset=DatasetConfig(source="packaged")))
    full = ev.samples(1319, seed=0)
    assert len(full) == 1319 - 5 and full[0].id == "test/5" and ev.source_used == "packaged"
    assert len({s.prompt.rsplit("Question:", 1)[0] for s in full}) == 1  # one shared few-shot block
    assert all(s.prompt.count("Question:") == 6 for s in full[:20])
    small = ev.samples(16, seed=0)
    assert len(small) == 16 and {s.id for s in small} <= {s.id for s in full}
    assert [s.id for s in GSM8KEvaluator(task(dataset=DatasetConfig(source="packaged"))).samples(16, seed=0)] == [s.id for s in small]
    assert [s.id for s in ev.samples(16, seed=1)] != [s.id for s in small]
    assert all(int(s.id.split("/")[1]) >= 5 for s in small)
    # the packaged file's first problem (row 0, held out) has the gold answer 18
    assert "#### 18" in full[0].prompt


def test_requests_are_greedy_with_stop_strings():
    ev = GSM8KEvaluator(task(max_output_len=64))
    (req,) = ev.requests(ev.samples(1, 0)[0])
    assert isinstance(req, GenerationRequest) and req.greedy and req.max_tokens == 64
    assert req.stop == ("Question:", "</s>", "<|im_end|>")


def test_score_is_half_per_matching_extraction_and_aggregate_reports_both():
    ev = GSM8KEvaluator(task(num_fewshot=0))
    s = ev.samples(1319, 0)[0]  # gold 1000
    both = ev.score(s, ["1200 - 200 = 1,000 chickens.\n#### 1,000"])
    strict_only = ev.score(s, ["#### 1000\n\nso roughly 999 are left"])
    flexible_only = ev.score(s, ["There are $1,000."])
    none = ev.score(s, ["#### 12"])
    assert [x.score for x in (both, strict_only, flexible_only, none)] == [100.0, 50.0, 50.0, 0.0]
    assert flexible_only.meta["strict"] is None and flexible_only.meta["flexible"] == "1000"
    agg = ev.aggregate([both, strict_only, flexible_only, none])
    # strict matches 2 of 4 (50%), flexible 2 of 4 (50%); per-sample mean (100 + 50 + 50 + 0) / 4 = 50
    assert agg == {"accuracy": 50.0, "exact_match_strict": 50.0, "exact_match_flexible": 50.0}
    agg3 = ev.aggregate([both, strict_only, none])
    assert agg3["exact_match_strict"] == pytest.approx(200 / 3) and agg3["exact_match_flexible"] == pytest.approx(100 / 3)
    assert agg3["accuracy"] == pytest.approx(50.0)  # (66.67 + 33.33) / 2


def test_extra_acc_spec_names_protocol_deviations():
    assert GSM8KEvaluator(task()).extra_acc_spec() is None
    spec = GSM8KEvaluator(task(num_fewshot=8, max_output_len=128, apply_chat_template=True, system_prompt="Be brief.")).extra_acc_spec()
    parts = spec.split(",")
    assert parts[:3] == ["num_fewshot=8", "max_output_len=128", "chat_template=true"]
    assert parts[3].startswith("system_prompt=") and len(parts[3]) == len("system_prompt=") + 8
    assert GSM8KEvaluator(task(stop=["\n\n"])).extra_acc_spec().startswith("stop=")


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="task.num_fewshot"):
        GSM8KEvaluator(task(num_fewshot=-1))
    with pytest.raises(ConfigError, match="task.dataset.source"):
        GSM8KEvaluator(task(dataset=DatasetConfig(source="ftp")))


@pytest.mark.parametrize("row,what", [
    ({"question": "How many?", "answer": "It is four."}, "#### <number>"),
    ({"question": "", "answer": "#### 4"}, "question is empty"),
])
def test_malformed_row_names_source_and_row(tmp_path, row, what):
    bad = tmp_path / "test.jsonl"
    bad.write_text(json.dumps({"question": "ok?", "answer": "#### 1"}) + "\n" + json.dumps(row) + "\n")
    ev = GSM8KEvaluator(task(num_fewshot=0, dataset=DatasetConfig(source="local", local_path=str(bad))))
    with pytest.raises(DataError) as info:
        ev.samples(10, 0)
    assert "row 1" in str(info.value) and what in str(info.value) and "local_path" in str(info.value)


def test_wrong_columns_are_reported(tmp_path):
    bad = tmp_path / "test.jsonl"
    bad.write_text(json.dumps({"problem": "q", "solution": "#### 1"}) + "\n")
    with pytest.raises(DataError, match="GSM8K's columns"):
        GSM8KEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(bad)))).samples(1, 0)


def test_unreachable_hub_names_the_alternatives():
    ev = GSM8KEvaluator(task(dataset=DatasetConfig(source="hub", hub_id="openai/gsm8k", hub_config="main")))
    with pytest.raises(DataError) as info:
        ev.samples(10, 0)
    text = str(info.value)
    assert "openai/gsm8k" in text and "source=packaged" in text and "local_path" in text


def test_config_composes_with_upstream_parameters():
    from omegaconf import OmegaConf

    cfg = compose(["task=gsm8k"])
    t = OmegaConf.to_object(cfg.task)
    assert isinstance(t, GSM8KTaskConfig)
    assert (t.alpha, t.beta, t.sigma, t.num_samples, t.max_input_len, t.max_output_len, t.num_fewshot) == (
        0.05, 0.2, 50.0, 1319, 4096, 256, 5)
    assert t.metric == "accuracy" and t.higher_is_better and t.dataset.hub_id == "openai/gsm8k"
    assert GSM8KEvaluator(t).extra_acc_spec() is None



@pytest.mark.parametrize("model,quant,kv,value", [
    ("meta-llama/Llama-3.1-8B-Instruct", None, None, 74.20), ("meta-llama/Llama-3.1-8B-Instruct", "FP8", None, 74.30),
    ("meta-llama/Llama-3.1-8B-Instruct", "FP8", "FP8", 72.85), ("meta-llama/Llama-3.1-8B-Instruct", "FP8", "NVFP4", 69.75),
    ("mistralai/Ministral-8B-Instruct-2410", None, None, 79.25), ("mistralai/Ministral-8B-Instruct-2410", "FP8", "FP8", 78.35),
])
def test_published_references(model, quant, kv, value):
    from runner.references import lookup
    from runner.spec import AccuracySpec
    from runner.stats import HypothesisParams

    entry = lookup(ROOT / "references", "gsm8k", "accuracy", model, AccuracySpec(quant_algo=quant, kv_cache_quant_algo=kv),
                   HypothesisParams(0.05, 0.2, 50.0, 1319))
    assert entry.value == value and entry.params.num_samples == 1319


@pytest.mark.e2e
def test_end_to_end_record_then_check_logs_both_parts_to_mlflow(tmp_path, mlflow_server, monkeypatch):
    """The embedded model on 3 packaged problems: record a reference, check against it, read MLflow back."""
    from mlflow.tracking import MlflowClient

    from runner.job import run

    monkeypatch.chdir(tmp_path)
    refs = tmp_path / "refs"
    common = ["task=gsm8k", "task.num_samples=3", "task.max_output_len=48", "cache=off", f"reference.dir={refs}",
              f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=e2e-gsm8k"]
    recorded = run(compose([*common, "reference.mode=record", f"output_dir={tmp_path / 'rec'}"]))
    assert recorded.exit_status == 0 and recorded.spec.extra_acc_spec == "max_output_len=48"
    assert "extra_acc_spec: max_output_len=48" in (refs / "gsm8k.yaml").read_text()
    checked = run(compose([*common, f"output_dir={tmp_path / 'chk'}"]))
    assert checked.exit_status == 0 and checked.score == recorded.score
    assert checked.decision is not None and checked.decision.method == "paired" and checked.decision.passed

    metrics = MlflowClient(tracking_uri=mlflow_server).get_run(checked.run_id).data.metrics
    for key in ("accuracy", "exact_match_strict", "exact_match_flexible", "score", "threshold", "num_evaluated"):
        assert key in metrics, key
    assert metrics["num_evaluated"] == 3
    assert metrics["accuracy"] == pytest.approx((metrics["exact_match_strict"] + metrics["exact_match_flexible"]) / 2)
    rows = [json.loads(line) for line in open(tmp_path / "chk" / "samples.jsonl")]
    assert len(rows) == 3 and all(r["score"] in (0.0, 50.0, 100.0) for r in rows)
    assert all({"strict", "flexible"} <= set(r["meta"]) and r["prompt"].endswith("\nAnswer:") for r in rows)
