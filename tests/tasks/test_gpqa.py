"""GPQA Diamond: upstream's option order and subset, prompt template sources, letter extraction,
data sources, scoring, reference key.

The golden option orders below were derived from upstream's own code path: TensorRT-LLM's task
files (``gpqa/cot_zeroshot_aa``) run under lm-eval 0.4.8 and 0.4.10 with TensorRT-LLM's
``random.seed(0)`` and ``Dataset.shuffle(0)``, on the invented fixture rows. A second test
recomputes them for several seeds by calling ``random`` and ``datasets`` the way upstream does.

GPQA's questions must never appear in plain text outside a run's own artifacts: the tests use an
invented fixture (tests/data/gpqa_fake) for anything that looks at text, and check the packaged
file by counts, ids, letters and hashes only (assertions compare integers, so a failure cannot
print a question).
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
from collections import Counter

import pytest

from evaluators.tasks import gpqa
from evaluators.tasks.gpqa import (LETTERS, GPQAEvaluator, Item, extract_flexible, extract_strict, render,
                             upstream_questions)
from runner.contract.requests import GenerationRequest
from runner.contract.errors import ConfigError, DataError
from runner.contract.task_config import DatasetConfig
from evaluators.tasks.gpqa import GPQATaskConfig
from tests.conftest import ROOT, compose

FAKE_DIR = ROOT / "tests" / "data" / "gpqa_fake"
FAKE = FAKE_DIR / "gpqa_diamond.csv"
LOCAL = DatasetConfig(source="local", local_path=str(FAKE_DIR), hub_config="gpqa_diamond", split="train")
# The project's own wording, in upstream's layout (instruction, question, options, one per line).
OWN_INSTRUCTION = ("Answer this multiple-choice question. Think it through step by step, then finish with a "
                   "final line of the form 'Answer: X', where X is A, B, C or D.")
# A stand-in for TensorRT-LLM's task file with an invented instruction (upstream's prose stays out
# of this repository); everything else is what its _gpqa_cot_zeroshot_aa_yaml declares.
FAKE_TRTLLM_YAML = """dataset_path: Idavidrein/gpqa
output_type: generate_until
process_docs: !function utils.process_docs
training_split: train
validation_split: train
test_split: null
doc_to_text: "INVENTED INSTRUCTION.\\n{{Question}}\\nA) {{choice1}}\\nB) {{choice2}}\\nC) {{choice3}}\\nD) {{choice4}}"
doc_to_target: answer
filter_list:
  - name: "strict-match"
    filter:
      - function: "regex"
        regex_pattern: '(?i)Answer[ \\t]*:[ \\t]*([A-D])'
        group_select: 0
      - function: "take_first"
generation_kwargs:
  until:
    - "</s>"
  do_sample: false
  temperature: 0.0
