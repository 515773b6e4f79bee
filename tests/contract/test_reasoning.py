"""Sampled runs and reasoning models (runner/contract/reasoning.py): the reference-key parts against
upstream's spelling, the requests every backend receives, the chat-template arguments each backend
passes on, and the reasoning block cut before scoring. Golden values are written out by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from runner.backends.openai.payloads import PromptSettings, chat_messages, completion_prompt
from runner.backends.prompting import encode_request, render_prompt
from runner.backends.trtllm.backend import sampling_kwargs
from runner.cache.generations import settings_context
from runner.contract.backend import ChatFormat, TaskLimits
from runner.contract.errors import ConfigError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.reasoning import apply_sampling, check_sampling, key_parts, strip_thinking, template_kwargs
from runner.contract.requests import GenerationRequest
from runner.contract.task_config import QuantConfig, SamplingConfig


class QwenLikeTokenizer:
    """Whitespace ids; a chat template that, like Qwen3's, writes an empty think block when thinking is off."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def apply_chat_template(self, messages, tokenize, add_generation_prompt, **kwargs):
        self.seen.append(kwargs)
        text = " ".join(f"<|{m['role']}|> {m['content']}" for m in messages) + " <|assistant|>"
        return text + (" <think></think>" if kwargs.get("enable_thinking") is False else "")

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [hash(w) % 1000 for w in text.split()]}


def task(temperature=None, top_p=None, top_k=None, seed=None, chat=False, kwargs=None, strip=False):
    return SimpleNamespace(sampling=SamplingConfig(temperature, top_p, top_k, seed), apply_chat_template=chat,
                           chat_template_kwargs=kwargs or {}, strip_thinking=strip)


# ------------------------------------------------------------------------------ the reference key
def test_sampled_entries_are_keyed_as_upstream_spells_them():
    # upstream's mmlu.yaml / cnn_dailymail.yaml: Llama-3.1-8B-Instruct FP8, extra_acc_spec: temperature=0.8,top_p=0.95
    assert ",".join(key_parts(task(0.8, 0.95, seed=1))) == "temperature=0.8,top_p=0.95"
    assert key_parts(task(0.6, 0.95, 20, seed=0)) == ["temperature=0.6", "top_p=0.95", "top_k=20"]
    assert key_parts(task()) == [] and key_parts(task(0.0)) == []  # greedy: upstream's plain entries


def test_chat_template_arguments_are_keyed_only_through_the_template():
    assert key_parts(task(chat=True, kwargs={"enable_thinking": False})) == ["enable_thinking=False"]
    assert key_parts(task(chat=True, kwargs={"thinking_budget": 0, "enable_thinking": True})) == [
        "enable_thinking=True", "thinking_budget=0"]  # sorted by name
    assert key_parts(task(chat=False, kwargs={"enable_thinking": False})) == []  # never reaches the model
    assert key_parts(task(strip=True)) == ["strip_thinking"]


def test_sampling_values_are_checked_before_anything_loads():
    check_sampling(SamplingConfig(0.6, 0.95, 20, 0))
    for bad, fragment in [(SamplingConfig(0.8), "needs a seed"), (SamplingConfig(-1.0, seed=0), "temperature"),
                          (SamplingConfig(0.8, 1.5, seed=0), "top_p"), (SamplingConfig(0.8, top_k=0, seed=0), "top_k"),
                          (SamplingConfig(None, 0.9), "only to a sampled run")]:
        with pytest.raises(ConfigError, match=fragment):
            check_sampling(bad)


# ------------------------------------------------------------------------------ requests and answers
def test_every_generation_request_carries_the_tasks_sampling():
    req = GenerationRequest("Q", 8, stop=("\n",))
    assert apply_sampling(req, SamplingConfig()) is req
    sampled = apply_sampling(req, SamplingConfig(0.6, 0.95, 20, 7))
    assert (sampled.temperature, sampled.top_p, sampled.top_k, sampled.seed, sampled.stop) == (0.6, 0.95, 20, 7, ("\n",))
    # TensorRT-LLM's SamplingParams as the LLM API takes them
    assert sampling_kwargs(sampled, TaskLimits(64, 4)) == {"max_tokens": 4, "stop": ["\n"], "temperature": 0.6,
                                                           "seed": 7, "top_k": 20, "top_p": 0.95}


@pytest.mark.parametrize("text,answer", [
    ("<think>Let me see: 9 x 8 = 72.</think>\n\nThe answer is 72.", "The answer is 72."),
    ("<think>a</think> b <think>c</think> 70", "70"),  # the text after the LAST closing tag
    ("Sure. <think>unfinished reasoning 12 13", "Sure."),  # cut off while thinking: nothing of it is scored
    ("no reasoning block: 42 ", "no reasoning block: 42"),
])
def test_the_reasoning_block_is_cut_before_scoring(text, answer):
    assert strip_thinking(text) == answer


