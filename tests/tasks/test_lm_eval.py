"""task=lm_eval on the scripted backend: lm-eval's prompts and per-document metrics with golden values worked out
by hand from scripted log-likelihoods, groups as clusters, seeded subsets, the trust rule, refusals, the lm-eval
model class over our answerer, chat requests, a recorded reference and its paired check."""

from __future__ import annotations

import json

import pytest
import yaml

from runner.contract.errors import ConfigError
from runner.contract.requests import GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult
from runner.job.flow import run, typed
from tests.conftest import compose
from tests.helpers.lm_eval_tasks import write_tasks

# ARC-Easy fixture: (question, {continuation: logprob}); lm-eval's acc_norm divides by the continuation's characters
SCRIPT = [
    # raw picks " oxygen" (wrong); -3.0 / 7 = -0.43 < -3.5 / 15 = -0.23 picks " carbon dioxide" (right)
    ("Which gas do plants take in from the air?", {" oxygen": -3.0, " carbon dioxide": -3.5, " nitrogen": -9.0,
                                                   " helium": -9.0}),
    ("What is the boiling point of water at sea level?", {" 100 degrees Celsius": -1.0, " 0 degrees Celsius": -5.0,
                                                          " 50 degrees Celsius": -5.0}),  # both right
    ("Which object is a magnet most likely to attract?", {" a wooden spoon": -1.0, " an iron nail": -8.0,
                                                         " a glass cup": -8.0, " a paper clip made of plastic": -8.0,
                                                         " a rubber band": -8.0}),  # both wrong
    ("What do we call frozen water?", {" steam": -6.0, " ice": -0.5, " rain": -6.0, " fog": -6.0}),  # both right
]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    return write_tasks(tmp_path_factory.mktemp("lm_eval"))


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    path = tmp_path_factory.mktemp("script") / "script.jsonl"
    with open(path, "w") as f:
        for question, options in SCRIPT:
            for cont, lp in options.items():
                f.write(json.dumps({"context": f"Question: {question}\nAnswer:", "continuation": cont, "logprob": lp}) + "\n")
    return path


def job(tasks, tmp_path, name, *extra):
    return compose(["task=lm_eval", f"task.lm_eval_task={name}", f"task.include_path={tasks}", "backend=fake",
                    "tracking=none", "reference.mode=skip", f"output_dir={tmp_path / 'out'}", *extra])


def rows(tmp_path, out="out"):
    return {r["sample_id"]: r for r in map(json.loads, open(tmp_path / out / "samples.jsonl"))}


def test_multiple_choice_scores_as_lm_eval_with_provenance(tasks, script, tmp_path):
    from lm_eval.utils import hash_string

    out = run(job(tasks, tmp_path, "arc_local", f"backend.script={script}"))
    got = rows(tmp_path)
    assert [got[f"arc_local/{i}"]["score"] for i in range(4)] == [0.0, 100.0, 0.0, 100.0]
    assert [got[f"arc_local/{i}"]["meta"]["lm_eval"]["acc_norm"] for i in range(4)] == [1.0, 1.0, 0.0, 1.0]
    assert [got[f"arc_local/{i}"]["prediction"] for i in range(4)] == ["oxygen", "100 degrees Celsius",
                                                                      "a wooden spoon", "ice"]
    # the target in the prediction's form (the choice's text, not lm-eval's index), the row by the doc's own id
    # (tests/data/arc_easy/test.jsonl: Q1's answerKey B is "carbon dioxide", Q3's "an iron nail")
    assert [got[f"arc_local/{i}"]["target"] for i in (0, 2)] == ["carbon dioxide", "an iron nail"]
    assert [got[f"arc_local/{i}"]["meta"]["row"] for i in range(4)] == ["id=Q1", "id=Q2", "id=Q3", "id=Q4"]
    first = got["arc_local/0"]
    assert first["prompt"] == "Question: Which gas do plants take in from the air?\nAnswer:"
    assert first["meta"]["prompt_hash"] == hash_string(first["prompt"]) and first["meta"]["doc_id"] == 0
    assert out.metrics == {"acc": 50.0, "lm_eval/acc": 0.5, "lm_eval/acc_norm": 0.75}
    spec = out.spec.extra_acc_spec
    assert spec.startswith("lm_eval=0.4.13,task_hash=") and spec.endswith(",num_fewshot=0,fewshot_seed=1234")