num_fewshot: 0
"""


def task(**kw) -> GPQATaskConfig:
    base = dict(_target_="evaluators.tasks.gpqa.GPQAEvaluator", name="gpqa_diamond", num_samples=198, max_input_len=4096,
                max_output_len=32768, dataset=LOCAL, prompt_source="runner")
    return GPQATaskConfig(**(base | kw))


def fake_trtllm_file(tmp_path, text: str = FAKE_TRTLLM_YAML):
    folder = tmp_path / "tensorrt_llm" / gpqa.TRTLLM_TASK_FILE.parent
    folder.mkdir(parents=True)
    (folder / gpqa.TRTLLM_TASK_FILE.name).write_text(text)
    return folder / gpqa.TRTLLM_TASK_FILE.name


# ---------------------------------------------------------------------- extraction
@pytest.mark.parametrize("output,strict", [
    ("Step 1 ... so the result follows.\nAnswer: B", "B"),
    ("answer: c", "C"),  # (?i): any case, the letter too
    ("Answer:\tD", "D"),
    ("ANSWER : b", "B"),  # spaces before the colon
    ("The answer is (B).", None),  # no colon
    ("**Answer:** D", None),  # "**" between the colon and the letter
    ("Final answer: (A)", None),  # a bracket before the letter
    ("Answer: $C$", None),  # lm-eval's pattern has no \$? (simple-evals' has)
    ("Answer:\nB", None),  # [ \t]* does not cross a line break
    ("Answer: A\nOn reflection, Answer: C", "A"),  # the first match
    ("Answer: Because the field vanishes, (B)", "B"),  # quirk: a letter starting a word counts
    ("Answer: Delta", "D"),  # quirk, likewise
    ("Answer: E is impossible, so Answer: C", "C"),  # the first place the regex matches
    ("Reanswer: d", "D"),  # no word boundary before "Answer"
    ("I cannot tell.", None),
    ("", None),
])
def test_strict_extraction_is_upstreams_first_regex_match(output, strict):
    assert extract_strict(output) == strict


@pytest.mark.parametrize("output,flexible", [
    ("Step 1 ... so the result follows.\nAnswer: B", "B"),
    ("answer: c", "C"),
    ("ANSWER : b", "B"),
    ("The answer is (B).", "B"),
    ("Therefore the answer is C", "C"),
    ("**Answer:** D", "D"),
    ("Final answer: (A)", "A"),
    ("The final answer is $\\boxed{C}$.", "C"),
    ("Answer: $C$", "C"),  # no statement: the last standalone letter
    ("Answer:\nB", "B"),
    ("Answer: A\nOn reflection, Answer: C", "C"),  # the last statement
    ("Answer: Because the field vanishes, (B)", "B"),  # "Because" is not the letter B here
    ("Answer: Delta", None),
    ("Options (A) and (C) fail, so (D) it is.", "D"),
    ("A cell divides twice. B is right.", "B"),
    ("A cell divides twice.", None),  # the article "A" is not an answer
    ("A) 4 eV\nB) 2 eV\nC) 1 eV\nD) 0 eV", None),  # options copied from the prompt are not answers
    ("Copying: C) 1 eV\nD) 0 eV\nI choose (B)", "B"),
    ("Let B = 2x and D = 4, so I pick A.", "A"),  # letters before an operator are variables
    ("Final pick:\n(C)", "C"),
    ("I cannot tell.", None),
    ("", None),
])
def test_flexible_extraction(output, flexible):
    assert extract_flexible(output) == flexible


# ---------------------------------------------------------------------- upstream's order
# Seed 0 on the fixture, from lm-eval 0.4.8/0.4.10 running TensorRT-LLM's task: (id, gold, options A-D).
GOLDEN_SEED0 = [
    ("fake0003", "D", ("Lithium", "Helium", "Carbon", "Hydrogen")),
    ("fake0005", "B", ("+1", "-1", "0", "+2")),
    ("fake0004", "B", ("2", "4", "6", "3")),
    ("fake0007", "D", ("Venus", "Earth", "Mars", "Mercury")),
    ("fake0006", "B", ("Metallic", "Covalent", "Hydrogen", "Ionic")),
    ("fake0001", "A", ("Carbon dioxide", "Nitrogen", "Helium", "Oxygen")),
    ("fake0002", "A", ("Newton", "Watt", "Pascal", "Joule")),
    ("fake0008", "A", ("100", "212", "100", "0")),  # the distractor "100 " equals the answer once stripped
]
GOLDEN_SEED5_FIRST3 = [
    ("fake0002", "B", ("Joule", "Newton", "Pascal", "Watt")),
    ("fake0005", "A", ("-1", "+2", "+1", "0")),
    ("fake0003", "C", ("Lithium", "Carbon", "Hydrogen", "Helium")),
]


def options_of(prompt: str) -> tuple[str, ...]:
    return tuple(line[3:] for line in prompt.split("\n")[-4:])


def test_golden_order_options_and_gold_letters_for_seed_0():
    samples = GPQAEvaluator(task()).samples(198, seed=0)
    assert [(s.id, s.target, options_of(s.prompt)) for s in samples] == GOLDEN_SEED0


def test_golden_subset_is_the_head_of_the_shuffled_order_for_seed_5():
    samples = GPQAEvaluator(task()).samples(3, seed=5)
    assert [(s.id, s.target, options_of(s.prompt)) for s in samples] == GOLDEN_SEED5_FIRST3


def test_golden_prompt_with_the_projects_wording():
    samples = {s.id: s for s in GPQAEvaluator(task()).samples(198, seed=0)}
    assert samples["fake0002"].prompt == (
        OWN_INSTRUCTION + "\nWhat is the SI unit of force?\nA) Newton\nB) Watt\nC) Pascal\nD) Joule")
    # the question exactly as in the file (outer spaces and its trailing line break), options stripped
    assert samples["fake0007"].prompt == (
        OWN_INSTRUCTION + "\n  Which planet is closest to the Sun? \n\nA) Venus\nB) Earth\nC) Mars\nD) Mercury")
    assert "What is the charge of an electron,\nin units of e?\nA) +1" in samples["fake0005"].prompt


def _reimplementation(rows: list[dict], seed: int) -> list[tuple[str, str, tuple[str, ...]]]:
    """TensorRT-LLM's flow in a few lines: random.seed, process_docs over the split in file order,
    Dataset.shuffle(seed), process_docs again over the shuffled split (the one evaluated)."""
    import datasets

    def process(doc):
        choices = [doc[c].strip() for c in ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3",
                                            "Correct Answer")]
        random.shuffle(choices)
        return {"choices": choices, "answer": chr(65 + choices.index(doc["Correct Answer"].strip()))}

    state = random.getstate()
    try:
        random.seed(seed)
        table = datasets.Dataset.from_list(rows)
        table.map(process)
        evaluated = table.shuffle(seed=seed).map(process)
    finally:
        random.setstate(state)
    return [(d["Record ID"], d["answer"], tuple(d["choices"])) for d in evaluated]


@pytest.mark.parametrize("seed", [0, 1, 2, 7, 1234])
def test_order_matches_a_reimplementation_of_upstreams_calls(seed):
    with open(FAKE, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    samples = GPQAEvaluator(task()).samples(198, seed=seed)
    assert [(s.id, s.target, options_of(s.prompt)) for s in samples] == _reimplementation(rows, seed)


def test_duplicate_option_text_makes_the_first_slot_gold():
    ev = GPQAEvaluator(task())
    s = next(x for x in ev.samples(198, 0) if x.id == "fake0008")
    assert options_of(s.prompt) == ("100", "212", "100", "0") and s.target == "A"
    assert ev.score(s, ["Answer: A"]).score == 100.0
    assert ev.score(s, ["Answer: C"]).score == 0.0  # same text, later slot: upstream scores it wrong


def test_upstream_questions_draws_two_passes_from_one_generator():
    items = [Item(f"q{i}", "?", "right", ("w1", "w2", "w3"), "x") for i in range(5)]
    rng = random.Random(3)
    for _ in items:
        rng.shuffle(["w1", "w2", "w3", "right"])  # the first pass, in file order
    import numpy as np

    expected = []
    for row in np.random.default_rng(3).permutation(5):
        choices = ["w1", "w2", "w3", "right"]
        rng.shuffle(choices)
        expected.append((int(row), tuple(choices), "ABCD"[choices.index("right")]))
    assert [(q.row, q.options, q.gold) for q in upstream_questions(items, 3)] == expected


def test_render_fills_each_field_once():
    assert render("{{Question}}|{{ choice1 }}|{{choice2}}|{{choice3}}|{{choice4}}", "Q {{choice1}}",
                  ["a", "b", "c", "d"]) == "Q {{choice1}}|a|b|c|d"


# ---------------------------------------------------------------------- prompt sources
def test_trtllm_task_file_gives_upstreams_template_and_the_plain_key(tmp_path):
    path = fake_trtllm_file(tmp_path)
    for given in (path, path.parent, tmp_path):  # the file, its folder, a checkout
        ev = GPQAEvaluator(task(prompt_source="trtllm", trtllm_task_file=str(given)))
        assert ev.template.source == "trtllm" and ev.extra_acc_spec() is None
        first = ev.samples(1, 0)[0]
        assert first.prompt == "INVENTED INSTRUCTION.\nWhich element has atomic number 1?\n" \
                               "A) Lithium\nB) Helium\nC) Carbon\nD) Hydrogen"


def test_auto_reads_the_installed_tensorrt_llm_else_uses_the_projects_wording(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(gpqa, "installed_task_file", lambda: fake_trtllm_file(tmp_path))
    ev = GPQAEvaluator(task(prompt_source="auto"))
    assert ev.template.source == "trtllm" and ev.extra_acc_spec() is None
    monkeypatch.setattr(gpqa, "installed_task_file", lambda: None)
    ev = GPQAEvaluator(task(prompt_source="auto"))
    assert ev.template.source == "runner" and ev.extra_acc_spec() == "prompt=runner"
    assert "prompt=runner" in caplog.text
    with pytest.raises(ConfigError, match="task.prompt_source=trtllm needs"):
        GPQAEvaluator(task(prompt_source="trtllm"))


def test_installed_task_file_is_looked_up_without_importing_tensorrt_llm(tmp_path, monkeypatch):
    fake_trtllm_file(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "tensorrt_llm" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    assert gpqa.installed_task_file() == tmp_path / "tensorrt_llm" / gpqa.TRTLLM_TASK_FILE


@pytest.mark.parametrize("change,message", [
    (("'(?i)Answer[ \\t]*:[ \\t]*([A-D])'", "'(?i)Answer\\s*:\\s*([A-D])'"), "scores or stops differently"),
    (('    - "</s>"', '    - "<|im_end|>"'), "scores or stops differently"),
    (("D) {{choice4}}", "D) {{choice4}}{% if x %}{% endif %}"), "not the one this runner reproduces"),
    (("D) {{choice4}}", "D) {{choice5}}"), "not the one this runner reproduces"),
])
def test_a_task_file_with_another_protocol_is_refused(tmp_path, change, message):
    path = fake_trtllm_file(tmp_path, FAKE_TRTLLM_YAML.replace(*change))
    with pytest.raises(ConfigError, match=message):
        GPQAEvaluator(task(prompt_source="auto", trtllm_task_file=str(path)))


def test_missing_task_file_path_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="task.trtllm_task_file"):
        GPQAEvaluator(task(prompt_source="trtllm", trtllm_task_file=str(tmp_path / "nowhere")))


# ---------------------------------------------------------------------- data, requests, scoring
def test_local_file_and_directory_give_the_same_samples():
    by_dir = GPQAEvaluator(task())
    by_file = GPQAEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(FAKE), split="train")))
    a, b = by_dir.samples(198, 0), by_file.samples(198, 0)
    assert [(s.id, s.prompt, s.target) for s in a] == [(s.id, s.prompt, s.target) for s in b]
    assert by_dir.source_used == "local" and len(a) == 8
    assert {s.id: s.meta for s in a}["fake0004"] == {"domain": "Biology"}
    truth = {"fake0001": "Carbon dioxide", "fake0002": "Newton", "fake0003": "Hydrogen", "fake0004": "4",
             "fake0005": "-1", "fake0006": "Covalent", "fake0007": "Mercury", "fake0008": "100"}
    assert all(options_of(s.prompt)[LETTERS.index(s.target)] == truth[s.id] for s in a)


def test_packaged_copy_golden_gold_letters_and_order():
    """Seed 0: the order and gold letters upstream's code path gives on this file (lm-eval 0.4.8)."""
    from runner.files.assets import GPQA_DIAMOND, asset_path, sha256_of

    path = asset_path(GPQA_DIAMOND.name)
    assert sha256_of(path) == GPQA_DIAMOND.member_sha256
    ev = GPQAEvaluator(task(dataset=DatasetConfig(source="packaged")))
    samples = ev.samples(198, seed=0)
    assert ev.source_used == "packaged" and ev.extra_acc_spec() == "prompt=runner,dataset=packaged"
    ids = [s.id for s in samples]
    assert ids[:3] == ["recf6ayQmL1SxKbvW", "recb4cGsC6BJUCU3V", "recnjViFrqlZNL3fY"] and ids[-1] == "recaXdGn3FAIkxLGM"
    assert hashlib.sha256(",".join(ids).encode()).hexdigest() == (
        "e9b19ecaa82618e6b43d2691c144814fa329636d94650ee922f7b2f2d270d3bf")
    assert "".join(s.target for s in samples) == (
        "CBABCDCDDCCDDDABBDDCCBADACABCBADBACCBBAADBCADBCDDDDDADABBCBBDDDCBCDDCBACBABADDBCBBBCCADBCBBBBBCDADCCCDCDBD"
        "BDACBBACABAAADBCCABACBBBBBDBDBCCAAABACCBCBDADDBDBBACBDADDCDBBDCAAADCCBDABBBCCBDADACABBADABAA")
    assert Counter(s.meta["domain"] for s in samples) == {"Chemistry": 93, "Physics": 86, "Biology": 19}
    with open(path, newline="", encoding="utf-8") as handle:
        correct = {row["Record ID"]: row["Correct Answer"].strip() for row in csv.DictReader(handle)}
    # options can span lines here, so look for the gold label followed by the correct answer
    assert sum(f"\n{s.target}) {correct[s.id]}" in s.prompt for s in samples) == 198


