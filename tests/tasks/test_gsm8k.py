"""GSM8K: upstream's requests (question order, few-shot draws, prompt bytes), lm-eval's scoring, data sources.

Expected ids and draws are computed here the way upstream calls its generators (TensorRT-LLM's
``Dataset.shuffle(seed)`` = ``numpy.random.default_rng(seed).permutation``; lm-eval's sampler =
``random.Random(seed).sample`` once per evaluated question), expected prompts and scores are
written out by hand, and where lm-eval is installed its own task runs as an oracle.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest

from runner.contract.evaluator import Sample
from evaluators.tasks.gsm8k import (FLEXIBLE_PATTERN, GSM8KEvaluator, IGNORED, STRICT_PATTERN, extract_flexible,
                              extract_strict, normalize)
from runner.contract.requests import GenerationRequest
from runner.contract.errors import ConfigError, DataError
from runner.contract.task_config import DatasetConfig
from evaluators.tasks.gsm8k import GSM8KTaskConfig
from tests.conftest import ROOT, compose

LOCAL = ROOT / "tests" / "data" / "gsm8k_local"  # main/test.jsonl (8 rows), main/train.jsonl (10 rows)
LOCAL_SOURCE = DatasetConfig(source="local", local_path=str(LOCAL), hub_config="main")


def task(**kw) -> GSM8KTaskConfig:
    dataset = kw.pop("dataset", LOCAL_SOURCE)
    base = dict(_target_="evaluators.tasks.gsm8k.GSM8KEvaluator", name="gsm8k", num_samples=1319, max_input_len=4096,
                max_output_len=256, dataset=dataset)
    return GSM8KTaskConfig(**(base | kw))


def rows(split: str) -> list[dict]:
    return [json.loads(line) for line in (LOCAL / "main" / f"{split}.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------------------- question subset and order
def test_questions_are_the_first_n_of_numpy_default_rng_permutation():
    ev = GSM8KEvaluator(task())
    full = ev.samples(1319, seed=0)
    expected = [int(i) for i in np.random.default_rng(0).permutation(8)]
    assert expected == [2, 4, 3, 6, 5, 0, 1, 7]
    assert [s.id for s in full] == [f"test/{i}" for i in expected]
    assert [s.id for s in ev.samples(3, seed=0)] == ["test/2", "test/4", "test/3"]
    assert [s.id for s in ev.samples(3, seed=5)] == [f"test/{i}" for i in np.random.default_rng(5).permutation(8)[:3]]


def test_fewshot_draws_are_lm_eval_sampler_calls_in_evaluation_order():
    samples = GSM8KEvaluator(task()).samples(1319, seed=0)
    rnd = random.Random(0)  # lm-eval: set_fewshot_seed(random_seed) -> sampler.rnd
    train = list(range(10))
    expected = [rnd.sample(train, 5) for _ in samples]  # one draw per evaluated question, nothing removed
    assert expected[:4] == [[6, 9, 0, 2, 4], [7, 6, 4, 3, 2], [9, 3, 2, 7, 1], [1, 4, 2, 7, 0]]
    assert [s.meta["fewshot"] for s in samples] == [[f"train/{i}" for i in e] for e in expected]
    # a subset is a prefix of the full run: the k-th prompt never depends on n
    assert [s.prompt for s in GSM8KEvaluator(task()).samples(3, seed=0)] == [s.prompt for s in samples[:3]]


def test_first_prompt_is_byte_identical_to_lm_eval():
    first = GSM8KEvaluator(task()).samples(1, seed=0)[0]
    assert first.id == "test/2"
    # train rows 6, 9, 0, 2, 4, then test row 2 (whose question ends in a space: texts are never stripped)
    assert first.prompt == (
        "Question: There are 4 rows of 6 chairs. How many chairs are there?\n"
        "Answer: 4 * 6 = <<4*6=24>>24 chairs.\n#### 24\n\n"
        "Question: Sara saves $1,500 a month. How much does she save in a year?\n"
        "Answer: 1500 * 12 = $<<1500*12=18000>>18,000.\n#### 18,000\n\n"
        "Question: Tom has 3 apples and buys 4 more. How many apples does he have?\n"
        "Answer: Tom has 3 + 4 = <<3+4=7>>7 apples.\n#### 7\n\n"
        "Question: Mia had $20 and spent $8. How much money is left?\n"
        "Answer: She has 20 - 8 = $<<20-8=12>>12 left.\n#### 12\n\n"
        "Question: Lily reads 15 pages a day. How many pages does she read in a week?\n"
        "Answer: 15 * 7 = <<15*7=105>>105 pages.\n#### 105\n\n"
        "Question: A pie is cut into 8 slices and Sam eats half. How many slices did he eat? \n"
        "Answer:"
    )
    assert first.target == "4"
    assert GSM8KEvaluator(task(num_fewshot=0)).samples(1, seed=0)[0].prompt == (
        "Question: A pie is cut into 8 slices and Sam eats half. How many slices did he eat? \nAnswer:")


def test_examples_from_the_evaluated_split_draw_one_more_and_drop_the_question():
    ev = GSM8KEvaluator(task(fewshot_split="test"))
    samples = ev.samples(1319, seed=0)
    rnd = random.Random(0)
    expected = []
    for s in samples:
        row = int(s.id.split("/")[1])
        expected.append([i for i in rnd.sample(list(range(8)), 6) if i != row][:5])
    assert [s.meta["fewshot"] for s in samples] == [[f"test/{i}" for i in e] for e in expected]
    assert all(s.id not in s.meta["fewshot"] and len(s.meta["fewshot"]) == 5 for s in samples)
    assert ev.extra_acc_spec() == "fewshot_split=test"


def test_a_drawn_example_equal_to_the_question_is_dropped(tmp_path):
    (tmp_path / "main").mkdir()
    test = rows("test")
    train = rows("train")
    train[6] = test[2]  # the first draw for test row 2 is train [6, 9, 0, 2, 4]
    for split, data in (("test", test), ("train", train)):
        (tmp_path / "main" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    ev = GSM8KEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(tmp_path), hub_config="main")))
    first, second = ev.samples(2, seed=0)
    assert first.meta["fewshot"] == ["train/9", "train/0", "train/2", "train/4"]  # lm-eval 0.4.8: 4 examples left
    assert second.meta["fewshot"] == ["train/7", "train/6", "train/4", "train/3", "train/2"]  # the stream goes on


# ---------------------------------------------------------------------------- lm-eval as an oracle
# One canned output per test row, covering the scoring quirks; the expected (strict, flexible)
# matches are derived by hand from lm-eval's rules.
CANNED = {
    0: ("1200 - 200 = 1,000\n#### 1,000", True, True),  # gold "#### 1,000": commas removed on both sides
    1: ("It is -5 degrees.\n####-5", False, True),  # no space after ####
    2: ("8 / 2 = 4.00\n#### 4.00", False, False),  # string comparison: 4.00 != 4
    3: ("#### $10", False, True),  # strict allows no $, flexible does and "$" is ignored
    4: ("There are 20 students. Wait...", False, False),  # flexible's last match is "..."
    5: ("#### 30\nCheck: 40 * 3 / 4 = 30.", True, True),  # one trailing period is ignored
    6: ("#### 1,5", True, True),  # commas vanish anywhere: 1,5 == 15
    7: ("#### 255\n#### 300", True, False),  # strict takes the first match, flexible the last
}


def test_prompts_order_stop_strings_and_scores_match_lm_eval_run_as_tensorrt_llm_runs_it():
    """lm-eval's own gsm8k task on the fixture, adjusted as TensorRT-LLM's LmEvalEvaluator does
    (``set_fewshot_seed(seed)``, every split shuffled with ``seed``), answers CANNED. The task is built from its
    installed YAML; the task manager indexes lm-eval's gsm8k folder only (the whole index, thousands of task
    files, cost about 7 s of CPU and is not read for a task given as a config)."""
    lm_eval = pytest.importorskip("lm_eval")
    import yaml
    from lm_eval.api.model import LM
    from lm_eval.tasks import TaskManager, get_task_dict

    upstream_dir = Path(lm_eval.__file__).parent / "tasks" / "gsm8k"
    config = yaml.safe_load((upstream_dir / "gsm8k.yaml").read_text())
    config.pop("tag", None)
    config.update(dataset_path="json", dataset_name=None, dataset_kwargs={"data_files": {
        "test": str(LOCAL / "main" / "test.jsonl"), "train": str(LOCAL / "main" / "train.jsonl")}})
    with pytest.warns(DeprecationWarning):
        task_dict = get_task_dict([config], task_manager=TaskManager(include_path=str(upstream_dir),
                                                                      include_defaults=False))
    for upstream_task in task_dict.values():
        upstream_task.set_fewshot_seed(seed=0)
        for split in list(upstream_task.dataset.keys()):
            upstream_task.dataset[split] = upstream_task.dataset[split].shuffle(0)
    test_rows = {r["question"]: i for i, r in enumerate(rows("test"))}
    seen = []

    class Canned(LM):
        def loglikelihood(self, requests):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

        def generate_until(self, requests):
            outputs = []
            for r in requests:
                prompt, gen_kwargs = r.args
                row = test_rows[r.doc["question"]]
                seen.append((f"test/{row}", prompt, dict(gen_kwargs)))
                outputs.append(CANNED[row][0])
            return outputs

    result = lm_eval.evaluate(lm=Canned(), task_dict=task_dict, limit=None, log_samples=True)

    ev = GSM8KEvaluator(task())
    ours = ev.samples(1319, seed=0)
    assert [(s.id, s.prompt) for s in ours] == [(sid, prompt) for sid, prompt, _ in seen]
    assert all(kw["until"] == list(GSM8KTaskConfig().stop) and kw["do_sample"] is False and kw["temperature"] == 0.0
               and "max_gen_toks" not in kw for _, _, kw in seen)
    scored = [ev.score(s, [CANNED[int(s.id.split("/")[1])][0]]) for s in ours]
    for s in scored:
        _, strict, flexible = CANNED[int(s.sample_id.split("/")[1])]
        assert (s.meta["strict_match"], s.meta["flexible_match"]) == (strict, flexible), s.sample_id
    upstream = {(r["doc"]["question"], r["filter"]): bool(r["exact_match"]) for r in result["samples"]["gsm8k"]}
    by_row = {i: q for q, i in test_rows.items()}
    for s in scored:
        question = by_row[int(s.sample_id.split("/")[1])]
        assert upstream[(question, "strict-match")] == s.meta["strict_match"]
        assert upstream[(question, "flexible-extract")] == s.meta["flexible_match"]
    metrics = result["results"]["gsm8k"]
    # TensorRT-LLM: both exact-match rates x 100, averaged
    trtllm_score = (metrics["exact_match,strict-match"] + metrics["exact_match,flexible-extract"]) * 100 / 2
    assert ev.aggregate(scored)["accuracy"] == pytest.approx(trtllm_score)
    assert trtllm_score == pytest.approx((4 / 8 * 100 + 5 / 8 * 100) / 2)  # strict rows 0 5 6 7, flexible 0 1 3 5 6


def test_format_strings_equal_the_installed_lm_eval_task():
    lm_eval = pytest.importorskip("lm_eval")
    import yaml

    config = yaml.safe_load((Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / "gsm8k.yaml").read_text())
    assert config["doc_to_text"] == "Question: {{question}}\nAnswer:" and config["doc_to_target"] == "{{answer}}"
    assert config["fewshot_split"] == "train" and config["num_fewshot"] == 5
    assert "target_delimiter" not in config and "fewshot_delimiter" not in config  # defaults " " and "\n\n"
    assert config["generation_kwargs"]["until"] == list(GSM8KTaskConfig().stop)
    strict, flexible = config["filter_list"]
    assert strict["filter"][0]["regex_pattern"] == STRICT_PATTERN.pattern and "group_select" not in strict["filter"][0]
    assert flexible["filter"][0]["regex_pattern"] == FLEXIBLE_PATTERN.pattern and flexible["filter"][0]["group_select"] == -1
    (metric,) = config["metric_list"]
    assert metric["regexes_to_ignore"] == [p.pattern for p in IGNORED]
    assert metric["ignore_case"] is True and metric["ignore_punctuation"] is False


# ---------------------------------------------------------------------------- scoring probes
GOLD_18 = "She sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs and makes 9 * 2 = $<<9*2=18>>18.\n#### 18"
# output -> (strict-match filter output, flexible-extract filter output, strict hit, flexible hit)
PROBES = [
    ("#### 18", "18", "18", True, True),
    ("####18", "[invalid]", "18", False, True),  # strict needs "#### " with the space
    ("#### 18.00", "18.00", "18.00", False, False),  # strings, not numbers
    ("#### $18", "[invalid]", "$18", False, True),  # strict's class has no "$"
    ("$18...", "[invalid]", "$18...", False, False),  # only one trailing period is ignored
    ("18.0", "[invalid]", "18.0", False, False),
    ("She makes $18.", "[invalid]", "$18.", False, True),
    ("#### 18.", "18.", "18.", True, True),
    ("#### 1,8", "1,8", "1,8", True, True),  # commas are ignored anywhere
    ("#### 18\nThen 2 more make 20.", "18", "20.", True, False),
    ("#### -18", "-18", "-18", False, False),
    ("9 * 2 = 18 dollars, then 5 more", "[invalid]", "5", False, False),  # a lone digit is group 2
    ("", "[invalid]", "[invalid]", False, False),
    ("#### 18\n#### 20", "18", "20", True, False),  # strict: first match, flexible: last
    ("The answer is 18. Hmm...", "[invalid]", "...", False, False),  # flexible ends on the dots
    ("#### 18, so 18", "18,", "18", True, True),
    ("#### 18 dollars", "18", "18", True, True),
    ("#### 018", "018", "018", False, False),
    ("-$18", "[invalid]", "-$18", False, False),  # "$" goes, "-" stays
    ("16-3-4=9 and 9*2=18", "[invalid]", "18", False, True),
]


@pytest.mark.parametrize("output,strict,flexible,strict_ok,flexible_ok", PROBES)
def test_scoring_probe(output, strict, flexible, strict_ok, flexible_ok):
    assert normalize(GOLD_18) == "18"
    assert (extract_strict(output), extract_flexible(output)) == (strict, flexible)
    scored = GSM8KEvaluator(task()).score(Sample("test/0", "Question: ...\nAnswer:", normalize(GOLD_18)), [output])
    assert (scored.meta["strict_match"], scored.meta["flexible_match"]) == (strict_ok, flexible_ok)
    assert scored.score == 50.0 * strict_ok + 50.0 * flexible_ok


def test_scoring_probes_agree_with_lm_eval_filters_and_metric():
    pytest.importorskip("lm_eval")
    from lm_eval.api.metrics import exact_match_hf_evaluate
    from lm_eval.filters.extraction import RegexFilter

    strict_filter = RegexFilter(regex_pattern=r"#### (\-?[0-9\.\,]+)")
    flexible_filter = RegexFilter(regex_pattern=r"(-?[$0-9.,]{2,})|(-?[0-9]+)", group_select=-1)
    for output, strict, flexible, strict_ok, flexible_ok in PROBES:
        for flt, want, hit in ((strict_filter, strict, strict_ok), (flexible_filter, flexible, flexible_ok)):
            (filtered,) = flt.apply([[output]], [{}])
            assert filtered[0] == want, output
            em = exact_match_hf_evaluate([filtered[0]], [GOLD_18], regexes_to_ignore=[",", "\\$", "(?s).*#### ", "\\.$"],
                                         ignore_case=True, ignore_punctuation=False)["exact_match"]
            assert bool(em) == hit, output


def test_gold_with_thousands_commas():
    assert normalize("1200 - 200 = 1000\n#### 1,000") == "1000"
    assert normalize("x\n#### -5") == "-5"
    assert [normalize(extract_flexible(o)) for o in ("It is 1,000.", "It is 1000", "1.000")] == ["1000", "1000", "1.000"]


def test_aggregate_is_the_mean_of_both_exact_match_rates():
    ev = GSM8KEvaluator(task(num_fewshot=0))
    s = next(x for x in ev.samples(1319, 0) if x.id == "test/0")  # gold 1,000
    both = ev.score(s, ["1200 - 200 = 1,000 chickens.\n#### 1,000"])
    strict_only = ev.score(s, ["#### 1000\n\nso roughly 999 are left"])
    flexible_only = ev.score(s, ["There are $1,000."])
    none = ev.score(s, ["#### 12"])
    assert [x.score for x in (both, strict_only, flexible_only, none)] == [100.0, 50.0, 50.0, 0.0]
    assert flexible_only.meta["strict"] == "[invalid]" and flexible_only.meta["flexible"] == "$1,000."
    agg = ev.aggregate([both, strict_only, flexible_only, none])
    assert agg == {"accuracy": 50.0, "exact_match_strict": 50.0, "exact_match_flexible": 50.0}
    agg3 = ev.aggregate([both, strict_only, none])
    assert agg3["exact_match_strict"] == pytest.approx(200 / 3) and agg3["exact_match_flexible"] == pytest.approx(100 / 3)
    assert agg3["accuracy"] == pytest.approx(50.0)


# ---------------------------------------------------------------------------- requests, key, config
def test_requests_are_greedy_256_tokens_with_lm_eval_stop_strings():
    ev = GSM8KEvaluator(task())
    (req,) = ev.requests(ev.samples(1, 0)[0])
    assert isinstance(req, GenerationRequest) and req.greedy and req.max_tokens == 256
    assert req.stop == ("Question:", "</s>", "<|im_end|>") and req.messages is None


def test_extra_acc_spec_names_protocol_deviations():
    assert GSM8KEvaluator(task()).extra_acc_spec() is None
    spec = GSM8KEvaluator(task(num_fewshot=8, max_output_len=128, apply_chat_template=True, system_prompt="Be brief.")).extra_acc_spec()
    parts = spec.split(",")
    assert parts[:3] == ["num_fewshot=8", "max_output_len=128", "chat_template=true"]
    assert parts[3].startswith("system_prompt=") and len(parts[3]) == len("system_prompt=") + 8
    assert GSM8KEvaluator(task(stop=["\n\n"])).extra_acc_spec().startswith("stop=")
    assert GSM8KEvaluator(task(dataset=DatasetConfig(source="packaged"))).extra_acc_spec() == "fewshot_split=test"
    single = DatasetConfig(source="local", local_path=str(LOCAL / "main" / "test.jsonl"))
    assert GSM8KEvaluator(task(dataset=single)).extra_acc_spec() == "fewshot_split=test"
    assert GSM8KEvaluator(task(num_fewshot=0, dataset=single)).extra_acc_spec() == "num_fewshot=0"
    assert GSM8KEvaluator(task(dataset=DatasetConfig(source="hub", hub_id="openai/gsm8k", hub_config="main"))).extra_acc_spec() is None
    assert GSM8KEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(LOCAL), hub_config="main",
                                                     split="train"))).extra_acc_spec() == "split=train"


def test_single_file_source_draws_examples_from_that_file():
    single = DatasetConfig(source="local", local_path=str(LOCAL / "main" / "test.jsonl"))
    samples = GSM8KEvaluator(task(dataset=single)).samples(1319, seed=0)
    assert len(samples) == 8 and all(f.startswith("test/") for s in samples for f in s.meta["fewshot"])
    with pytest.raises(DataError, match="no 'train' split"):
        GSM8KEvaluator(task(dataset=single, fewshot_split="train")).samples(8, 0)


def test_packaged_copy_is_the_original_test_split_and_evaluates_all_1319(tmp_path):
    ev = GSM8KEvaluator(task(dataset=DatasetConfig(source="packaged")))
    full = ev.samples(1319, seed=0)
    assert len(full) == 1319 and ev.source_used == "packaged"
    assert [s.id for s in full[:5]] == [f"test/{i}" for i in np.random.default_rng(0).permutation(1319)[:5]]
    assert all(len(s.meta["fewshot"]) == 5 and s.id not in s.meta["fewshot"] for s in full)
    janet = next(s for s in full if s.id == "test/0")
    assert janet.prompt.endswith("How much in dollars does she make every day at the farmers' market?\nAnswer:")
    assert janet.target == "18"
    # Same rows, same order as openai/grade-school-math's release test.jsonl (the source of the Hub's
    # openai/gsm8k 'main' test split): sha256 over the rows as canonical JSON lines.
    from runner.files.assets import GSM8K_TEST, asset_path

    lines = asset_path(GSM8K_TEST.name).read_text(encoding="utf-8").splitlines()
    canonical = "".join(json.dumps(json.loads(line), ensure_ascii=False, sort_keys=True) + "\n" for line in lines)
    assert hashlib.sha256(canonical.encode()).hexdigest() == PACKAGED_TEST_DIGEST


# sha256 of openai/grade-school-math@b0bb162 grade_school_math/data/test.jsonl, rows re-serialized with
# json.dumps(row, ensure_ascii=False, sort_keys=True), one per line.
PACKAGED_TEST_DIGEST = "51b901a6559b123df91167acbe3ed6d6d5d404ee6fa0773a4da19fd9d44c767a"


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="task.num_fewshot"):
        GSM8KEvaluator(task(num_fewshot=-1))
    with pytest.raises(ConfigError, match="task.dataset.source"):
        GSM8KEvaluator(task(dataset=DatasetConfig(source="ftp")))
    with pytest.raises(ConfigError, match="task.fewshot_split"):
        GSM8KEvaluator(task(fewshot_split="validation"))
    with pytest.raises(ConfigError, match="no train split"):
        GSM8KEvaluator(task(fewshot_split="train", dataset=DatasetConfig(source="packaged")))


def test_too_few_rows_for_the_examples(tmp_path):
    small = tmp_path / "test.jsonl"
    small.write_text("".join(json.dumps(r) + "\n" for r in rows("test")[:5]))
    with pytest.raises(DataError, match="at least 6"):
        GSM8KEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(small)))).samples(5, 0)


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
    assert t.fewshot_split == "auto" and t.stop == ["Question:", "</s>", "<|im_end|>"]
    assert GSM8KEvaluator(t).extra_acc_spec() == "fewshot_split=test"  # the default source is the packaged copy
    hub = OmegaConf.to_object(compose(["task=gsm8k", "task.dataset.source=hub"]).task)
    assert GSM8KEvaluator(hub).extra_acc_spec() is None


@pytest.mark.parametrize("model,quant,kv,value", [
    ("meta-llama/Llama-3.1-8B-Instruct", None, None, 74.20), ("meta-llama/Llama-3.1-8B-Instruct", "FP8", None, 74.30),
    ("meta-llama/Llama-3.1-8B-Instruct", "FP8", "FP8", 72.85), ("meta-llama/Llama-3.1-8B-Instruct", "FP8", "NVFP4", 69.75),
    ("mistralai/Ministral-8B-Instruct-2410", None, None, 79.25), ("mistralai/Ministral-8B-Instruct-2410", "FP8", "FP8", 78.35),
])
def test_published_references(model, quant, kv, value):
    from runner.references.store import lookup
    from runner.contract.spec import AccuracySpec
    from runner.stats.data.hypothesis import HypothesisParams

    entry = lookup(ROOT / "references", "gsm8k", "accuracy", model, AccuracySpec(quant_algo=quant, kv_cache_quant_algo=kv),
                   HypothesisParams(0.05, 0.2, 50.0, 1319))
    assert entry.value == value and entry.params.num_samples == 1319


@pytest.mark.e2e
def test_end_to_end_record_then_check_logs_both_parts_to_mlflow(tmp_path, mlflow_server, monkeypatch,
                                                                two_layer_checkpoint):
    """2 packaged problems: record a reference, check against it, read MLflow back. On the embedded model's first 2
    layers (``model.path``): the test is about the record, the check and what is logged, which any model exercises,
    at a fraction of the embedded model's 8-shot generation time."""
    from mlflow.tracking import MlflowClient

    from runner.job.flow import run

    monkeypatch.chdir(tmp_path)
    refs = tmp_path / "refs"
    common = ["task=gsm8k", f"model.path={two_layer_checkpoint}", "task.num_samples=2", "task.max_output_len=48", "cache=off", f"reference.dir={refs}",
              f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=e2e-gsm8k"]
    recorded = run(compose([*common, "reference.mode=record", f"output_dir={tmp_path / 'rec'}"]))
    assert recorded.exit_status == 0 and recorded.spec.extra_acc_spec == "fewshot_split=test,max_output_len=48"
    assert "extra_acc_spec: fewshot_split=test,max_output_len=48" in (refs / "gsm8k.yaml").read_text()
    checked = run(compose([*common, f"output_dir={tmp_path / 'chk'}"]))
    assert checked.exit_status in (0, 4) and checked.score == recorded.score
    assert checked.decision is not None and checked.decision.rule == "paired" and checked.decision.passed

    metrics = MlflowClient(tracking_uri=mlflow_server).get_run(checked.run_id).data.metrics
    for key in ("accuracy", "exact_match_strict", "exact_match_flexible", "score", "unpaired_threshold", "num_evaluated"):
        assert key in metrics, key
    assert metrics["num_evaluated"] == 2
    assert metrics["accuracy"] == pytest.approx((metrics["exact_match_strict"] + metrics["exact_match_flexible"]) / 2)
    rows_out = [json.loads(line) for line in open(tmp_path / "chk" / "samples.jsonl")]
    assert len(rows_out) == 2 and all(r["score"] in (0.0, 50.0, 100.0) for r in rows_out)
    assert all({"strict", "flexible", "fewshot"} <= set(r["meta"]) and r["prompt"].endswith("\nAnswer:") for r in rows_out)


def test_an_answer_without_a_number_is_unparsed():
    """The truncation-aware verdict's ``unparsed`` indicator: the flexible extraction fell back to [invalid]."""
    from omegaconf import OmegaConf

    from evaluators.tasks.gsm8k import GSM8KEvaluator
    from runner.contract.evaluator import Sample

    ev = GSM8KEvaluator(OmegaConf.to_object(compose(["task=gsm8k"]).task))
    sample = Sample("test/0", "Question: 2+2?\nAnswer:", "4")
    assert ev.answer_unparsed(ev.score(sample, ["2 + 2 = 4. #### 4"])) is False
    assert ev.answer_unparsed(ev.score(sample, ["First we add the"])) is True
