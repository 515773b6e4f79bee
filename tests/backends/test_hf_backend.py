"""The backend contract, run against the hf backend on the real embedded model (float32 on CPU,
so batched and unbatched numerics agree to rounding)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runner.contract.backend import ChatFormat
from runner.contract.requests import GenerationRequest, LoglikelihoodRequest
from runner.backends.hf.backend import HFBackend, TaskLimits
from runner.contract.errors import ConfigError, ModelError
from runner.contract.task_config import ModelConfig, QuantConfig
from runner.backends.hf.backend import HFBackendConfig
from runner.backends.prompting import encode_pair, encode_request, render_prompt
from tests.conftest import ROOT, compose

SMOLLM2 = ModelConfig(name="smollm2_135m", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct", embedded="smollm2_135m_gguf")
NONE = QuantConfig(name="none")
SHARED = ("Answer each question with one word.\n\nQ: What colour is the sky on a clear day?\nA: Blue\n\n"
          "Q: What colour is fresh snow?\nA: White\n\n")
QUESTIONS = ["Q: What colour is grass?\nA:", "Q: What colour is a ripe banana?\nA:",
             "Q: What colour is coal, the black rock burned in old steam engines?\nA:", "Q: What colour is milk?\nA:"]


def backend(model: ModelConfig = SMOLLM2, **kw) -> HFBackend:
    limits = kw.pop("limits", TaskLimits(512, 16))
    config = HFBackendConfig(**({"dtype": "float32", "device": "cpu"} | kw))
    return HFBackend(config, model, NONE, limits, progress=False)


def two_layers(checkpoint) -> ModelConfig:
    """The embedded model cut to its first 2 layers (the ``two_layer_checkpoint`` fixture), loaded by
    ``model.path``: for checks of the backend's arithmetic against transformers' own on the same weights
    (batching, padding, shared prefixes), which do not depend on how many layers the model has."""
    return ModelConfig(name="smollm2_135m_2_layers", hf_id=SMOLLM2.hf_id, path=str(checkpoint))


@pytest.fixture(scope="module")
def hf():
    with backend(batch_size=8) as be:
        yield be


@pytest.fixture(scope="module")
def hf_2_layers(two_layer_checkpoint):
    """The backend on the embedded model cut to 2 layers, for checks that compare the backend with
    transformers' own arithmetic on the same weights (or with itself under other batches or seeds)."""
    with backend(two_layers(two_layer_checkpoint), batch_size=8) as be:
        yield be


def reference_logprob(be: HFBackend, context: str, continuation: str) -> float:
    """One unbatched, unpadded forward pass: the value every batching strategy must reproduce."""
    import torch

    ctx, cont = encode_pair(be._tokenizer, ChatFormat(), context, continuation)
    with torch.inference_mode():
        logits = be._model(torch.tensor([ctx + cont])).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    return sum(lp[len(ctx) - 1 + j, t].item() for j, t in enumerate(cont))


def test_info_reports_effective_spec_and_versions(hf):
    info = hf.info()
    assert info.spec.dtype == "float32"  # the checkpoint is bfloat16; float32 was asked for
    assert info.spec.quant_algo is None and info.spec.kv_cache_quant_algo is None
    assert {"torch", "transformers"} <= set(info.versions)
    assert info.device == "cpu"
    import torch

    # the fingerprint compares the thread count alone (where it came from is logged): two hosts that both run one
    # thread do not differ because one chose it and the other was told
    assert hf.host_fields()["threads"] == str(torch.get_num_threads())


def test_loglikelihood_matches_unbatched_forward_in_request_order(hf, hf_2_layers):
    """Each batched answer equals its own unbatched forward (on 2 layers: the order and the arithmetic are the
    backend's, whatever the depth); the embedded model ranks grass's colours as a reader would."""
    reqs = [LoglikelihoodRequest(SHARED + q, c) for q in QUESTIONS for c in (" Green", " Yellow", " Black")]
    reqs.append(LoglikelihoodRequest("Unrelated short context:", " yes"))
    results = hf_2_layers.loglikelihood(reqs)
    assert len(results) == len(reqs)
    for req, res in zip(reqs, results):
        assert res.logprob == pytest.approx(reference_logprob(hf_2_layers, req.context, req.continuation), abs=2e-3)
    green, yellow = hf.loglikelihood(reqs[:2])
    assert green.logprob > yellow.logprob  # grass: " Green" over " Yellow"
    (greedy,) = hf.generate([GenerationRequest(SHARED + QUESTIONS[0], 1)])
    (check,) = hf.loglikelihood([LoglikelihoodRequest(SHARED + QUESTIONS[0], greedy)])
    assert check.is_greedy  # the greedy continuation is, by definition, greedy