def test_score_all_sends_sampled_requests_and_scores_the_stripped_answer():
    from runner.job.answer import job_requests, score_all

    @dataclass
    class Echo:
        config: Any
        seen: list = field(default_factory=list)

        def requests(self, sample):
            return [GenerationRequest(sample.prompt, 16)]

        def score_batch(self, samples, responses):
            self.seen += [r[0] for r in responses]
            return [ScoredSample(s.id, s.prompt, r[0], s.target, 0.0) for s, r in zip(samples, responses)]

        def answer_unparsed(self, scored):
            return None  # the Evaluator interface's default: the task does not say

    class Answerer:
        def __init__(self) -> None:
            self.requests: list[GenerationRequest] = []

        def generate(self, requests):
            self.requests += requests
            return ["<think>long reasoning</think> 70" for _ in requests]

        def loglikelihood(self, requests):
            return []

    config, answerer = task(0.6, 0.95, 20, 3, strip=True), Answerer()
    evaluator, samples = Echo(config), [Sample("a", "Q1", "70"), Sample("b", "Q2", "16")]
    per_sample = job_requests(evaluator, samples, config.sampling)  # type: ignore[arg-type]
    score_all(evaluator, answerer, samples, per_sample, config.strip_thinking)  # type: ignore[arg-type]
    assert [(r.temperature, r.top_p, r.top_k, r.seed) for r in answerer.requests] == [(0.6, 0.95, 20, 3)] * 2
    assert evaluator.seen == ["70", "70"]


# ------------------------------------------------------------------------------ each backend's pass-through
def test_hf_and_tensorrt_llm_prompts_render_the_template_with_its_arguments():
    tok = QwenLikeTokenizer()
    chat = ChatFormat(True, None, template_kwargs({"enable_thinking": False}))
    text, _ = render_prompt(tok, chat, "What is 2+2?")
    assert text == "<|user|> What is 2+2? <|assistant|> <think></think>" and tok.seen == [{"enable_thinking": False}]
    assert len(encode_request(tok, chat, GenerationRequest("What is 2+2?", 4), 64)) == 6  # the ids both backends send


def test_the_endpoint_backend_sends_them_as_the_server_expects():
    tok = QwenLikeTokenizer()
    chat = ChatFormat(True, None, template_kwargs({"enable_thinking": False}))
    base = dict(prompt_format="text", truncation="client", budget=64, max_output_len=8,
                json_schema_field="response_format", guided=False)
    messages, extra, _ = chat_messages(tok, chat, GenerationRequest("Q?", 4), PromptSettings("chat", **base))
    assert messages == [{"role": "user", "content": "Q?"}] and extra == {"chat_template_kwargs": {"enable_thinking": False}}
    prompt, extra, _ = completion_prompt(tok, chat, GenerationRequest("Q?", 4), PromptSettings("completions", **base))
    assert prompt == "<|user|> Q? <|assistant|> <think></think>" and extra == {}  # rendered here, with the arguments
    _, plain, _ = chat_messages(tok, ChatFormat(True), GenerationRequest("Q?", 4), PromptSettings("chat", **base))
    assert plain == {}


def test_a_cache_key_without_template_arguments_is_the_one_written_before_they_existed():
    from runner.backends.fake import FakeBackendConfig

    limits = TaskLimits(8, 4)

    plain = settings_context(QuantConfig(name="none"), FakeBackendConfig(), (), limits, ChatFormat(True, "s"))
    assert plain["chat"] == {"apply_chat_template": True, "system_prompt": "s"}
    thinking = settings_context(QuantConfig(name="none"), FakeBackendConfig(), (), limits,
                                ChatFormat(True, "s", template_kwargs({"enable_thinking": False})))
    assert thinking["chat"]["template_kwargs"] == (("enable_thinking", False),)


def test_tensorrt_llm_takes_them_in_sampling_params_and_the_rendered_template(tmp_path, monkeypatch):
    """On the TensorRT-LLM double (the LLM API's signatures of a real release): SamplingParams carry the
    task's sampling, and the prompt tokens are those of the template rendered with its arguments."""
    import json

    from runner.backends.trtllm import api as trtllm_api
    from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackend, TRTLLMPyTorchBackendConfig
    from runner.contract.task_config import ModelConfig
    from tests.helpers import trtllm_double

    tok = QwenLikeTokenizer()
    monkeypatch.setattr(trtllm_api, "_load_tokenizer", lambda path, trc, rev: tok)
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    calls = trtllm_double.install(trtllm_double.load(trtllm_double.manifest_paths()[0]) | {"tensorrt_llm_version": "1.2.0"})
    try:
        backend = TRTLLMPyTorchBackend(TRTLLMPyTorchBackendConfig(), model=ModelConfig(name="m", hf_id="org/m",
                                       path=str(tmp_path)), quant=QuantConfig(name="none"), limits=TaskLimits(64, 8),
                                       chat=ChatFormat(True, None, template_kwargs({"enable_thinking": False})),
                                       progress=False)
        backend.preflight()
        with backend:
            request = apply_sampling(GenerationRequest("Q?", 8), SamplingConfig(0.6, 0.95, 20, 5))
            assert backend.generate([request]) == ["A5"]  # the double answers with the seed it was given
    finally:
        trtllm_double.uninstall()
    params = [kw for name, kw in calls if name == "SamplingParams"]
    assert params == [{"max_tokens": 8, "temperature": 0.6, "seed": 5, "top_k": 20, "top_p": 0.95}]
    (prompt,) = [kw["prompts"] for name, kw in calls if name == "generate"][0]
    assert prompt == tok("<|user|> Q? <|assistant|> <think></think>")["input_ids"]
    assert tok.seen[-1] == {"enable_thinking": False}
