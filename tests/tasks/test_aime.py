"""AIME 2025 (evaluators/tasks/aime.py): upstream's prompt, grade and reference key, and one end-to-end run
on the embedded model with the offline fixture (tests/data/aime25/test.jsonl: three AIME 2025 I problems,
answers checked by brute force when the fixture was written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluators.tasks.aime import AIMEEvaluator, AIMETaskConfig, solved
from runner.contract.errors import ConfigError
from runner.contract.requests import GenerationRequest
from tests.conftest import ROOT, compose

FIXTURE = ROOT / "tests" / "data" / "aime25" / "test.jsonl"


def evaluator(**kw) -> AIMEEvaluator:
    base = dict(_target_="evaluators.tasks.aime.AIMEEvaluator", name="aime25", metric="exact_match",
                default_num_samples=30, num_samples=30, max_input_len=4096, max_output_len=32768)
    config = AIMETaskConfig(**(base | kw))
    config.dataset.local_path = str(FIXTURE)
    return AIMEEvaluator(config)


def test_prompt_and_generation_are_lm_evals_aime25():
    ev = evaluator()
    samples = ev.samples(30, seed=0)
    assert [s.id for s in samples] == ["aime25/test/2025-I-1", "aime25/test/2025-I-3", "aime25/test/2025-I-4"]
    assert samples[0].prompt == ("Question: Find the sum of all integer bases $b>9$ for which $17_b$ is a divisor "
                                 "of $97_b$.\nAnswer:")
    assert [s.target for s in samples] == ["70", "16", "117"]
    assert ev.requests(samples[0]) == [GenerationRequest(samples[0].prompt, 32768,
                                                         stop=("Question:", "</s>", "<|im_end|>", "<|eot_id|>"))]
    assert ev.extra_acc_spec() is None  # upstream's protocol: the plain key
    assert evaluator(max_output_len=1024).extra_acc_spec() == "max_output_len=1024"
    assert len(ev.samples(2, seed=0)) == 2 and ev.samples(2, seed=0) == ev.samples(2, seed=0)


@pytest.mark.parametrize("response,answer,expected", [
    ("The bases are 21 and 49, so the sum is $\\boxed{70}$.", "70", True),  # the last boxed content
    ("We get $b=21$ or $b=49$; in total $70$", "70", False),  # first to last $: "b=21$ or $b=49$; in total $70"
    ("$70$", "70", True),
    ("So \\boxed{16} ... wait, \\boxed{17}", "16", False),  # the LAST boxed answer counts
    ("\\boxed{016}", "16", False),  # a string comparison after normalisation, as upstream
    ("The answer is 117", "117", False),  # no $ and no box: the whole text is compared
    ("\\boxed{ 117 }", "117", True),  # spaces are dropped by the normalisation
])
def test_the_grade_is_upstreams(response, answer, expected):
    assert solved(response, answer) is expected


def test_a_row_without_an_answer_is_a_data_error(tmp_path):
    bad = tmp_path / "rows.jsonl"
    bad.write_text(json.dumps({"id": "x", "problem": "p"}) + "\n")
    ev = evaluator()
    ev.config.dataset.local_path = str(bad)
    with pytest.raises(Exception, match="needs a problem and an answer"):
        ev.samples(1, seed=0)


def test_no_packaged_copy_says_where_to_get_one():
    ev = evaluator()
    ev.config.dataset.local_path = None
    with pytest.raises(ConfigError, match="local copy of math-ai/aime25"):
        ev.samples(1, seed=0)


@pytest.mark.e2e
def test_runs_end_to_end_on_the_embedded_model_offline(tmp_path):
    from runner.job.flow import run

    out = run(compose(["task=aime25", f"task.dataset.local_path={FIXTURE}", "task.num_samples=1",
                       "task.max_output_len=4", "reference.mode=skip", "tracking=none", "cache=off",
                       f"output_dir={tmp_path}"]))
    assert out.exit_status == 0 and out.spec.extra_acc_spec == "max_output_len=4"
    (row,) = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert row["target"] in ("70", "16", "117") and row["score"] in (0.0, 100.0)
    assert out.score == row["score"] and out.metrics["exact_match"] == row["score"]
