"""What ``backend=openai`` sends and how it reads answers, without a server: prompts equal to what
``backend=hf`` tokenizes, truncation, sampling fields, the managed server's command line, and config mistakes refused when composed."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from runner.contract.backend import ChatFormat
from runner.contract.requests import GenerationRequest
from runner.backends.openai.payloads import PromptSettings, chat_messages, completion_prompt, sampling_fields
from runner.backends.openai.server import render_command
from runner.backends.prompting import encode_request, loglikelihood_tokens
from runner.contract.errors import ConfigError
from tests.conftest import compose


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from runner.files.assets import EMBEDDED_MODELS

    return AutoTokenizer.from_pretrained(EMBEDDED_MODELS["smollm2_135m_gguf"]())


def settings(**kw) -> PromptSettings:
    values = dict(endpoint="completions", prompt_format="text", truncation="client", budget=32, max_output_len=16,
                  json_schema_field="response_format", guided=False) | kw
    return PromptSettings(**values)


LONG = "Question: " + " ".join(f"word{i}" for i in range(60)) + "\nAnswer:"


def test_a_prompt_within_the_budget_is_sent_as_rendered(tokenizer):
    req = GenerationRequest("Question: 2+2?\nAnswer:", 4)
    assert completion_prompt(tokenizer, ChatFormat(), req, settings()) == ("Question: 2+2?\nAnswer:", {}, False)
    chat = ChatFormat(apply_chat_template=True, system_prompt="Be brief.")
    text, _, _ = completion_prompt(tokenizer, chat, req, settings(budget=512))
    assert text.startswith("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nQuestion: 2+2?")
    assert text.endswith("<|im_start|>assistant\n")  # the template's generation prompt, as hf renders it


@pytest.mark.parametrize("truncation", ["left", "right"])
def test_a_long_prompt_is_cut_to_the_tokens_hf_would_feed(tokenizer, truncation):
    req = GenerationRequest(LONG, 4, truncation=truncation, suffix=" Final answer:" if truncation == "right" else "")
    expected = encode_request(tokenizer, ChatFormat(), req, 32)
    assert len(expected) == 32
    ids, extra, cut = completion_prompt(tokenizer, ChatFormat(), req, settings(prompt_format="token_ids"))
    assert ids == expected and extra == {} and cut  # the run's input_cut indicator (runner.contract.indicators)
    text, _, _ = completion_prompt(tokenizer, ChatFormat(), req, settings())
    assert tokenizer(text, add_special_tokens=True)["input_ids"] == expected  # the server re-encodes it to the same
    assert text.endswith("Answer:" if truncation == "left" else " Final answer:")


def test_server_truncation_sends_the_whole_prompt_and_the_budget(tokenizer):
    req = GenerationRequest(LONG, 4)
    text, extra, server_cut = completion_prompt(tokenizer, ChatFormat(), req, settings(truncation="server"))
    assert text == LONG and extra == {"truncate_prompt_tokens": 32} and server_cut  # the server cuts it: still said
    with pytest.raises(ConfigError, match="cuts long prompts on the right"):
        completion_prompt(tokenizer, ChatFormat(), GenerationRequest(LONG, 4, truncation="right"), settings(truncation="server"))


def test_chat_messages_carry_the_system_prompt_and_fit_the_budget(tokenizer):
    chat = ChatFormat(apply_chat_template=True, system_prompt="Be brief.")
    messages, _, short_cut = chat_messages(tokenizer, chat, GenerationRequest("Hi there", 4), settings(endpoint="chat", budget=512))
    assert messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    cut, _, long_cut = chat_messages(tokenizer, chat, GenerationRequest(LONG, 4), settings(endpoint="chat", budget=48))
    rendered = tokenizer.apply_chat_template(cut, tokenize=False, add_generation_prompt=True)
    assert len(tokenizer(rendered)["input_ids"]) <= 48
    assert cut[1]["content"].endswith("Answer:") and "word0 " not in cut[1]["content"]  # left: the end stays
    assert not short_cut and long_cut  # the run's input_cut indicator


def test_sampling_fields_follow_the_request():
    greedy, extra = sampling_fields(GenerationRequest("p", 100, stop=("\n\n", "Question:")), settings())
    assert greedy == {"max_tokens": 16, "temperature": 0.0, "stop": ["\n\n", "Question:"]} and extra == {}
    sampled, extra = sampling_fields(GenerationRequest("p", 8, temperature=0.7, top_p=0.9, top_k=20, seed=5), settings())
    assert sampled == {"max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "seed": 5} and extra == {"top_k": 20}
    schema = json.dumps({"type": "object"})
    req = GenerationRequest("p", 8, json_schema=schema)
    assert "response_format" not in sampling_fields(req, settings())[0]  # the task did not ask for guided decoding
    fields, _ = sampling_fields(req, settings(guided=True))
    assert fields["response_format"] == {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}}
    assert sampling_fields(req, settings(guided=True, json_schema_field="guided_json"))[1] == {"guided_json": {"type": "object"}}


def test_loglikelihood_tokens_split_as_hf(tokenizer):
    seq, scored = loglikelihood_tokens(tokenizer, ChatFormat(), "The capital of France is ", "Paris", 64, 2)
    assert tokenizer.decode(scored) == " Paris"  # the context's trailing space moves to the continuation
    assert seq[-len(scored):] == scored and tokenizer.decode(seq) == "The capital of France is Paris"


def test_the_launch_command_is_filled_and_checked():
    argv = render_command("vllm serve {checkpoint} --port {port} --served-model-name '{served_model}'",
                          {"checkpoint": "/m/x y", "port": 8001, "served_model": "my model"})
    assert argv == ["vllm", "serve", "/m/x", "y", "--port", "8001", "--served-model-name", "my model"]
    with pytest.raises(ConfigError, match="placeholder") as err:
        render_command("serve {model_path}", {"checkpoint": "/m"})
    assert "{checkpoint}" in err.value.allowed


@pytest.mark.parametrize("overrides, message", [
    (["backend=openai"], "say where the server is"),
    (["backend=vllm", "backend.base_url=http://h:1/v1"], "say where the server is"),
    (["backend=openai", "backend.base_url=http://h:1/v1", "backend.endpoint=grpc"], "unknown endpoint"),
    (["backend=openai", "backend.base_url=http://h:1/v1", "backend.max_concurrency=0"], "request limits out of range"),
    (["backend=openai", "backend.base_url=http://h:1/v1", "task=json_mode_eval", "task.guided_decoding=xgrammar"],
     "guided decoding on an endpoint is the server's own"),
])
def test_config_mistakes_are_refused_when_the_backend_is_built(overrides, message, tmp_path):
    from runner.job.flow import typed
    from runner.job.prepare import prepare

    with pytest.raises(ConfigError, match=message):
        prepare(typed(compose([*overrides, "tracking=none", "reference.mode=skip", f"output_dir={tmp_path}"])))


def test_presets_compose_with_the_declared_spec_following_the_quant_option():
    cfg = compose(["backend=trtllm_serve", "quant=fp8"])
    assert cfg.backend.served_spec.quant_algo == "FP8" and cfg.backend.launch.command.startswith("trtllm-serve serve ")
    assert cfg.backend.prompt_format == "token_ids" and cfg.backend.launch.gpus == 1
    external = compose(["backend=vllm", "backend.launch.command=null", "backend.base_url=http://h:8000/v1"])
    assert external.backend.prompt_logprobs is True and external.backend.launch.command is None


def test_an_http_backend_leaves_the_gpus_of_a_sweep_alone(monkeypatch):
    from runner.sweep import gpus

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gpus, "visible_gpu_count", lambda: 4)
    openai = compose(["backend=openai", "backend.base_url=http://h:1/v1", "output_dir=/tmp/x"]).backend
    assert gpus.spread_over_gpus(OmegaConf.to_object(openai), job_num=3) is None
    assert "CUDA_VISIBLE_DEVICES" not in __import__("os").environ
    gpus.spread_over_gpus(OmegaConf.to_object(compose(["backend=vllm", "output_dir=/tmp/x"]).backend), job_num=3)  # a managed server takes its own GPU
    assert __import__("os").environ["CUDA_VISIBLE_DEVICES"] == "3"


def test_the_cache_context_keys_the_server_and_not_the_log_file():
    from runner.backends.openai.backend import OpenAIBackend
    from runner.cache.generations import settings_context
    from runner.contract.backend import TaskLimits

    limits, chat = TaskLimits(64, 8), ChatFormat()
    out = "output_dir=/tmp/runner-unused"

    def settings(overrides):
        cfg = OmegaConf.to_object(compose(["backend=openai", *overrides, out]))
        return settings_context(cfg.quant, cfg.backend, OpenAIBackend.answer_neutral_settings, limits, chat)

    a = settings(["backend.base_url=http://a:1/v1"])
    b = settings(["backend.base_url=http://b:1/v1"])
    c = settings(["backend.base_url=http://a:1/v1", "backend.launch.log_file=/x/s.log", "backend.timeout_s=5"])
    assert a != b and a == c