def test_prefix_cache_and_plain_batching_agree(two_layer_checkpoint):
    """On 2 layers: the two paths' arithmetic on the same weights, not the model's answers, is compared."""
    reqs = [LoglikelihoodRequest(SHARED + q, " White") for q in QUESTIONS]
    model = two_layers(two_layer_checkpoint)
    with backend(model, prefix_cache=False) as plain:
        a = [r.logprob for r in plain.loglikelihood(reqs)]
        greedy_plain = plain.generate([GenerationRequest(SHARED + q, 4, stop=("\n",)) for q in QUESTIONS])
    with backend(model, prefix_cache=True) as cached:
        b = [r.logprob for r in cached.loglikelihood(reqs)]
        greedy_cached = cached.generate([GenerationRequest(SHARED + q, 4, stop=("\n",)) for q in QUESTIONS])
    assert a == pytest.approx(b, abs=2e-3)
    assert greedy_plain == greedy_cached


def test_greedy_generation_equals_transformers_generate(hf_2_layers):
    """On 2 layers: the backend's batched decoding against transformers' generate on the same weights."""
    import torch

    be = hf_2_layers
    outs = be.generate([GenerationRequest(SHARED + q, 6) for q in QUESTIONS])
    for q, out in zip(QUESTIONS, outs):
        ids = be._tokenizer(SHARED + q, return_tensors="pt")
        with torch.inference_mode():
            ref = be._model.generate(**ids, max_new_tokens=6, do_sample=False)
        assert out == be._tokenizer.decode(ref[0, ids.input_ids.shape[1]:], skip_special_tokens=True)


def test_a_stopped_generation_hands_on_the_batches_it_finished(hf, monkeypatch):
    """SIGTERM mid-call (raised in the main thread, inside the third batch): the two answers computed
    before it travel with the error, for the generation cache to keep (the batches are scripted: what is
    checked is the bookkeeping around them, not the model)."""
    from runner.contract import stopping
    from runner.contract.errors import Terminated

    from dataclasses import replace

    monkeypatch.setattr(hf, "_budget", replace(hf._budget, rows=1))  # one request a batch
    computed: list[str] = []

    def batch(rows, reqs, *args, **kwargs):  # the model's place: one answer naming its prompt per batch
        if len(computed) == 2:
            raise Terminated("stopped by SIGTERM")
        computed.append(f"answer to {reqs[0].prompt}")
        return computed[-1:], [False]

    monkeypatch.setattr(hf, "_generate_batch", batch)
    asked = [GenerationRequest(q, 1) for q in QUESTIONS[:3]]
    with pytest.raises(Terminated) as caught:
        hf.generate(asked)
    kept = stopping.answered(caught.value)
    assert len(kept) == 2 and all(kept[i] == f"answer to {asked[i].prompt}" for i in kept)


def test_loglikelihood_reads_each_batch_after_launching_the_next_and_a_stop_keeps_what_was_read(hf, monkeypatch):
    """One request a batch: batch i's answers are read back after batch i+1 is launched (a GPU computes the next
    while the host reads this one), in request order and with the values of an unpipelined run; SIGTERM inside the
    fourth launch hands on the two batches already read (the third, launched but unread, is computed again). Values
    as in one batch of all four, up to the rounding that padding and batch shapes bring (1e-4 relative)."""
    from dataclasses import replace

    from runner.backends.hf import scoring
    from runner.contract import stopping
    from runner.contract.errors import Terminated

    asked = [LoglikelihoodRequest(q, " Green") for q in QUESTIONS[:4]]
    whole = hf.loglikelihood(asked)
    monkeypatch.setattr(hf, "_budget", replace(hf._budget, rows=1))
    events: list[str] = []
    prefill, batch_scores = hf._prefill, scoring.batch_scores

    def launch(rows, *args, **kwargs):
        events.append("launch")
        if events.count("launch") == 4 and stop:
            raise Terminated("stopped by SIGTERM")
        return prefill(rows, *args, **kwargs)

    def read(*args, **kwargs):
        events.append("read")
        return batch_scores(*args, **kwargs)

    monkeypatch.setattr(hf, "_prefill", launch)
    monkeypatch.setattr(scoring, "batch_scores", read)
    stop = False
    assert [r.logprob for r in hf.loglikelihood(asked)] == pytest.approx([r.logprob for r in whole], rel=1e-4)
    assert events == ["launch", "launch", "read", "launch", "read", "launch", "read", "read"]
    events.clear()
    stop = True
    with pytest.raises(Terminated) as caught:
        hf.loglikelihood(asked)
    kept = stopping.answered(caught.value)
    assert len(kept) == 2 and all(kept[i].logprob == pytest.approx(whole[i].logprob, rel=1e-4) for i in kept)
    assert events == ["launch", "launch", "read", "launch", "read", "launch"]  # the planned order: by length