def test_requests_are_greedy_stop_at_eos_and_use_the_output_budget():
    ev = GPQAEvaluator(task(max_output_len=512))
    (req,) = ev.requests(ev.samples(1, 0)[0])
    assert isinstance(req, GenerationRequest) and req.greedy and req.max_tokens == 512 and req.stop == ("</s>",)
    assert req.truncation == "left"  # TensorRT-LLM's truncate_prompt_tokens keeps the prompt's end


@pytest.mark.parametrize("extraction,scores", [("strict", [100.0, 0.0, 0.0, 100.0]),
                                               ("flexible", [100.0, 100.0, 0.0, 0.0])])
def test_scoring_uses_the_configured_extraction_and_reports_both(extraction, scores):
    ev = GPQAEvaluator(task(extraction=extraction))
    s = next(x for x in ev.samples(198, 0) if x.id == "fake0004")  # gold B, Biology
    outputs = ["reasoning\nAnswer: B", "So the answer is (B).", "Answer: C", "Answer: Because it pumps, (A)"]
    scored = [ev.score(s, [o]) for o in outputs]
    assert [x.score for x in scored] == scores
    assert [x.meta["strict"] for x in scored] == ["B", None, "C", "B"]
    agg = ev.aggregate(scored)
    assert agg["exact_match_strict"] == pytest.approx(50.0) and agg["exact_match_flexible"] == pytest.approx(50.0)
    assert agg["accuracy"] == pytest.approx(sum(scores) / 4) and agg["domain/Biology"] == agg["accuracy"]


