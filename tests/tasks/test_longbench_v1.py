"""task=longbench_v1: upstream's settings, lm-eval's installed LongBench over a local copy (tests/helpers/longbench_v1.py,
THUDM's row layout, our own short texts), upstream's average of the subgroups with golden values worked out by hand from
the installed metrics' rules, upstream's reference key and entries, ``runner.plan`` finding them, and the embedded model
end to end."""

from __future__ import annotations

import json
import re

import pytest
from omegaconf import OmegaConf

from runner.contract.errors import ConfigError, DataError
from tests.conftest import ROOT, compose, needs
from tests.helpers.longbench_v1 import write_copy

# the [longbench] extra (also in this project's [test] extra): lm-eval and what its LongBench metrics import
pytestmark = needs("lm_eval", "jieba", "rapidfuzz", "rouge", reason='pip install -e ".[longbench]"')


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    return write_copy(tmp_path_factory.mktemp("longbench"))


def synthetic(copy, out, *extra):
    return compose(["task=longbench_v1", "task.lm_eval_task=longbench_synthetic", f"task.local_dir={copy}",
                    "tracking=none", "reference.mode=skip", "cache=off", f"output_dir={out}", *extra])


def test_config_composes_with_upstreams_settings():
    from evaluators.tasks.longbench_v1 import LongBenchV1TaskConfig

    t = OmegaConf.to_object(compose(["task=longbench_v1", "output_dir=/tmp/x"]).task)
    assert isinstance(t, LongBenchV1TaskConfig)
    assert (t.lm_eval_task, t.metric, t.scale, t.average, t.apply_chat_template, t.num_fewshot, t.local_dir) == (
        "longbench", "score", 100.0, "categories", True, None, None)
    assert (t.alpha, t.beta, t.sigma, t.num_samples, t.max_input_len, t.max_output_len, t.max_batch_size) == (
        0.05, 0.2, 50.0, 4750, 128000, 1024, 256)


def test_group_tree_and_upstreams_weights():
    from evaluators.tasks.longbench_v1.local import definitions, leaves, shares

    defs = definitions()
    assert sorted(defs.groups["longbench"]) == ["longbench_code", "longbench_fewshot", "longbench_multi",
                                                 "longbench_single", "longbench_summarization", "longbench_synthetic"]
    assert len(leaves(defs, "longbench")) == 21 and leaves(defs, "longbench_qasper") == ["longbench_qasper"]
    share = dict(shares(defs, "longbench"))
    # six subgroups of 4, 4, 4, 4, 3 and 2 subtasks: 1/6 each, split equally inside a subgroup
    assert share["longbench_qasper"] == pytest.approx(1 / 24) and share["longbench_lcc"] == pytest.approx(1 / 12)
    assert share["longbench_passage_count"] == pytest.approx(1 / 18) and sum(share.values()) == pytest.approx(1.0)


def test_local_task_files_include_the_installed_definitions(tmp_path):
    from evaluators.tasks.longbench_v1.local import installed_dir, write_local_tasks

    copy = write_copy(tmp_path / "copy", only=("qasper", "narrativeqa"))
    tasks = write_local_tasks(str(copy), "longbench_qasper", tmp_path / "tasks")
    spec = OmegaConf.to_container(OmegaConf.load(tasks / "longbench_qasper.yaml"))
    assert spec["include"] == str(installed_dir() / "qasper.yaml") and spec["dataset_path"] == "json"
    row = json.loads((tasks / "qasper.jsonl").read_text().splitlines()[0])  # THUDM's `input` is the prompts' question
    assert row["question"] == row["input"] == "What is the cat called?"
    with pytest.raises(DataError, match="lacks files") as err:
        write_local_tasks(str(copy), "longbench_single", tmp_path / "other")
    assert "multifieldqa_en.jsonl, multifieldqa_zh.jsonl" in str(err.value)
    with pytest.raises(ConfigError, match="no group or subtask"):
        write_local_tasks(str(copy), "longbench_nothing", tmp_path / "other")


def test_bad_settings_are_config_errors(copy, tmp_path):
    from runner.contract.build import build
    from runner.job.flow import typed

    config = typed(synthetic(copy, tmp_path, f"task.include_path={tmp_path}"))
    with pytest.raises(ConfigError, match="not both"):
        build(config.task, "task")
    with pytest.raises(ConfigError, match="unknown average") as err:
        build(typed(synthetic(copy, tmp_path, "task.average=median")).task, "task")
    assert err.value.where == "task.average" and "categories, documents" in err.value.allowed