def test_metric_direction_and_filter_come_from_lm_eval(tasks, tmp_path):
    from runner.job.prepare import prepare

    rolling = prepare(typed(job(tasks, tmp_path, "corpus_rolling")))
    assert (rolling.task.metric, rolling.task.higher_is_better, rolling.defaults.higher_is_better) == \
        ("word_perplexity", False, False)
    assert rolling.evaluator.scale == 1.0 and rolling.task.cluster_key is None  # one task: no clusters
    gen = prepare(typed(job(tasks, tmp_path, "gsm8k_local", "task.metric=exact_match")))
    assert gen.evaluator.filter == "last-number" and gen.evaluator.scale == 100.0
    for override, message in (("task.metric=bleu", "no metric of this name"), ("task.filter=strict", "no filter"),
                              ("task.num_fewshot=-1", "value out of range")):
        with pytest.raises(ConfigError, match=message):
            prepare(typed(job(tasks, tmp_path, "gsm8k_local", override)))


def test_group_subtasks_are_clusters_and_subsets_stratified(tasks, tmp_path):
    out = run(job(tasks, tmp_path, "mmlu_local", "task.num_samples=4", "seed=3"))
    got = rows(tmp_path)
    by_subject = sorted(i.split("/")[0] for i in got)
    assert by_subject == ["mmlu_local_astronomy"] * 2 + ["mmlu_local_virology"] * 2
    assert all(r["meta"]["subtask"] == r["sample_id"].split("/")[0] for r in got.values())
    assert {"lm_eval/mmlu_local_astronomy/acc", "lm_eval/mmlu_local_virology/acc"} <= set(out.metrics)
    assert out.metrics["acc"] == pytest.approx(sum(r["score"] for r in got.values()) / 4)
    again = run(job(tasks, tmp_path, "mmlu_local", "task.num_samples=4", "seed=3", f"output_dir={tmp_path / 'again'}"))
    assert sorted(rows(tmp_path, "again")) == sorted(got) and again.metrics == out.metrics
    other = run(job(tasks, tmp_path, "mmlu_local", "task.num_samples=4", "seed=4", f"output_dir={tmp_path / 'other'}"))
    assert sorted(rows(tmp_path, "other")) != sorted(got)  # 3 x 3 ways to choose 2 of 3 per subject: seed 4 differs
    assert other.spec.extra_acc_spec == out.spec.extra_acc_spec  # the subset is not the protocol
    from runner.job.prepare import prepare

    assert prepare(typed(job(tasks, tmp_path, "mmlu_local"))).task.cluster_key == "subtask"


def test_generation_filters_and_rolling_loglikelihood(tasks, tmp_path):
    gen = run(job(tasks, tmp_path, "gsm8k_local", "backend.default_answer='so 12, then 71 in all'"))
    got = rows(tmp_path)
    # the regex filter keeps the last number: "71" is the first document's answer (Ali: 21 + 50)
    assert got["gsm8k_local/0"]["prediction"] == "71" and got["gsm8k_local/0"]["score"] == 100.0
    assert [got[f"gsm8k_local/{i}"]["score"] for i in (1, 2)] == [0.0, 0.0] and gen.metrics["exact_match"] == 100 / 3
    # 1-shot from the same split: the example is another document, never the one asked
    assert got["gsm8k_local/0"]["prompt"].count("Question:") == 2
    # the fake counts words: 300 characters are > 20 "tokens", scored whole in windows of 20 (the fake's answer
    # does not depend on the window; the windows themselves: tests/backends/test_rolling.py)
    rolled = run(job(tasks, tmp_path, "corpus_rolling", "task.max_input_len=20", f"output_dir={tmp_path / 'roll'}"))
    assert rolled.spec.extra_acc_spec.endswith(",fewshot_seed=1234,rolling_window=20")
    for r in rows(tmp_path, "roll").values():
        ll, words = r["meta"]["lm_eval"]["word_perplexity"]
        assert words == len(r["target"].split()) and r["score"] == pytest.approx(2.718281828459045 ** (-ll / words))


