"""GPQA Diamond: letter extraction, seeded option shuffling, data sources, scoring.

GPQA's questions must never appear in plain text outside a run's own artifacts: the tests use an
invented fixture (tests/data/gpqa_fake) for anything that looks at text, and check the packaged
file by counts, ids, letters and hashes only (assertions compare integers, so a failure cannot
print a question).
"""

from __future__ import annotations

import csv
import json
from collections import Counter

import pytest

from evaluators.gpqa import (INSTRUCTION, LETTERS, GPQAEvaluator, Item, build_prompt, extract_flexible,
                             extract_strict, shuffled_options)
from runner.backends.base import GenerationRequest
from runner.errors import ConfigError, DataError
from runner.schema import DatasetConfig, GPQATaskConfig
from tests.conftest import ROOT, compose

FAKE_DIR = ROOT / "tests" / "data" / "gpqa_fake"
FAKE = FAKE_DIR / "gpqa_diamond.csv"


def task(**kw) -> GPQATaskConfig:
    dataset = kw.pop("dataset", DatasetConfig(source="local", local_path=str(FAKE_DIR), hub_config="gpqa_diamond",
                                              split="train"))
    base = dict(_target_="evaluators.gpqa.GPQAEvaluator", name="gpqa_diamond", num_samples=198, max_input_len=4096,
                max_output_len=32768, dataset=dataset)
    return GPQATaskConfig(**(base | kw))


@pytest.mark.parametrize("output,strict,flexible", [
    ("Step 1 ... so the result follows.\nAnswer: B", "B", "B"),
    ("answer: c", "C", "C"),  # upstream's rule ignores case
    ("Answer:\tD", "D", "D"),
    ("The answer is (B).", None, "B"),
    ("Therefore the answer is C", None, "C"),
    ("**Answer:** D", None, "D"),
    ("Final answer: (A)", None, "A"),
    ("The final answer is $\\boxed{C}$.", None, "C"),
    ("Answer: A\nOn reflection, Answer: C", "A", "C"),  # strict: first; flexible: last statement
    ("Answer: Because the field vanishes, (B)", None, "B"),  # "Because" is not the letter B
    ("Options (A) and (C) fail, so (D) it is.", None, "D"),  # no statement: last standalone letter
    ("A cell divides twice. B is right.", None, "B"),
    ("A cell divides twice.", None, None),  # the article "A" is not an answer
    ("A) 4 eV\nB) 2 eV\nC) 1 eV\nD) 0 eV", None, None),  # options copied from the prompt are not answers
    ("Copying: C) 1 eV\nD) 0 eV\nI choose (B)", None, "B"),
    ("Let B = 2x and D = 4, so I pick A.", None, "A"),  # letters before an operator are variables
    ("Final pick:\n(C)", None, "C"),
    ("I cannot tell.", None, None),
    ("", None, None),
])
def test_letter_extraction(output, strict, flexible):
    assert extract_strict(output) == strict
    assert extract_flexible(output) == flexible


def item(i: str = "fake0001") -> Item:
    return Item(i, "Which is heavier?", "Lead", ("Feathers", "Air", "Foam"), "Physics")


def test_shuffle_is_deterministic_per_seed_and_id_and_the_gold_letter_follows():
    options, gold = shuffled_options(item(), seed=0)
    assert sorted(options) == sorted(["Lead", "Feathers", "Air", "Foam"])
    assert options[LETTERS.index(gold)] == "Lead"
    assert shuffled_options(item(), seed=0) == (options, gold)
    orders = {tuple(shuffled_options(item(), seed=s)[0]) for s in range(30)}
    assert len(orders) > 5  # the seed changes the permutation
    ids = {tuple(shuffled_options(item(f"id{k}"), seed=0)[0]) for k in range(30)}
    assert len(ids) > 5  # so does the question id
    golds = Counter(shuffled_options(item(f"id{k}"), seed=0)[1] for k in range(800))
    assert set(golds) == set(LETTERS) and all(150 <= c <= 250 for c in golds.values())  # about 200 each


def test_prompt_lists_the_shuffled_options_after_the_question():
    assert build_prompt("  Which is heavier?\n", ["Air", "Lead", "Foam", "Feathers"]) == (
        INSTRUCTION + "\n\nWhich is heavier?\n\nA) Air\nB) Lead\nC) Foam\nD) Feathers")
    assert "'Answer: X'" in INSTRUCTION