def test_upstreams_average_and_per_document_values(copy, tmp_path):
    """Every answer is "Paragraph 2". passage_count (answers 2, 5, 7): lm-eval's count score is the share of the
    numbers in the answer equal to the truth: 1, 0, 0; passage_retrieval_en (Paragraph 2): 1; _zh (段落3): 0.
    Upstream: the subtasks' means 1/3, 1, 0 averaged unweighted = 4/9. Weights: 1/3 of the group each, over
    3, 1 and 1 of the 5 documents: 5/9, 5/3, 5/3."""
    from runner.job.flow import run

    fake = ("backend=fake", "backend.default_answer=Paragraph 2", "task.max_input_len=2048")
    out = run(synthetic(copy, tmp_path / "out", *fake))
    rows = {r["sample_id"]: r for r in map(json.loads, open(tmp_path / "out" / "samples.jsonl"))}
    counts = [rows[f"longbench_passage_count/{i}"] for i in range(3)]
    assert [r["meta"]["lm_eval"]["count_score"] for r in counts] == [1.0, 0.0, 0.0]
    assert rows["longbench_passage_retrieval_en/0"]["meta"]["lm_eval"] == {"score": 1.0, "retrieval_score": 1.0}
    assert rows["longbench_passage_retrieval_zh/0"]["meta"]["lm_eval"]["retrieval_zh_score"] == 0.0
    assert [r["meta"]["weight"] for r in counts] == pytest.approx([5 / 9] * 3)
    assert rows["longbench_passage_retrieval_en/0"]["score"] == pytest.approx(100 * 5 / 3)
    assert out.metrics["score"] == pytest.approx(400 / 9) and out.metrics["score_documents"] == pytest.approx(40.0)
    assert out.metrics["lm_eval/longbench_synthetic/score"] == pytest.approx(4 / 9)
    assert out.metrics["lm_eval/longbench_passage_count/score"] == pytest.approx(1 / 3)
    assert "lm_eval/longbench/score" not in out.metrics  # only the groups of the run
    assert out.spec.extra_acc_spec == "target_sparsity=0.0,lm_eval_task=longbench_synthetic,max_input_len=2048"
    documents = run(synthetic(copy, tmp_path / "docs", *fake, "task.average=documents"))
    assert documents.metrics["score"] == pytest.approx(40.0)
    assert documents.spec.extra_acc_spec == ("target_sparsity=0.0,lm_eval_task=longbench_synthetic,average=documents,"
                                             "max_input_len=2048")


def test_reference_key_is_upstreams_then_deviations(copy, tmp_path):
    from types import SimpleNamespace

    from evaluators.deviations import short_hash
    from runner.contract.build import build
    from runner.job.flow import typed

    ev = build(typed(synthetic(copy, tmp_path)).task, "task")
    options = {"sparse_attention_config": {"algorithm": "skip_softmax", "target_sparsity": 0.9}}
    ev.bind_backend(SimpleNamespace(details={"extra_llm_api_options": json.dumps(options)}))
    assert ev.extra_acc_spec() == "target_sparsity=0.9,lm_eval_task=longbench_synthetic"
    c = ev.config
    c.lm_eval_task, c.gen_kwargs, c.max_input_len, c.apply_chat_template = "longbench", "max_gen_toks=8", 2048, False
    assert ev.extra_acc_spec() == f"target_sparsity=0.9,gen_kwargs={short_hash('max_gen_toks=8')},max_input_len=2048,chat_template=false"
    threshold = {"sparse_attention_config": {"algorithm": "skip_softmax", "threshold_scale_factor": 1000.0}}
    ev.bind_backend(SimpleNamespace(details={"extra_llm_api_options": json.dumps(threshold)}))
    assert ev.extra_acc_spec().startswith("sparse_attention=" + short_hash(json.dumps(threshold["sparse_attention_config"],
                                                                                    sort_keys=True)))
    ev.bind_backend(SimpleNamespace(details={}))  # a backend without sparse attention: dense again
    assert ev.extra_acc_spec().startswith("target_sparsity=0.0,gen_kwargs=")


def test_code_similarity_is_upstreams_rapidfuzz_ratio(copy, tmp_path):
    """lm-eval's code metric scores the answer's first line ("return a+b") against the truth ("    return a + b")
    by fuzz.ratio: upstream loads RapidFuzz's, the Indel similarity 2 x 10 common characters / (10 + 16) = 20/26,
    unrounded (fuzzywuzzy's would be the whole percent 0.77)."""
    from runner.contract.build import build
    from runner.job.flow import typed

    ev = build(typed(synthetic(copy, tmp_path, "task.lm_eval_task=longbench_lcc")).task, "task")
    task = ev.subtasks[0].task
    values = task.process_results(ev.docs(ev.subtasks[0])[0], ["return a+b\nprint(add(1, 2))"])
    assert values["code_sim_score"] == values["score"] == pytest.approx(20 / 26, abs=1e-12)
    import sys
    assert "fuzzywuzzy" not in sys.modules  # the stand-in lives only while lm-eval loads the task files