def test_rolling_windows_are_declared_and_a_backend_without_them_is_refused_before_requests(tasks, tmp_path):
    from runner.job.prepare import prepare

    longest = max(len(json.loads(line)["text"].split()) for line in open(tasks.parent / "data" / "corpus.jsonl"))
    with pytest.raises(ConfigError, match="cannot score a rolling text longer than one window") as err:
        run(job(tasks, tmp_path, "corpus_rolling", "backend.rolling_windows=false", "task.rolling_window=20"))
    assert f"3 of 3 texts have more than 20 tokens (the longest {longest})" in str(err.value)
    assert f"task.rolling_window={longest}" in str(err.value) and not (tmp_path / "out" / "samples.jsonl").exists()
    # texts within one window run on such a backend; the requests carry the window (null: task.max_input_len)
    short = run(job(tasks, tmp_path, "corpus_rolling", "backend.rolling_windows=false", f"task.rolling_window={longest}"))
    assert short.exit_status == 0 and f"rolling_window={longest}" in short.spec.extra_acc_spec
    prepared = prepare(typed(job(tasks, tmp_path, "corpus_rolling", "task.max_input_len=512")))
    request = prepared.evaluator.requests(prepared.evaluator.samples(1, 0)[0])[0]
    assert request.context == "" and request.rolling_window == 512
    for bad in ("task.rolling_window=0", "task.rolling_window=5000"):  # 1..task.max_input_len (4096)
        with pytest.raises(ConfigError, match="a rolling window holds between 1 token and the task's input length"):
            prepare(typed(job(tasks, tmp_path, "corpus_rolling", bad)))


def test_trust_rule_for_include_path_code(tmp_path):
    tasks = write_tasks(tmp_path / "coded", with_code=True)
    with pytest.raises(ConfigError, match=r"would run Python code \(!function\)") as err:
        run(job(tasks, tmp_path, "arc_local"))  # any task: the directory holds a file that runs code
    assert "coded.yaml" in str(err.value) and "trust_include_code=true" in str(err.value)
    run(job(tasks, tmp_path, "coded", "task.trust_include_code=true"))
    assert rows(tmp_path)["coded/0"]["prompt"] == "Question: WHICH GAS DO PLANTS TAKE IN FROM THE AIR?\nAnswer:"


def test_backend_without_loglikelihood_is_refused_before_requests(tasks, tmp_path):
    with pytest.raises(ConfigError, match="lm-eval task arc_local is multiple_choice, scored by log-likelihood"):
        run(job(tasks, tmp_path, "arc_local", "backend.loglikelihood=false"))
    out = run(job(tasks, tmp_path, "gsm8k_local", "backend.loglikelihood=false"))  # generation runs
    assert out.metrics["exact_match"] == 0.0


def test_lm_eval_model_sends_each_request_type_in_one_call(tasks):
    from lm_eval.evaluator import evaluate
    from lm_eval.tasks import TaskManager

    from evaluators.tasks.harness.model import answerer_lm
    from runner.contract.backend import Capabilities

    class Answerer:
        calls: list[tuple[str, int]] = []

        def loglikelihood(self, requests):
            self.calls.append(("loglikelihood", len(requests)))
            return [LoglikelihoodResult(-1.0 - len(r.continuation) / 10, False, 1) for r in requests]

        def generate(self, requests):
            assert all(isinstance(r, GenerationRequest) and r.stop == ("Question:", "\n\n") for r in requests)
            self.calls.append(("generate", len(requests)))
            return ["71" for _ in requests]

    answerer = Answerer()
    lm = answerer_lm(answerer, max_output_len=64)
    manager = TaskManager(include_path=str(tasks), include_defaults=False)
    loaded = manager.load(["arc_local", "gsm8k_local", "corpus_rolling"])["tasks"]
    results = evaluate(lm, {"tasks": loaded, "groups": {}}, log_samples=False)["results"]
    # three request types, three bulk calls (loglikelihood once for multiple choice, once rolling)
    assert sorted(lm.calls) == [("generate_until", 3), ("loglikelihood", 16), ("loglikelihood_rolling", 3)]
    assert results["gsm8k_local"]["exact_match,last-number"] == pytest.approx(1 / 3)
    # the shortest option is always the most likely: Q1 oxygen (wrong), Q2 " 0 degrees" (wrong), Q3 " a glass cup"
    # (wrong), Q4 " ice" (right)
    assert results["arc_local"]["acc,none"] == 0.25
    # a backend declaring no log-likelihoods: refused before any request of the kind is sent
    answerer.calls.clear()
    blind = answerer_lm(answerer, max_output_len=64, capabilities=Capabilities(loglikelihood=False))
    with pytest.raises(ConfigError, match="lm-eval task arc_local is loglikelihood"):
        evaluate(blind, {"tasks": {"arc_local": loaded["arc_local"]}, "groups": {}}, log_samples=False)
    assert answerer.calls == []


