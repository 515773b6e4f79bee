"""The backend contract, run against every backend that is available here.

What the job and the evaluators rely on, whatever computes the answers:
- results come back in request order, and do not depend on which requests share a call;
- a stop string cuts the output, and ``max_tokens`` is capped by the task's ``max_output_len``;
- a prompt longer than ``max_input_len`` keeps its last tokens;
- a sampled request is reproducible from its seed alone, and refused without one;
- log-likelihood requests are answered in order, or refused up front (``capabilities.loglikelihood``);
- ``info()`` reports the effective spec; unknown algorithms are refused when the backend is built.

Each backend's test class subclasses :class:`BackendContract` (as Hydra's launcher plugins share one
test suite). ``fake`` is the scripted backend. ``hf`` runs on the embedded SmolLM2-135M (CPU, float32, a few tokens per request). The TensorRT-LLM
backends run when ``tensorrt_llm`` imports, on a GPU host (markers ``trtllm`` and ``gpu``), with the
model in ``RUNNER_TRTLLM_TEST_MODEL`` or else the embedded SmolLM2 (a Llama architecture)::

    .venv/bin/python -m pytest -m trtllm tests/backends/test_backend_contract.py

Their translation layer is tested on any machine against a double in ``tests/backends/test_trtllm_backend.py``.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from runner.contract.requests import GenerationRequest, LoglikelihoodRequest
from runner.contract.backend import TaskLimits
from runner.contract.errors import ConfigError
from runner.contract.task_config import ModelConfig, QuantConfig

LIMITS = TaskLimits(max_input_len=64, max_output_len=8, max_batch_size=8)
SMOLLM2 = ModelConfig(name="smollm2_135m", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct", embedded="smollm2_135m_gguf")
NONE = QuantConfig(name="none")
HAVE_TRTLLM = importlib.util.find_spec("tensorrt_llm") is not None

PROMPTS = ["The capital of France is", "1, 2, 3, 4,", "Monday, Tuesday,", "The opposite of hot is", "Water freezes at"]


def make(kind: str, quant: QuantConfig = NONE, limits: TaskLimits = LIMITS, base_url: str | None = None):
    """An un-entered backend of ``kind`` for the test model (``openai``: the server at ``base_url``)."""
    if kind == "fake":
        from runner.backends.fake import FakeBackend, FakeBackendConfig

        return FakeBackend(FakeBackendConfig(), SMOLLM2, quant, limits)
    if kind == "hf":
        from runner.backends.hf.backend import HFBackend
        from runner.backends.hf.backend import HFBackendConfig

        return HFBackend(HFBackendConfig(device="cpu", dtype="float32"), SMOLLM2, quant, limits, progress=False)
    if kind == "openai":  # the embedded model served by `transformers serve` (tests/conftest.py: served_model)
        from runner.backends.openai.backend import OpenAIBackend
        from runner.backends.openai.config import OpenAIBackendConfig, ServedSpec

        config = OpenAIBackendConfig(base_url=f"{base_url}/v1",
                                     served_spec=ServedSpec(dtype="float32", quant_algo=None, kv_cache_quant_algo=None),
                                     per_request_seeds=False)  # transformers serve decodes greedily, whatever is asked
        return OpenAIBackend(config, SMOLLM2, quant, limits, progress=False)
    path = os.environ.get("RUNNER_TRTLLM_TEST_MODEL")
    model = ModelConfig(name="contract", hf_id="contract", path=path) if path else SMOLLM2
    if kind == "trtllm":
        from runner.backends.trtllm.engine import TRTLLMEngineBackend
        from runner.backends.trtllm.engine import TRTLLMBackendConfig

        return TRTLLMEngineBackend(TRTLLMBackendConfig(max_num_tokens=1024), model, quant, limits, progress=False)
    from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackend
    from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackendConfig

    return TRTLLMPyTorchBackend(TRTLLMPyTorchBackendConfig(max_num_tokens=1024), model, quant, limits, progress=False)


@pytest.fixture(scope="class")
def backend(request, tmp_path_factory):
    """One entered backend per test class (loading is the slow part)."""
    kind = request.cls.kind
    with pytest.MonkeyPatch.context() as mp:
        if kind.startswith("trtllm"):  # engines go to a temporary cache
            mp.setenv("RUNNER_CACHE_DIR", str(tmp_path_factory.mktemp("engines")))
        base_url = request.getfixturevalue("served_model") if kind == "openai" else None
        with make(kind, base_url=base_url) as entered:
            yield entered


class WordTokenizer:
    """The fake backend's tokens are words."""

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": list(range(len(text.split())))}


@pytest.fixture(scope="class")
def tokenizer(backend):
    if backend.name == "fake":
        return WordTokenizer()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(backend.info().model_path)


def greedy(prompt: str, max_tokens: int = 4, **kw) -> GenerationRequest:
    return GenerationRequest(prompt, max_tokens, **kw)