def test_extra_acc_spec_names_protocol_deviations():
    assert GPQAEvaluator(task()).extra_acc_spec() == "prompt=runner"
    assert GPQAEvaluator(task(max_output_len=512)).extra_acc_spec() == "prompt=runner,max_output_len=512"
    assert GPQAEvaluator(task(extraction="flexible", apply_chat_template=False)).extra_acc_spec() == (
        "prompt=runner,extraction=flexible,chat_template=false")
    stop = GPQAEvaluator(task(stop=[])).extra_acc_spec()
    assert stop.startswith("prompt=runner,stop=") and len(stop) == len("prompt=runner,stop=") + 8
    assert GPQAEvaluator(task(dataset=DatasetConfig(source="auto"))).extra_acc_spec() == "prompt=runner,dataset=packaged"


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="task.extraction"):
        GPQAEvaluator(task(extraction="vibes"))
    with pytest.raises(ConfigError, match="task.max_output_len"):
        GPQAEvaluator(task(max_output_len=0))
    with pytest.raises(ConfigError, match="task.prompt_source"):
        GPQAEvaluator(task(prompt_source="mine"))
    with pytest.raises(ConfigError, match="seed"):
        GPQAEvaluator(task()).samples(3, seed=-1)


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


def test_config_composes_with_upstream_parameters(monkeypatch):
    from omegaconf import OmegaConf

    monkeypatch.setattr(gpqa, "installed_task_file", lambda: None)
    t = OmegaConf.to_object(compose(["task=gpqa_diamond"]).task)
    assert isinstance(t, GPQATaskConfig)
    assert (t.alpha, t.beta, t.sigma, t.num_samples, t.max_input_len, t.max_output_len) == (0.05, 0.2, 50.0, 198, 4096, 32768)
    assert t.apply_chat_template and t.stop == ["</s>"] and t.system_prompt is None
    assert t.extraction == "strict" and t.prompt_source == "auto" and t.trtllm_task_file is None
    assert t.dataset.hub_id == "Idavidrein/gpqa" and t.dataset.split == "train"
    assert GPQAEvaluator(t).extra_acc_spec() == "prompt=runner,dataset=packaged"
    hub = OmegaConf.to_object(compose(["task=gpqa_diamond", "task.dataset.source=hub"]).task)
    assert GPQAEvaluator(hub).extra_acc_spec() == "prompt=runner"
    small = OmegaConf.to_object(compose(["task=gpqa_diamond", "task.max_output_len=256"]).task)
    assert GPQAEvaluator(small).extra_acc_spec() == "prompt=runner,dataset=packaged,max_output_len=256"