def test_chat_requests_carry_lm_eval_turns(tasks, tmp_path):
    from runner.job.prepare import prepare

    single = prepare(typed(job(tasks, tmp_path, "gsm8k_local", "task.apply_chat_template=true")))
    (sample,) = single.evaluator.samples(1, 0)
    (request,) = single.evaluator.requests(sample)
    assert sample.prompt == "[user] " + request.messages[0][1]  # what samples.jsonl shows: the turns
    assert [role for role, _ in request.messages] == ["user"] and request.messages[0][1].count("Question:") == 2
    multi = prepare(typed(job(tasks, tmp_path, "gsm8k_local", "task.apply_chat_template=true",
                              "task.fewshot_as_multiturn=true")))
    (request,) = multi.evaluator.requests(multi.evaluator.samples(1, 0)[0])
    assert [role for role, _ in request.messages] == ["user", "assistant", "user"]
    mc = prepare(typed(job(tasks, tmp_path, "arc_local", "task.apply_chat_template=true")))
    requests = mc.evaluator.requests(mc.evaluator.samples(4, 0)[0])
    # lm-eval drops the target delimiter under the chat template; the context is the user turn
    assert requests[0] == LoglikelihoodRequest("Question: Which gas do plants take in from the air?\nAnswer:", "oxygen")
    assert "chat_template=true" in mc.evaluator.extra_acc_spec()


def test_multiturn_loglikelihood_context_is_lm_eval_chat_rendered(tasks, tmp_path):
    """Few-shot turns and a system text on a multiple-choice task: the request carries the chat, and the tokens a
    backend scores are those of lm-eval's own context (its fewshot_context rendered as its HF model renders a chat:
    the tokenizer's template with the generation prompt) followed by the choice, split as lm-eval splits them."""
    from types import SimpleNamespace

    from lm_eval.api.model import TemplateLM
    from transformers import AutoTokenizer

    from runner.backends.rolling import request_rows
    from runner.contract.backend import ChatFormat
    from runner.files.assets import smollm2_checkpoint
    from runner.job.prepare import prepare

    tok = AutoTokenizer.from_pretrained(smollm2_checkpoint())
    mc = prepare(typed(job(tasks, tmp_path, "arc_local", "task.apply_chat_template=true", "task.num_fewshot=1",
                           "task.fewshot_as_multiturn=true", "task.system_prompt='Answer with the option.'")))
    sample = mc.evaluator.samples(4, 0)[0]
    requests = mc.evaluator.requests(sample)
    assert [role for role, _ in requests[0].messages] == ["system", "user", "assistant", "user"]
    assert requests[0].context == requests[0].messages[-1][1]

    sub, doc, instances = mc.evaluator._built[sample.id]
    sub.task.set_fewshot_seed(seed=1234)  # the sampler as it stood for the first document drawn

    def render(history, add_generation_prompt=True):
        return tok.apply_chat_template(history, tokenize=False, add_generation_prompt=add_generation_prompt)

    context = sub.task.fewshot_context(doc, num_fewshot=1, system_instruction="Answer with the option.",
                                       apply_chat_template=True, fewshot_as_multiturn=True, chat_template=render)
    # lm-eval's own split of (context, continuation) into tokens, over its HF model's encoding (no added specials)
    causal = SimpleNamespace(backend="causal", tok_encode=lambda text: tok(text, add_special_tokens=False)["input_ids"])
    chat = ChatFormat(True, "Answer with the option.")
    for request, inst in zip(requests, instances):
        ctx, cont = TemplateLM._encode_pair(causal, context, inst.args[1])
        seq, scored = request_rows(tok, chat, request, 4096, 256)[0]
        assert (seq, scored) == (ctx + cont, cont)


