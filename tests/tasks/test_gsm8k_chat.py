"""GSM8K 5-shot chat multi-turn (upstream's gsm8k_inferencemax / gsm8k_inferencex): the chat turns, the
strict-only scoring on the last ``#### n``, the reference key, upstream's reference entries, the embedded model.

Expected turns are written out by hand from the fixture and upstream's ``doc_to_text``; expected scores
are derived by hand from upstream's task file (``group_select: -1`` on both filters, lm-eval's
``exact_match`` normalisation, ``scores_filter="exact_match,strict-match"``).
"""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from evaluators.tasks.gsm8k import normalize
from evaluators.tasks.gsm8k_chat import GSM8KChatEvaluator, GSM8KChatTaskConfig
from runner.contract.errors import ConfigError
from runner.contract.evaluator import Sample
from runner.contract.task_config import DatasetConfig
from tests.conftest import ROOT, compose

LOCAL = DatasetConfig(source="local", local_path=str(ROOT / "tests" / "data" / "gsm8k_local"), hub_config="main")
INSTRUCTION = "\nEnd your response with the answer on the last line, formatted as: #### [number]\nAnswer:"


def task(**kw) -> GSM8KChatTaskConfig:
    base = dict(_target_="evaluators.tasks.gsm8k_chat.GSM8KChatEvaluator", name="gsm8k_inferencex", num_samples=1319,
                max_input_len=4096, max_output_len=12288, dataset=LOCAL)
    return GSM8KChatTaskConfig(**(base | kw))


def test_examples_are_alternating_user_and_assistant_turns():
    ev = GSM8KChatEvaluator(task())
    first = ev.samples(1, seed=0)[0]
    # the same question and draws as task=gsm8k for seed 0: test row 2, train rows 6, 9, 0, 2, 4
    assert first.id == "test/2" and first.meta["fewshot"] == ["train/6", "train/9", "train/0", "train/2", "train/4"]
    (req,) = ev.requests(first)
    turns = req.messages
    assert [role for role, _ in turns] == ["user", "assistant"] * 5 + ["user"]
    assert turns[0] == ("user", "Question: There are 4 rows of 6 chairs. How many chairs are there?" + INSTRUCTION)
    assert turns[1] == ("assistant", "4 * 6 = <<4*6=24>>24 chairs.\n#### 24")
    assert turns[3] == ("assistant", "1500 * 12 = $<<1500*12=18000>>18,000.\n#### 18,000")
    # the asked question keeps its trailing space, as lm-eval's doc_to_text does
    assert turns[-1] == ("user", "Question: A pie is cut into 8 slices and Sam eats half. How many slices did he eat? "
                         + INSTRUCTION)
    assert req.prompt == turns[-1][1] and req.greedy and req.max_tokens == 12288 and req.stop == ("</s>", "<|im_end|>")
    assert first.prompt.startswith("[user]\nQuestion: There are 4 rows") and first.prompt.count("[assistant]\n") == 5


def test_single_turn_is_lm_evals_collapsed_text_as_one_user_turn():
    ev = GSM8KChatEvaluator(task(fewshot_as_multiturn=False, num_fewshot=1))
    sample = ev.samples(1, seed=0)[0]
    (req,) = ev.requests(sample)
    assert req.messages is None and "messages" not in sample.meta
    assert req.prompt == ("Question: There are 4 rows of 6 chairs. How many chairs are there?" + INSTRUCTION
                          + " 4 * 6 = <<4*6=24>>24 chairs.\n#### 24\n\n"
                          "Question: A pie is cut into 8 slices and Sam eats half. How many slices did he eat? " + INSTRUCTION)


GOLD = normalize("Sam eats 8 / 2 = <<8/2=4>>4 slices.\n#### 4")
# output -> (strict extraction, flexible extraction, score under upstream's strict-only rule)
PROBES = [
    ("#### 4", "4", "4", 100.0),
    ("#### 4\nCheck: 8 / 2 = 4. #### 5", "5", "5", 0.0),  # the LAST "#### n" counts (the plain task takes the first)
    ("#### 5\n#### 4", "4", "4", 100.0),
    ("<think>maybe #### 3</think>\nHalf of 8 is 4.\n#### 4", "4", "4", 100.0),
    ("Half of 8 is 4.", "[invalid]", "4.", 0.0),  # flexible matches, but upstream gates on strict alone
    ("####4", "[invalid]", "4", 0.0),
    ("#### $4", "[invalid]", "$4", 0.0),
    ("#### 4.", "4.", "4.", 100.0),  # one trailing period is ignored
    ("#### 4.0", "4.0", "4.0", 0.0),  # strings, not numbers
]


@pytest.mark.parametrize("output,strict,flexible,value", PROBES)
def test_scoring_probe(output, strict, flexible, value):
    scored = GSM8KChatEvaluator(task()).score(Sample("test/2", "p", GOLD, {"fewshot": []}), [output])
    assert (scored.meta["strict"], scored.meta["flexible"], scored.score) == (strict, flexible, value)


