"""LongBench v2 as TensorRT-LLM's evaluator runs it: filters and order, the prompt, the answer extraction,
the breakdowns, the reference key, upstream's reference entries and the embedded model on the fixture.

The fixture (tests/data/longbench_v2/train.jsonl, five tiny items written for this project in the
dataset's layout) keeps contexts to a sentence so the embedded model can answer. Expected prompts and
letters are written out by hand from upstream's template and its extraction rules.
"""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from evaluators.tasks.longbench_v2 import (LongBenchV2Evaluator, LongBenchV2TaskConfig, extract_answer,
                                           post_process)
from runner.contract.errors import ConfigError, DataError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.task_config import DatasetConfig
from tests.conftest import ROOT, compose

FIXTURE = ROOT / "tests" / "data" / "longbench_v2"


def task(**kw) -> LongBenchV2TaskConfig:
    dataset = kw.pop("dataset", DatasetConfig(source="local", local_path=str(FIXTURE), split="train"))
    base = dict(_target_="evaluators.tasks.longbench_v2.LongBenchV2Evaluator", name="longbench_v2", num_samples=215,
                max_input_len=96000, max_output_len=32000, dataset=dataset)
    return LongBenchV2TaskConfig(**(base | kw))


def ids(**kw) -> list[str]:
    return [s.id for s in LongBenchV2Evaluator(task(**kw)).samples(215, seed=0)]


def test_rows_are_filtered_in_source_order_without_a_shuffle():
    assert ids() == ["lb-001", "lb-002", "lb-005"]  # upstream's default: the medium items
    assert ids(length=None) == ["lb-001", "lb-002", "lb-003", "lb-004", "lb-005"]
    assert ids(length=None, difficulty="hard") == ["lb-002", "lb-004", "lb-005"]
    assert ids(domain="Single-Document QA") == ["lb-001", "lb-005"]
    assert ids(start_idx=1) == ["lb-002", "lb-005"]
    ev = LongBenchV2Evaluator(task())
    assert [s.id for s in ev.samples(2, seed=0)] == [s.id for s in ev.samples(2, seed=7)] == ["lb-001", "lb-002"]
    assert ev.samples(1, 0)[0].meta == {"domain": "Single-Document QA", "difficulty": "easy", "length": "medium", "row": 0}


def test_prompt_is_upstreams_template_with_stripped_fields():
    sample = LongBenchV2Evaluator(task()).samples(2, 0)[1]
    assert sample.target == "C"
    assert sample.prompt == (
        "Please read the following text and answer the question below.\n\n<text>\n"
        "Report 1: Oak opened its bridge in May.\nReport 2: Ash opened its bridge in March.\n</text>\n\n"
        "What is the correct answer to this question: Which town opened the bridge first?\nChoices:\n"
        "(A) Elm\n(B) Oak\n(C) Ash\n(D) Pine\n\n"
        'Format your response as follows: "The correct answer is (insert answer here)".')


def test_placeholders_are_replaced_in_upstreams_order():
    """The context goes in first, so a "$Q$" written in the context becomes the question too (upstream's prompts)."""
    baker = LongBenchV2Evaluator(task()).samples(3, 0)[2]
    assert "<text>\nThe baker keeps the key; she wrote Who keeps the key? on its tag as a joke.\n</text>" in baker.prompt


def test_no_context_prompt():
    sample = LongBenchV2Evaluator(task(no_context=True)).samples(1, 0)[0]
    assert sample.prompt == (
        "What is the correct answer to this question: What colour is the boat?\nChoices:\n"
        "(A) Red\n(B) Blue\n(C) Green\n(D) Yellow\n\n"
        'What is the single, most likely answer choice? Format your response as follows: "The correct answer is '
        '(insert answer here)".')