def test_stop_strings_cut_the_output(hf):
    free, stopped = hf.generate([GenerationRequest(SHARED + QUESTIONS[0], 8),
                                 GenerationRequest(SHARED + QUESTIONS[0], 8, stop=("\n",))])
    assert "\n" in free
    assert stopped == free.split("\n")[0]


def test_each_text_says_whether_it_stopped_at_the_limit_and_its_prompt_was_cut(hf):
    """The facts the truncation-aware verdict reads (runner.contract.indicators): the free 8-token answer runs on
    past its one word ("\n" shown in it above), so it ends at the limit; cut at its stop string it does not; the
    prompt of 600 repeated words is longer than the 512-token budget (the tokenizer counts more than 512 ids)."""
    long_prompt = "filler " * 600 + QUESTIONS[0]
    assert len(hf._tokenizer(long_prompt)["input_ids"]) > 512
    free, stopped, cut = hf.generate([GenerationRequest(SHARED + QUESTIONS[0], 8),
                                      GenerationRequest(SHARED + QUESTIONS[0], 8, stop=("\n",)),
                                      GenerationRequest(long_prompt, 8, stop=("\n",))])
    assert len(hf._tokenizer(free, add_special_tokens=False)["input_ids"]) >= 7  # 8 ids, up to how they re-encode
    assert (free.facts.hit_limit, free.facts.input_cut) == (True, False)
    assert (stopped.facts.hit_limit, stopped.facts.input_cut) == (False, False)
    assert cut.facts.input_cut is True and not cut.facts.failed


def test_max_tokens_is_capped_by_the_task(hf):
    with backend(limits=TaskLimits(512, 2)) as short:
        (out,) = short.generate([GenerationRequest(SHARED + QUESTIONS[0], 50)])
        assert len(short._tokenizer(out, add_special_tokens=False)["input_ids"]) <= 2


def test_sampling_is_seeded_per_request_not_per_batch(hf_2_layers):
    """On 2 layers, whose sampled answers to these four questions, drawn with one seed, came out alike: each
    request has a seed of its own (7-10), so a draw that follows its row's place in the batch instead of its
    request shows in the reversed batch, and one generator for the whole batch shows against the answers alone."""
    be = hf_2_layers
    reqs = [GenerationRequest(SHARED + q, 8, temperature=1.0, seed=7 + i) for i, q in enumerate(QUESTIONS)]
    together = be.generate(reqs)
    assert len(set(together)) > 1  # the rows differ, so a mix-up of rows would show
    alone = [be.generate([r])[0] for r in reqs]
    reversed_ = be.generate(reqs[::-1])[::-1]
    assert together == alone == reversed_
    other_seed = be.generate([GenerationRequest(SHARED + q, 8, temperature=1.0, seed=17 + i)
                              for i, q in enumerate(QUESTIONS)])
    assert other_seed != together


def test_sampled_request_without_seed_is_refused(hf):
    with pytest.raises(ConfigError, match="seed"):
        hf.generate([GenerationRequest("x", 4, temperature=0.7)])


def test_long_prompts_keep_their_end():
    with backend(limits=TaskLimits(24, 4)) as tight:
        long_prompt = "filler " * 200 + "\nQ: What colour is grass?\nA:"
        (out,) = tight.generate([GenerationRequest(long_prompt, 4)])
        ids = tight._tokenizer(long_prompt, add_special_tokens=True)["input_ids"]
        assert len(encode_request(tight._tokenizer, ChatFormat(), GenerationRequest(long_prompt, 4), 24)) == 24
        (short,) = tight.generate([GenerationRequest(tight._tokenizer.decode(ids[-24:]), 4)])
    assert out == short