def test_a_trtllm_pytorch_run_is_keyed_by_its_skip_softmax_sparsity(copy, tmp_path, monkeypatch):
    """The sparsity reaches the LLM (the TensorRT-LLM double takes only the fields its manifest lists) and the key."""
    from runner.backends.trtllm import api as trtllm_api
    from runner.job.flow import run
    from tests.backends.test_trtllm_backend import FakeTokenizer
    from tests.helpers import trtllm_double

    monkeypatch.setattr(trtllm_api, "_load_tokenizer", lambda path, trc, rev: FakeTokenizer())
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    calls = trtllm_double.install(trtllm_double.load(trtllm_double.manifest_paths()[0]) | {"tensorrt_llm_version": "1.2.0"})
    try:
        sparse = "{sparse_attention_config: {algorithm: skip_softmax, target_sparsity: 0.9}}"
        out = run(synthetic(copy, tmp_path / "out", "backend=trtllm_pytorch", f"model.path={model}",
                            f"backend.extra_llm_api_options={sparse}", "task.max_input_len=2048"))
    finally:
        trtllm_double.uninstall()
    llm = next(kwargs for name, kwargs in calls if name == "TorchLlmArgs")  # what the LLM was given
    assert llm["sparse_attention_config"] == {"algorithm": "skip_softmax", "target_sparsity": 0.9}
    assert out.spec.extra_acc_spec == "target_sparsity=0.9,lm_eval_task=longbench_synthetic,max_input_len=2048"


@pytest.mark.parametrize("model,spec,value", [
    # read by hand from upstream's references/longbench_v1.yaml (commit 0e2003a9f44b1aa98cac7dca71fba77185487782)
    ("Qwen3/Qwen3-30B-A3B-Instruct-2507", dict(extra_acc_spec="target_sparsity=0.0"), 48.383),
    ("Qwen3/Qwen3-30B-A3B-Instruct-2507", dict(extra_acc_spec="target_sparsity=0.9"), 38.524),
    ("Qwen3/Qwen3-30B-A3B-Instruct-2507", dict(kv_cache_quant_algo="FP8", extra_acc_spec="target_sparsity=0.5"), 46.559),
    ("deepseek-ai/DeepSeek-V3-0324", dict(quant_algo="NVFP4", extra_acc_spec="target_sparsity=0.9"), 44.94),
])
def test_upstreams_entries(model, spec, value):
    from runner.contract.spec import AccuracySpec
    from runner.references.store import lookup
    from runner.stats.data.hypothesis import HypothesisParams

    entry = lookup(ROOT / "references", "longbench_v1", "score", model, AccuracySpec(**spec),
                   HypothesisParams(0.05, 0.2, 50.0, 4750))
    assert (entry.value, entry.params.sigma, entry.params.num_samples, entry.threshold) == (value, 50.0, 4750, None)


def test_plan_finds_upstreams_entry_over_a_local_copy(copy):
    from runner.commands.plan_job import planned_job

    plan = planned_job(["task=longbench_v1", "model=qwen3_30b_a3b_instruct_2507", "quant.kv_cache_quant_algo=FP8",
                        f"task.local_dir={copy}"])
    assert (plan.reference.value, plan.reference.index, plan.spec.extra_acc_spec) == (47.65, 3, "target_sparsity=0.0")
    assert (plan.metric, plan.reference.params.num_samples, plan.reference.params.sigma) == ("score", 4750, 50.0)
    assert plan.reference.note.startswith("from the comments of upstream's file")


@pytest.mark.e2e
def test_runs_end_to_end_on_the_embedded_model(copy, tmp_path, monkeypatch):
    """Two documents (one of passage_count, one of passage_retrieval_en: the seeded draw split by size), the
    installed prompts through the model's chat template, the installed metrics recomputed here from the answers."""
    from evaluators.deviations import short_hash
    from runner.job.flow import run

    monkeypatch.chdir(tmp_path)
    out = run(synthetic(copy, tmp_path / "out", "task.num_samples=2", "task.max_input_len=2048", "task.max_output_len=4",
                        "task.gen_kwargs='max_gen_toks=4'"))
    assert out.exit_status == 0 and out.spec.extra_acc_spec == (
        f"target_sparsity=0.0,lm_eval_task=longbench_synthetic,gen_kwargs={short_hash('max_gen_toks=4')},"
        "max_input_len=2048")
    rows = [json.loads(line) for line in (out.output_dir / "samples.jsonl").read_text().splitlines()]
    ids = sorted(r["sample_id"] for r in rows)
    assert len(ids) == 2 and ids[0].startswith("longbench_passage_count/") and ids[1] == "longbench_passage_retrieval_en/0"
    truth = {"longbench_passage_count/0": "2", "longbench_passage_count/1": "5", "longbench_passage_count/2": "7",
             "longbench_passage_retrieval_en/0": "2"}
    weights = {"longbench_passage_count": 5 / 9, "longbench_passage_retrieval_en": 5 / 3}
    expected = []
    for r in rows:  # the share of the numbers in the answer that are the truth (0 without a number)
        numbers = re.findall(r"\d+", r["meta"]["response"].strip())
        value = sum(n == truth[r["sample_id"]] for n in numbers) / len(numbers) if numbers else 0.0
        assert r["meta"]["lm_eval"]["score"] == pytest.approx(value)
        expected.append(100 * value * weights[r["meta"]["subtask"]])
        assert r["score"] == pytest.approx(expected[-1])
    assert out.metrics["score"] == pytest.approx(sum(expected) / 2)