@pytest.mark.parametrize("output,letter", [
    ("The correct answer is (B)", "B"),
    ("**The correct answer is (C)**", "C"),  # asterisks are removed first
    ("The correct answer is D.", "D"),
    ("(A) looks right, but The correct answer is (B)", "B"),  # the phrase wins over an earlier letter
    ("Answer: C", "C"),  # a standalone letter
    ("A bridge was built", "A"),  # ... even the article "A"
    ("<think>The correct answer is (A)</think>\nThe correct answer is (D)", "D"),  # only what follows the reasoning
    ("<think>The correct answer is (A)</think>", None),
    ("the correct answer is (b)", None),  # case matters
    ("The correct answer is (E). Or B", "B"),
    ("Absolutely certain", None),
])
def test_answer_extraction(output, letter):
    assert extract_answer(post_process(output)) == letter


def test_score_and_upstreams_breakdowns():
    ev = LongBenchV2Evaluator(task(length=None))
    samples = ev.samples(215, 0)
    outputs = ["The correct answer is (B)", "The correct answer is (A)", "C", "The correct answer is (C)", "nothing"]
    scored = [ev.score(s, [o]) for s, o in zip(samples, outputs)]
    assert [s.score for s in scored] == [100.0, 0.0, 100.0, 100.0, 0.0]
    assert [s.meta["extracted"] for s in scored] == ["B", "A", "C", "C", None]
    assert ev.aggregate(scored) == {
        "accuracy": 60.0, "Code Repository Understanding_accuracy": 100.0, "Multi-Document QA_accuracy": 0.0,
        "Single-Document QA_accuracy": pytest.approx(200 / 3), "easy_accuracy": 100.0, "hard_accuracy": pytest.approx(100 / 3),
        "long_accuracy": 100.0, "medium_accuracy": pytest.approx(100 / 3), "short_accuracy": 100.0}
    assert isinstance(scored[0], ScoredSample) and scored[0].target == "B"


def test_requests_are_one_chat_turn_without_stop_strings():
    ev = LongBenchV2Evaluator(task())
    (req,) = ev.requests(Sample("lb-001", "prompt text", "B", {}))
    assert (req.prompt, req.max_tokens, req.stop, req.messages, req.greedy) == ("prompt text", 32000, (), None, True)


def test_reference_key_names_what_differs_from_upstream():
    assert LongBenchV2Evaluator(task()).extra_acc_spec() is None
    spec = LongBenchV2Evaluator(task(length=None, difficulty="hard", start_idx=1, no_context=True, max_output_len=8,
                                     apply_chat_template=False)).extra_acc_spec()
    assert spec == "length=all,difficulty=hard,start_idx=1,no_context=true,max_output_len=8,chat_template=false"
    assert LongBenchV2Evaluator(task(domain="Single-Document QA")).extra_acc_spec().startswith("domain=")


@pytest.mark.parametrize("settings,where", [
    (dict(length="huge"), "task.length"), (dict(difficulty="medium"), "task.difficulty"),
    (dict(start_idx=-1), "task.start_idx"), (dict(max_output_len=0), "task.max_output_len"),
    (dict(dataset=DatasetConfig(source="packaged", split="train")), "task.dataset.source"),
])
def test_bad_settings_are_config_errors(settings, where):
    with pytest.raises(ConfigError, match=where):
        LongBenchV2Evaluator(task(**settings)).samples(1, 0)


def test_bad_data_is_reported_with_its_row(tmp_path):
    rows = [json.loads(line) for line in (FIXTURE / "train.jsonl").read_text().splitlines()]
    bad = tmp_path / "train.jsonl"
    bad.write_text("".join(json.dumps(r | ({"answer": "E"} if i == 1 else {})) + "\n" for i, r in enumerate(rows)))
    with pytest.raises(DataError, match="row 1"):
        LongBenchV2Evaluator(task(dataset=DatasetConfig(source="local", local_path=str(bad), split="train"))).samples(5, 0)
    with pytest.raises(DataError, match="no rows match"):
        LongBenchV2Evaluator(task(start_idx=3)).samples(5, 0)
    bad.write_text(json.dumps({"_id": "x", "question": "q"}) + "\n")
    with pytest.raises(DataError, match="LongBench v2's columns"):
        LongBenchV2Evaluator(task(dataset=DatasetConfig(source="local", local_path=str(bad), split="train"))).samples(1, 0)