def test_recorded_reference_then_paired_check_and_dry_run(tasks, script, tmp_path, capsys):
    from runner.job.dry_run import dry_run

    refs = tmp_path / "refs"
    common = [f"backend.script={script}", f"reference.dir={refs}"]
    recorded = run(job(tasks, tmp_path, "arc_local", *common, "reference.mode=record", f"output_dir={tmp_path / 'r'}"))
    assert recorded.exit_status == 0 and "lm_eval_arc_local" in (refs / "lm_eval_arc_local.yaml").read_text()
    from runner.commands.plan_job import planned_job

    planned = planned_job(["task=lm_eval", "task.lm_eval_task=arc_local", f"task.include_path={tasks}", "backend=fake", *common])
    assert planned.metric == "acc" and planned.reference.value == recorded.score == 50.0
    line = dry_run(typed(job(tasks, tmp_path, "arc_local", *common)))
    assert "n=4, 16 requests; cache: 16 of 16 stored" in line  # the recording run's answers, from the cache
    checked = run(job(tasks, tmp_path, "arc_local", *common, "quant=w4a16", "reference.against=baseline", "reference.mode=check",
                      f"output_dir={tmp_path / 'c'}"))
    assert checked.decision is not None and checked.decision.rule == "paired" and checked.exit_status in (0, 3, 4)


def test_request_translation_of_generation_settings():
    from lm_eval.api.instance import Instance

    from evaluators.tasks.harness.translate import record_chat, to_lm_eval, to_request

    def gen(kwargs, ctx="Q:"):
        return Instance("generate_until", {}, (ctx, kwargs), 0, ("t", 0, 1))

    assert to_request(gen({"until": "\n", "max_gen_toks": 5}), 8, seed=7) == GenerationRequest("Q:", 5, ("\n",))
    assert to_request(gen({"until": ["a", "b"]}), 256).max_tokens == 256  # lm-eval's default max_gen_toks
    sampled = to_request(gen({"do_sample": True, "temperature": 0.7, "top_p": 0.9}), 256, seed=7)
    assert (sampled.temperature, sampled.top_p, sampled.seed) == (0.7, 0.9, 7)
    assert to_request(gen({"do_sample": False, "temperature": 0.7}), 256, seed=7).greedy  # as HFLM: no sampling
    chat = to_request(gen({}, record_chat([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])), 256)
    assert chat.messages == (("system", "S"), ("user", "U")) and chat.prompt == "U"
    with pytest.raises(ConfigError, match="gen_prefix"):
        to_request(gen({}, record_chat([{"role": "user", "content": "U"}], add_generation_prompt=False)), 256)
    with pytest.raises(ConfigError, match="unsupported lm-eval generation settings") as err:
        to_request(gen({"num_beams": 4}), 256)
    assert "num_beams" in str(err.value)
    with pytest.raises(ConfigError, match="task.max_output_len=300"):
        to_request(gen({"max_gen_toks": 300}), 256)
    rolling = Instance("loglikelihood_rolling", {}, ("some text",), 0, ("t", 0, 1))
    assert to_request(rolling, 8) == LoglikelihoodRequest("", "some text")
    assert to_request(rolling, 8, rolling_window=64) == LoglikelihoodRequest("", "some text", rolling_window=64)
    result = LoglikelihoodResult(-2.5, True, 3)
    assert to_lm_eval("loglikelihood_rolling", result) == -2.5 and to_lm_eval("loglikelihood", result) == (-2.5, True)