def test_other_score_filters_and_strict_picks():
    sample = Sample("test/2", "p", GOLD, {"fewshot": []})
    assert GSM8KChatEvaluator(task(score_filter="mean")).score(sample, ["Half of 8 is 4."]).score == 50.0
    assert GSM8KChatEvaluator(task(score_filter="flexible")).score(sample, ["Half of 8 is 4."]).score == 100.0
    assert GSM8KChatEvaluator(task(strict_match="first")).score(sample, ["#### 4\n#### 5"]).score == 100.0


def test_aggregate_is_the_strict_rate_with_both_filter_rates_beside_it():
    ev = GSM8KChatEvaluator(task())
    sample = Sample("test/2", "p", GOLD, {"fewshot": []})
    scored = [ev.score(sample, [o]) for o in ("#### 4", "Half of 8 is 4.", "#### 9", "#### 5\n#### 4")]
    assert ev.aggregate(scored) == {"accuracy": 50.0, "exact_match_strict": 50.0, "exact_match_flexible": 75.0}


def test_reference_key_names_what_differs_from_upstreams_chat_protocol():
    assert GSM8KChatEvaluator(task()).extra_acc_spec() is None
    assert GSM8KChatEvaluator(task(dataset=DatasetConfig(source="packaged"))).extra_acc_spec() == "fewshot_split=test"
    assert GSM8KChatEvaluator(task(fewshot_as_multiturn=False)).extra_acc_spec() == "fewshot_as_multiturn=false"
    assert GSM8KChatEvaluator(task(fewshot_as_multiturn=False, apply_chat_template=False)).extra_acc_spec() == \
        "fewshot_as_multiturn=false,chat_template=false"
    spec = GSM8KChatEvaluator(task(question_template="Q: {question}\nA:", strict_match="first", score_filter="mean",
                                   max_output_len=256)).extra_acc_spec().split(",")
    assert spec[0].startswith("question_template=") and spec[1:] == ["strict_match=first", "score_filter=mean",
                                                                     "max_output_len=256"]


@pytest.mark.parametrize("settings,where", [
    (dict(apply_chat_template=False), "task.fewshot_as_multiturn"),
    (dict(question_template="Question only"), "task.question_template"),
    (dict(strict_match="middle"), "task.strict_match"),
    (dict(score_filter="best"), "task.score_filter"),
])
def test_bad_settings_are_config_errors(settings, where):
    with pytest.raises(ConfigError, match=where):
        GSM8KChatEvaluator(task(**settings))


@pytest.mark.parametrize("name", ["gsm8k_inferencex", "gsm8k_inferencemax"])
def test_config_composes_with_upstreams_parameters(name):
    t = OmegaConf.to_object(compose([f"task={name}", "output_dir=/tmp/x"]).task)
    assert isinstance(t, GSM8KChatTaskConfig) and t.name == name
    assert (t.num_samples, t.max_input_len, t.max_output_len, t.num_fewshot, t.sigma) == (1319, 4096, 12288, 5, 50.0)
    assert t.apply_chat_template and t.fewshot_as_multiturn and t.stop == ["</s>", "<|im_end|>"]
    assert (t.strict_match, t.score_filter) == ("last", "strict")


@pytest.mark.parametrize("file,kv,spec_dec,value", [
    ("gsm8k_inferencemax", None, None, 95.46), ("gsm8k_inferencemax", "FP8", None, 95.46),
    ("gsm8k_inferencemax", None, "Eagle3", 95.49), ("gsm8k_inferencex", "FP8", "Eagle3", 97.0),
    ("gsm8k_inferencex", "NVFP4", "Eagle3", 97.0),
])
def test_upstreams_entries_with_their_explicit_floor(file, kv, spec_dec, value):
    from runner.contract.spec import AccuracySpec
    from runner.references.store import lookup
    from runner.stats.data.hypothesis import HypothesisParams

    entry = lookup(ROOT / "references", file, "accuracy", "nvidia/MiniMax-M3-NVFP4",
                   AccuracySpec(quant_algo="MIXED_PRECISION", kv_cache_quant_algo=kv, spec_dec_algo=spec_dec),
                   HypothesisParams(0.05, 0.2, 50.0, 1319))
    assert (entry.value, entry.threshold, entry.params.num_samples) == (value, 94.0, 1319)
    assert (entry.note or "").startswith("published vLLM B200 FP4") == (file == "gsm8k_inferencemax")


@pytest.mark.e2e
def test_runs_end_to_end_on_the_embedded_model(tmp_path, monkeypatch):
    """One packaged question, five examples as chat turns through SmolLM2's template, a few tokens."""
    from runner.job.flow import run

    monkeypatch.chdir(tmp_path)
    outcome = run(compose(["task=gsm8k_inferencex", "task.num_samples=1", "task.max_output_len=6", "cache=off",
                           "reference.mode=skip", "tracking=none", f"output_dir={tmp_path / 'out'}"]))
    assert outcome.exit_status in (0, 4) and outcome.spec.extra_acc_spec == "fewshot_split=test,max_output_len=6"
    (row,) = [json.loads(line) for line in (outcome.output_dir / "samples.jsonl").read_text().splitlines()]
    assert row["prompt"].count("[assistant]\n") == 5 and row["score"] in (0.0, 100.0)
    assert {"strict", "flexible", "strict_match", "fewshot"} <= set(row["meta"])