def test_constructor_is_light_and_validates():
    code = ("import sys; from runner.backends.hf.backend import HFBackend, HFBackendConfig, TaskLimits; from runner.contract.task_config import *;"
            "HFBackend(HFBackendConfig(), ModelConfig(name='m', hf_id='a/b'), QuantConfig(name='none'), TaskLimits(8, 2));"
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"
    with pytest.raises(ConfigError, match="backend.dtype"):
        backend(dtype="float8")
    with pytest.raises(ConfigError, match="backend.device"):
        HFBackend(HFBackendConfig(device="tpu"), SMOLLM2, NONE, TaskLimits(8, 2))
    with pytest.raises(ConfigError, match="quant"):
        HFBackend(HFBackendConfig(), SMOLLM2, QuantConfig(name="fp9", quant_algo="FP9"), TaskLimits(8, 2))
    for bad in ({"batch_size": 0}, {"max_batch_tokens": -1}, {"batch_call_cost_tokens": -1}):
        with pytest.raises(ConfigError, match="backend.batch_size / backend.max_batch_tokens"):
            HFBackend(HFBackendConfig(**bad), SMOLLM2, NONE, TaskLimits(8, 2))


def test_missing_model_path_is_a_model_error(tmp_path):
    missing = ModelConfig(name="x", hf_id="org/x", path=str(tmp_path / "nowhere"))
    with pytest.raises(ModelError, match="does not exist"):
        HFBackend(HFBackendConfig(device="cpu"), missing, NONE, TaskLimits(8, 2)).__enter__()


def test_chat_template_and_system_prompt_wrap_the_prompt():
    chat = ChatFormat(apply_chat_template=True, system_prompt="Answer with one word.")
    with HFBackend(HFBackendConfig(dtype="float32", device="cpu"), SMOLLM2, NONE, TaskLimits(512, 8), chat=chat,
                   progress=False) as be:
        text, add_special = render_prompt(be._tokenizer, chat, "What colour is grass?")
        assert add_special  # as TensorRT-LLM: the tokenizer adds its own on top (SmolLM2 adds none)
        assert be._tokenizer(text, add_special_tokens=True)["input_ids"] == be._tokenizer(text, add_special_tokens=False)["input_ids"]
        assert text.startswith("<|im_start|>system\nAnswer with one word.<|im_end|>\n<|im_start|>user\nWhat colour is grass?")
        assert text.endswith("<|im_start|>assistant\n")
        (out,) = be.generate([GenerationRequest("What colour is grass?", 8)])
        assert out.strip()  # the model answers inside its chat format
        ctx, cont = encode_pair(be._tokenizer, chat, "What colour is grass?", "Green")
        # as in lm-evaluation-harness, the context's trailing whitespace moves to the continuation
        assert be._tokenizer.decode(ctx + cont) == text + "Green"
        assert be._tokenizer.decode(cont) == "\nGreen"


@pytest.mark.parametrize("native_bf16", [True, False])
def test_auto_dtype_is_one_reference_key_on_every_cpu(native_bf16, monkeypatch):
    """The checkpoint is bfloat16: a CPU without bf16 arithmetic computes in float32, and the spec still says auto."""
    import runner.backends.hf.devices as hf_devices

    monkeypatch.setattr(hf_devices, "cpu_has_native_bf16", lambda: native_bf16)
    with backend(dtype="auto") as be:
        info = be.info()
    assert info.spec.dtype == "auto"
    assert info.details["checkpoint_dtype"] == "bfloat16"
    assert info.details["torch_dtype"] == ("bfloat16" if native_bf16 else "float32")
    assert info.details["batch_budget"] == "64 rows, 16384 tokens (CPU defaults)"
    with backend(dtype="float32") as be:  # chosen by hand: part of the key
        assert be.info().spec.dtype == "float32"


@pytest.mark.e2e
def test_a_sweep_worker_loads_a_model_once_per_spec(tmp_path, two_layer_checkpoint):
    """Consecutive jobs of one process on the same files, spec and dtype reuse the loaded model; another
    key (here the dtype; the quant spec is part of it the same way), or reuse_loaded_model=false, loads afresh.
    On the embedded model's first 2 layers (``model.path``): which model answered is checked, not the answers."""
    import json

    from runner.backends.hf import loaded
    from runner.job.flow import run

    loaded.forget()
    # two short ARC-Easy questions: what is checked is which model answered, not the answers
    base = ["task=arc_easy", f"model.path={two_layer_checkpoint}", "task.num_samples=2", "tracking=none",
            "reference.mode=skip", "cache=off"]

    def loaded_as(*extra: str) -> str:
        out = tmp_path / str(len(list(tmp_path.iterdir())))
        run(compose([*base, *extra, f"output_dir={out}"]))
        return json.loads((out / "report.json").read_text())["backend"]["details"]["loaded"]

    assert loaded_as() == "fresh"
    assert loaded_as("seed=1") == "reused"
    assert loaded_as("backend.reuse_loaded_model=false") == "fresh"
    assert loaded_as("seed=2") == "fresh"  # the job before kept nothing
    assert loaded.load_key("m", None, False, {"quant_algo": "W8A16"}, "auto", "cpu", "sdpa", True) != \
        loaded.load_key("m", None, False, {"quant_algo": None}, "auto", "cpu", "sdpa", True)  # another spec, another model