def test_local_directory_with_the_hub_layout():
    ev = GPQAEvaluator(task())
    samples = ev.samples(198, seed=0)
    assert [s.id for s in samples] == [f"fake000{i}" for i in range(1, 7)] and ev.source_used == "local"
    truth = {"fake0001": "Carbon dioxide", "fake0002": "Newton", "fake0003": "Hydrogen", "fake0004": "4",
             "fake0005": "-1", "fake0006": "Covalent"}
    for s in samples:
        lines = s.prompt.split("\n")
        options = {line[0]: line[3:] for line in lines[-4:]}
        assert list(options) == list(LETTERS)
        assert options[s.target] == truth[s.id]  # the gold letter points at the correct answer
    multi = samples[4]
    assert "What is the charge of an electron,\nin units of e?" in multi.prompt  # multi-line cell kept
    assert samples[3].meta == {"domain": "Biology"}
    again = GPQAEvaluator(task()).samples(198, seed=0)
    assert [(s.id, s.prompt, s.target) for s in again] == [(s.id, s.prompt, s.target) for s in samples]


def test_local_file_and_seeded_subset():
    ev = GPQAEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(FAKE), split="train")))
    assert len(ev.samples(198, 0)) == 6
    sub = ev.samples(3, seed=0)
    assert len(sub) == 3 and [s.id for s in ev.samples(3, seed=0)] == [s.id for s in sub]
    assert any([s.id for s in ev.samples(3, seed=k)] != [s.id for s in sub] for k in range(1, 6))


def test_packaged_copy_counts_ids_and_gold_letters():
    from runner.assets import GPQA_DIAMOND, asset_path, sha256_of

    path = asset_path(GPQA_DIAMOND.name)
    assert sha256_of(path) == GPQA_DIAMOND.member_sha256
    ev = GPQAEvaluator(task(dataset=DatasetConfig(source="packaged")))
    samples = ev.samples(198, seed=0)
    assert len(samples) == 198 and len({s.id for s in samples}) == 198 and ev.source_used == "packaged"
    assert all(s.id.startswith("rec") for s in samples)
    assert Counter(s.meta["domain"] for s in samples) == {"Chemistry": 93, "Physics": 86, "Biology": 19}
    with open(path, newline="", encoding="utf-8") as handle:
        correct = {row["Record ID"]: row["Correct Answer"].strip() for row in csv.DictReader(handle)}
    follows = sum(s.prompt.split(f"\n{s.target}) ", 1)[1].startswith(correct[s.id]) for s in samples)
    assert follows == 198
    letters = Counter(s.target for s in samples)
    assert set(letters) == set(LETTERS) and min(letters.values()) >= 30
    other = ev.samples(198, seed=1)
    changed = sum(a.target != b.target for a, b in zip(samples, other))
    assert changed > 100  # another seed reshuffles most questions (3/4 expected)


def test_requests_use_the_configured_output_length():
    ev = GPQAEvaluator(task(max_output_len=512))
    (req,) = ev.requests(ev.samples(1, 0)[0])
    assert isinstance(req, GenerationRequest) and req.greedy and req.max_tokens == 512 and req.stop == ()


@pytest.mark.parametrize("extraction,scores", [("strict", [100.0, 0.0, 0.0]), ("flexible", [100.0, 100.0, 0.0])])
def test_scoring_uses_the_configured_extraction_and_reports_both(extraction, scores):
    ev = GPQAEvaluator(task(extraction=extraction))
    s = ev.samples(198, 0)[0]
    wrong = next(letter for letter in LETTERS if letter != s.target)
    outputs = [f"reasoning\nAnswer: {s.target}", f"So the answer is ({s.target}).", f"Answer: {wrong}"]
    scored = [ev.score(s, [o]) for o in outputs]
    assert [x.score for x in scored] == scores
    agg = ev.aggregate(scored)
    assert agg["exact_match_strict"] == pytest.approx(100 / 3) and agg["exact_match_flexible"] == pytest.approx(200 / 3)
    assert agg["accuracy"] == pytest.approx(sum(scores) / 3) and agg["domain/Biology"] == agg["accuracy"]


def test_extra_acc_spec_names_protocol_deviations():
    assert GPQAEvaluator(task()).extra_acc_spec() is None
    assert GPQAEvaluator(task(max_output_len=512)).extra_acc_spec() == "max_output_len=512"
    assert GPQAEvaluator(task(extraction="flexible", apply_chat_template=True)).extra_acc_spec() == (
        "extraction=flexible,chat_template=true")


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="task.extraction"):
        GPQAEvaluator(task(extraction="vibes"))
    with pytest.raises(ConfigError, match="task.max_output_len"):
        GPQAEvaluator(task(max_output_len=0))