@pytest.mark.parametrize("quant,kv,value", [(None, None, 45.96), ("FP8", None, 48.03), ("NVFP4", "FP8", 45.55)])
def test_published_references(quant, kv, value):
    from runner.references.store import lookup
    from runner.contract.spec import AccuracySpec
    from runner.stats.data.hypothesis import HypothesisParams

    entry = lookup(ROOT / "references", "gpqa_diamond", "accuracy", "meta-llama/Llama-3.3-70B-Instruct",
                   AccuracySpec(quant_algo=quant, kv_cache_quant_algo=kv), HypothesisParams(0.05, 0.2, 50.0, 198))
    assert entry.value == value and entry.params.num_samples == 198


@pytest.mark.e2e
def test_end_to_end_on_the_packaged_copy_logs_to_mlflow_without_leaking_questions(tmp_path, mlflow_server, monkeypatch, capfd):
    """The embedded model on 2 packaged questions with a short output budget; nothing outside the run's
    artifacts (stdout, stderr, report, MLflow params/metrics/tags) may contain a question."""
    from mlflow.tracking import MlflowClient

    from runner.files.assets import GPQA_DIAMOND, asset_path
    from runner.job.flow import run

    monkeypatch.setattr(gpqa, "installed_task_file", lambda: None)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    outcome = run(compose(["task=gpqa_diamond", "task.num_samples=2", "task.max_output_len=16", "cache=off",
                           "reference.mode=skip", f"tracking.tracking_uri={mlflow_server}",
                           "tracking.experiment=e2e-gpqa", f"output_dir={out}"]))
    key = "prompt=runner,dataset=packaged,max_output_len=16"
    assert outcome.exit_status in (0, 4) and outcome.spec.extra_acc_spec == key
    mlrun = MlflowClient(tracking_uri=mlflow_server).get_run(outcome.run_id)
    metrics = mlrun.data.metrics
    assert {"accuracy", "exact_match_strict", "exact_match_flexible", "num_evaluated"} <= set(metrics)
    assert metrics["num_evaluated"] == 2 and not any(k.startswith("domain/") for k in metrics)
    table = json.loads(open(MlflowClient(tracking_uri=mlflow_server).download_artifacts(
        outcome.run_id, "breakdown.json")).read())  # per-domain accuracies: one table, not columns
    assert {row[0] for row in table["data"]} == {"domain"}
    assert mlrun.data.tags["extra_acc_spec"] == key

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


def test_an_answer_without_a_letter_is_unparsed_by_the_configured_extraction():
    """The truncation-aware verdict's ``unparsed`` indicator: strict needs "Answer: X", flexible any stated letter."""
    s = GPQAEvaluator(task()).samples(1, 0)[0]
    strict, flexible = GPQAEvaluator(task()), GPQAEvaluator(task(extraction="flexible"))
    for ev in (strict, flexible):
        assert ev.answer_unparsed(ev.score(s, ["Answer: B"])) is False
        assert ev.answer_unparsed(ev.score(s, ["I am not sure, it depends on"])) is True
    assert strict.answer_unparsed(strict.score(s, ["The answer is (B)."])) is True
    assert flexible.answer_unparsed(flexible.score(s, ["The answer is (B)."])) is False