def test_template_opening_matches_the_wording_lm_eval_ships():
    """lm-eval's own longbench2 task (installed with the test extras) opens with the same words and layout."""
    lm_eval = pytest.importorskip("lm_eval")
    import yaml
    from pathlib import Path

    config = yaml.safe_load((Path(lm_eval.__file__).parent / "tasks" / "longbench2" / "_longbench_common_yaml").read_text())
    ours = LongBenchV2Evaluator(task()).samples(1, 0)[0].prompt
    theirs = (config["doc_to_text"].replace("{{context}}", "Mara painted her small boat blue before the summer fair.")
              .replace("{{question.strip()}}", "What colour is the boat?"))
    for i, choice in enumerate(("Red", "Blue", "Green", "Yellow")):
        theirs = theirs.replace(f"{{{{choices[{i}]}}}}", choice)
    assert ours.split("\n\nFormat your response")[0] == theirs.removesuffix("\n\nAnswer:")


def test_config_composes_with_upstreams_parameters():
    t = OmegaConf.to_object(compose(["task=longbench_v2", "output_dir=/tmp/x"]).task)
    assert isinstance(t, LongBenchV2TaskConfig)
    assert (t.num_samples, t.max_input_len, t.max_output_len, t.sigma, t.length, t.apply_chat_template) == (
        215, 96000, 32000, 50.0, "medium", True)
    assert t.dataset.split == "train" and t.dataset.hub_id == "zai-org/LongBench-v2"


@pytest.mark.parametrize("model,spec,value,sigma", [
    ("DeepSeek-R1-0528", dict(quant_algo="FP8_BLOCK_SCALES", kv_cache_quant_algo="FP8", spec_dec_algo="MTP"), 52.093, 50.0),
    ("DeepSeek-R1-0528", dict(quant_algo="NVFP4", kv_cache_quant_algo="FP8", spec_dec_algo="MTP"), 52.093, 50.0),
    ("meta-llama/Llama-3.1-8B-Instruct", {}, 26.0, 25.8),
])
def test_upstreams_entries(model, spec, value, sigma):
    from runner.contract.spec import AccuracySpec
    from runner.references.store import lookup
    from runner.stats.data.hypothesis import HypothesisParams

    entry = lookup(ROOT / "references", "longbench_v2", "accuracy", model, AccuracySpec(**spec),
                   HypothesisParams(0.05, 0.2, 50.0, 215))
    assert (entry.value, entry.params.sigma, entry.params.num_samples, entry.threshold) == (value, sigma, 215, None)


@pytest.mark.e2e
def test_runs_end_to_end_on_the_embedded_model(tmp_path, monkeypatch):
    from runner.job.flow import run

    monkeypatch.chdir(tmp_path)
    outcome = run(compose(["task=longbench_v2", f"task.dataset.local_path={FIXTURE}", "task.num_samples=2",
                           "task.max_input_len=2048", "task.max_output_len=8", "cache=off", "reference.mode=skip", "tracking=none",
                           f"output_dir={tmp_path / 'out'}"]))
    assert outcome.exit_status in (0, 4) and outcome.spec.extra_acc_spec == "max_input_len=2048,max_output_len=8"
    rows = [json.loads(line) for line in (outcome.output_dir / "samples.jsonl").read_text().splitlines()]
    assert [r["sample_id"] for r in rows] == ["lb-001", "lb-002"] and all(r["score"] in (0.0, 100.0) for r in rows)
    assert all(r["meta"]["extracted"] in (None, "A", "B", "C", "D") for r in rows)


def test_an_answer_without_a_choice_is_unparsed():
    """The truncation-aware verdict's ``unparsed`` indicator: upstream's extraction found no letter."""
    ev = LongBenchV2Evaluator(task())
    sample = ev.samples(1, 0)[0]
    assert ev.answer_unparsed(ev.score(sample, ["The correct answer is (C)"])) is False
    assert ev.answer_unparsed(ev.score(sample, ["Let me read the passage first and"])) is True