def _write(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerows(rows)


def test_malformed_row_names_row_and_column_but_not_the_text(tmp_path):
    header = ["Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3", "Record ID"]
    bad = tmp_path / "gpqa_diamond.csv"
    _write(bad, [header, ["Secret question one?", "a", "b", "c", "d", "r1"], ["Secret question two?", "", "b", "c", "d", "r2"]])
    with pytest.raises(DataError) as info:
        GPQAEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(bad)))).samples(10, 0)
    text = str(info.value)
    assert "row 1" in text and "'Correct Answer' is empty" in text and str(bad) in text
    assert "Secret question" not in text

    _write(bad, [header, ["q1?", "a", "b", "c", "d", "r1"], ["q2?", "a", "b", "c", "d", "r1"]])
    with pytest.raises(DataError, match="duplicate Record ID"):
        GPQAEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(bad)))).samples(10, 0)

    _write(bad, [["question", "answer"], ["q?", "a"]])
    with pytest.raises(DataError, match="GPQA's columns"):
        GPQAEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(bad)))).samples(10, 0)


def test_unreachable_hub_names_the_alternatives():
    ev = GPQAEvaluator(task(dataset=DatasetConfig(source="hub", hub_id="Idavidrein/gpqa", hub_config="gpqa_diamond",
                                                  split="train")))
    with pytest.raises(DataError) as info:
        ev.samples(10, 0)
    text = str(info.value)
    assert "Idavidrein/gpqa" in text and "source=packaged" in text and "local_path" in text


def test_config_composes_with_upstream_parameters():
    from omegaconf import OmegaConf

    t = OmegaConf.to_object(compose(["task=gpqa_diamond"]).task)
    assert isinstance(t, GPQATaskConfig)
    assert (t.alpha, t.beta, t.sigma, t.num_samples, t.max_input_len, t.max_output_len) == (0.05, 0.2, 50.0, 198, 4096, 32768)
    assert t.extraction == "strict" and t.dataset.hub_id == "Idavidrein/gpqa" and t.dataset.split == "train"
    assert GPQAEvaluator(t).extra_acc_spec() is None
    small = OmegaConf.to_object(compose(["task=gpqa_diamond", "task.max_output_len=256"]).task)
    assert GPQAEvaluator(small).extra_acc_spec() == "max_output_len=256"



@pytest.mark.parametrize("quant,kv,value", [(None, None, 45.96), ("FP8", None, 48.03), ("NVFP4", "FP8", 45.55)])
def test_published_references(quant, kv, value):
    from runner.references import lookup
    from runner.spec import AccuracySpec
    from runner.stats import HypothesisParams

    entry = lookup(ROOT / "references", "gpqa_diamond", "accuracy", "meta-llama/Llama-3.3-70B-Instruct",
                   AccuracySpec(quant_algo=quant, kv_cache_quant_algo=kv), HypothesisParams(0.05, 0.2, 50.0, 198))
    assert entry.value == value and entry.params.num_samples == 198


@pytest.mark.e2e
def test_end_to_end_on_the_packaged_copy_logs_to_mlflow_without_leaking_questions(tmp_path, mlflow_server, monkeypatch, capfd):
    """The embedded model on 2 packaged questions with a short output budget; nothing outside the run's
    artifacts (stdout, stderr, report, MLflow params/metrics/tags) may contain a question."""
    from mlflow.tracking import MlflowClient

    from runner.assets import GPQA_DIAMOND, asset_path
    from runner.job import run

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    outcome = run(compose(["task=gpqa_diamond", "task.num_samples=2", "task.max_output_len=16", "cache=off",
                           "reference.mode=skip", f"tracking.tracking_uri={mlflow_server}",
                           "tracking.experiment=e2e-gpqa", f"output_dir={out}"]))
    assert outcome.exit_status == 0 and outcome.spec.extra_acc_spec == "max_output_len=16"
    mlrun = MlflowClient(tracking_uri=mlflow_server).get_run(outcome.run_id)
    metrics = mlrun.data.metrics
    assert {"accuracy", "exact_match_strict", "exact_match_flexible", "num_evaluated"} <= set(metrics)
    assert metrics["num_evaluated"] == 2 and any(k.startswith("domain/") for k in metrics)
    assert mlrun.data.tags["extra_acc_spec"] == "max_output_len=16"

    with open(asset_path(GPQA_DIAMOND.name), newline="", encoding="utf-8") as handle:
        questions = [row["Question"].strip()[:80] for row in csv.DictReader(handle)]
    needles = questions + [json.dumps(q)[1:-1] for q in questions]  # as written in JSON files too
    captured = capfd.readouterr()
    outside = [captured.out, captured.err, (out / "report.txt").read_text(), (out / "report.json").read_text(),
               repr(mlrun.data.params), repr(mlrun.data.tags), repr(metrics)]
    leaks = sum(q in text for q in needles for text in outside)
    assert leaks == 0  # an integer, so a failure cannot print a question
    prompts = [json.loads(line)["prompt"] for line in open(out / "samples.jsonl")]  # the run's own artifact
    assert sum(q in p for q in questions for p in prompts) == 2