# ---------------------------------------------------------------------------- the contract
class BackendContract:
    """The shared suite: every backend's test class subclasses it and names its ``kind``."""

    kind = ""

    def test_info_reports_the_effective_spec(self, backend):
        info = backend.info()
        assert info.name == backend.name
        assert (info.spec.quant_algo, info.spec.kv_cache_quant_algo) == (None, None)  # quant=none loads unquantized
        assert info.versions and info.model_path and info.device

    def test_results_keep_request_order_and_do_not_depend_on_the_batch(self, backend):
        requests = [greedy(p) for p in PROMPTS]
        together = backend.generate(requests)
        assert len(together) == len(requests) and all(isinstance(t, str) for t in together)
        assert backend.generate(requests[::-1]) == together[::-1]
        assert [backend.generate([r])[0] for r in requests[:2]] == together[:2]
        assert backend.generate([]) == []

    def test_stop_strings_cut_and_max_tokens_is_capped(self, backend, tokenizer):
        lines = backend.generate([greedy("1\n2\n3\n4\n", max_tokens=8, stop=("\n",))])[0]
        assert "\n" not in lines
        long = backend.generate([greedy("Once upon a time", max_tokens=500)])[0]
        capped = backend.generate([greedy("Once upon a time", max_tokens=3)])[0]
        assert len(tokenizer(long, add_special_tokens=False)["input_ids"]) <= LIMITS.max_output_len + 1
        assert len(tokenizer(capped, add_special_tokens=False)["input_ids"]) <= 3 + 1  # re-encoding may split a token
        assert long.startswith(capped)  # greedy: a shorter budget is a prefix

    def test_prompts_longer_than_max_input_len_keep_their_end(self, backend, tokenizer):
        tail = " ".join(f"item {i}," for i in range(40))  # well over 64 tokens on its own
        assert len(tokenizer(tail, add_special_tokens=False)["input_ids"]) > LIMITS.max_input_len
        a, b = backend.generate([greedy("Alpha beta gamma. " + tail), greedy("Completely different start! " + tail)])
        assert a == b  # only the last max_input_len tokens were seen

    def test_sampling_is_reproducible_from_the_seed_alone(self, backend):
        def sampled(seed: int) -> GenerationRequest:
            return GenerationRequest("Once upon a time", 8, temperature=1.0, seed=seed)

        with pytest.raises(ConfigError, match="explicit seed"):
            backend.generate([GenerationRequest("Once upon a time", 8, temperature=1.0)])
        if not backend.capabilities.per_request_seeds:
            return  # declared: the generation cache keeps its sampled answers out (tests/cache)
        first = backend.generate([sampled(1), sampled(2), sampled(3), sampled(4)])
        again = backend.generate([greedy("filler"), sampled(3), sampled(1)])
        assert again[1:] == [first[2], first[0]]  # same seed, same text, whatever the batch
        assert len(set(first)) >= 2  # and the seed matters

    def test_loglikelihood_is_answered_in_order_or_refused_up_front(self, backend):
        requests = [LoglikelihoodRequest("The capital of France is", " Paris"),
                    LoglikelihoodRequest("The capital of France is", " Berlin"),
                    LoglikelihoodRequest("1, 2, 3, 4,", " 5")]
        if not backend.capabilities.loglikelihood:
            with pytest.raises(ConfigError, match="task.scoring=generate"):
                backend.loglikelihood(requests)
            return
        results = backend.loglikelihood(requests)
        assert len(results) == 3 and all(r.logprob < 0 and r.num_tokens >= 1 for r in results)
        assert backend.loglikelihood(requests[::-1])[0].logprob == pytest.approx(results[2].logprob, abs=1e-4)


class TestHF(BackendContract):
    kind = "hf"

    def test_smollm2_knows_its_capitals(self, backend):
        results = backend.loglikelihood([LoglikelihoodRequest("The capital of France is", " Paris"),
                                         LoglikelihoodRequest("The capital of France is", " Berlin"),
                                         LoglikelihoodRequest("1, 2, 3, 4,", " 5")])
        assert [r.num_tokens for r in results] == [1, 1, 2]  # SmolLM2: " Paris", " Berlin"; " " + "5"
        assert results[0].logprob > results[1].logprob  # Paris over Berlin, in request order


@pytest.mark.e2e
class TestOpenAI(BackendContract):
    """A real OpenAI-compatible server: ``transformers serve`` on the embedded model, float32 on the CPU, the one
    the test run shares (tests/conftest.py: ``served_model``; the managed mode that starts and stops a server of
    the job's own is tested in tests/backends/test_openai_endpoint.py)."""

    kind = "openai"

    def test_the_server_answers_what_hf_computes_in_process(self, backend):
        with make("hf") as local:
            requests = [greedy(p, max_tokens=6) for p in PROMPTS]
            assert backend.generate(requests) == local.generate(requests)


class TestFake(BackendContract):
    kind = "fake"


@pytest.mark.trtllm
@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_TRTLLM, reason="tensorrt_llm is not installed")
class TestTRTLLMEngine(BackendContract):
    kind = "trtllm"


@pytest.mark.trtllm
@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_TRTLLM, reason="tensorrt_llm is not installed")
class TestTRTLLMPyTorch(BackendContract):
    kind = "trtllm_pytorch"


@pytest.mark.parametrize("kind", ["hf", "trtllm", "trtllm_pytorch"])
def test_unknown_algorithms_are_refused_when_the_backend_is_built(kind):
    """Construction needs no library and no model, so every backend checks this everywhere."""
    with pytest.raises(ConfigError, match="quant_algo"):
        make(kind, QuantConfig(name="bad", quant_algo="FP9"))
    with pytest.raises(ConfigError, match="kv_cache_quant_algo"):
        make(kind, QuantConfig(name="bad_kv", kv_cache_quant_algo="INT3"))