def test_stratified_allocation():
    from evaluators.tasks.harness.evaluator import allocate

    assert allocate({"a": 10, "b": 30}, 8) == {"a": 2, "b": 6}
    assert allocate({"a": 1, "b": 1, "c": 1}, 2) == {"a": 1, "b": 1, "c": 0}  # ties by name
    assert allocate({"a": 5, "b": 7}, 100) == {"a": 5, "b": 7}
    assert sum(allocate({"x": 13, "y": 29, "z": 58}, 17).values()) == 17


def test_corpus_metric_is_lm_eval_figure_decided_by_the_paired_corpus_bootstrap(tasks, tmp_path):
    """word_perplexity pools log-likelihoods over words: the task metric is lm-eval's corpus figure, the reference
    keeps each document's (log-likelihood, words) item, and the paired corpus bootstrap decides."""
    import math
    import re

    from runner.job.prepare import prepare
    from runner.references.samples import load_rows

    docs = [json.loads(line)["text"] for line in open(tasks.parent / "data" / "corpus.jsonl")]
    words = [len(re.split(r"\s+", d)) for d in docs]  # lm-eval's word count

    def script(name, per_word):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"context": "", "continuation": d, "logprob": p * w}) + "\n"
                                for d, w, p in zip(docs, words, per_word)))
        return f"backend.script={path}"

    good, worse = [-2.0, -2.1, -2.2], [-2.5, -2.6, -2.7]  # every document loses 0.5 nats per word
    refs = tmp_path / "refs"

    def go(name, *extra):
        return run(job(tasks, tmp_path, "corpus_rolling", f"reference.dir={refs}", f"output_dir={tmp_path / name}",
                       f"cache.path={tmp_path / name}.sqlite", *extra))

    recorded = go("r", script("good", good), "reference.mode=record")
    pooled = math.exp(-sum(p * w for p, w in zip(good, words)) / sum(words))
    assert recorded.metrics["word_perplexity"] == pytest.approx(pooled)
    assert recorded.metrics["lm_eval/word_perplexity"] == pytest.approx(pooled)
    # results.json's standard error is the corpus figure's bootstrap one (lm-eval's rule), checked against scipy's
    import numpy as np
    from scipy import stats as sps

    ll, w = (np.array([p * n for p, n in zip(good, words)]), np.array(words, dtype=float))
    oracle = sps.bootstrap((ll, w), lambda a, b, axis=-1: np.exp(-a.sum(axis) / b.sum(axis)), paired=True,
                           vectorized=True, n_resamples=4000, random_state=np.random.default_rng(1)).standard_error
    stderr = json.loads((tmp_path / "r" / "results.json").read_text())["results"]["lm_eval_corpus_rolling"]
    assert stderr["word_perplexity_stderr,none"] == pytest.approx(oracle, rel=0.08)  # per-document: 22% off
    written = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())["task"]  # as resolved, not "auto"
    assert (written["metric"], written["higher_is_better"], written["cluster_key"]) == ("word_perplexity", False, None)
    entry = next(iter(refs.glob("samples/*/*.jsonl")))
    stored = load_rows(refs, entry.relative_to(refs).as_posix())
    assert sorted(tuple(r.item) for r in stored.values()) == sorted((p * w, w) for p, w in zip(good, words))

    common = ("quant=w4a16", "reference.against=baseline", "reference.mode=check")
    worse_run = go("c", script("worse", worse), *common)
    decision = worse_run.decision
    assert decision.rule == "paired" and "corpus bootstrap" in decision.paired.method
    # three documents: a ninth of the resamples repeat one document and carry no spread of their own, so the
    # bootstrap-t counts them as extreme and cannot show a regression, however uniform the loss
    assert decision.outcome == "INCONCLUSIVE" and decision.claims.high == math.inf
    assert decision.paired.mean_diff == pytest.approx(pooled * (math.exp(0.5) - 1))

    # identical documents: every resample is blind to a change, so nothing is shown at any n
    same = go("s", script("same", good), *common).decision
    assert same.outcome == "INCONCLUSIVE" and same.paired.mean_diff == 0.0 and same.claims.low == -math.inf

    with pytest.raises(ConfigError, match="repeated looks are not available for a corpus metric"):
        prepare(typed(job(tasks, tmp_path, "corpus_rolling", "stats.extensions=2")))
