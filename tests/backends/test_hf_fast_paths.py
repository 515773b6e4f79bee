"""The hf backend's fast paths give the answers of the plain path: each switch off vs on, on packaged
MMLU and GSM8K prompts. Greedy outputs identical; log-likelihoods equal to 1e-6 relative (single-token
continuations bit for bit). The 5-shot prompts run on a 2-layer random-weight model of the embedded
architecture (tests/helpers/micro_model.py: the embedded model's 30 layers would take tens of seconds); the
short ones on the embedded model itself."""

from __future__ import annotations

import pytest

from runner.backends.hf.backend import HFBackend, HFBackendConfig
from runner.backends.prompting import encode_request, encode_requests
from runner.backends.rolling import Rows
from runner.contract.backend import ChatFormat, TaskLimits
from runner.contract.build import build
from runner.contract.requests import GenerationRequest, LoglikelihoodRequest
from runner.contract.task_config import ModelConfig, QuantConfig
from runner.job.flow import typed
from tests.conftest import compose
from tests.helpers.decode_loop import greedy_steps
from tests.helpers.micro_model import micro_checkpoint

SMOLLM2 = ModelConfig(name="smollm2_135m", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct", embedded="smollm2_135m_gguf")
NONE = QuantConfig(name="none")
OFF = {"bulk_tokenize": False, "batch_scoring": False, "decode_aware_batching": False,  # every fast path switched off
       "preallocated_cache": False}


def task_requests(task: str, n: int, *overrides: str) -> list:
    """The requests of the first ``n`` seeded samples of a packaged task, as a job builds them."""
    evaluator = build(typed(compose([f"task={task}", "output_dir=/tmp/x", *overrides])).task, "task")
    return [r for s in evaluator.samples(n, 0)[:n] for r in evaluator.requests(s)]


@pytest.fixture(scope="module")
def micro(tmp_path_factory) -> ModelConfig:
    path = micro_checkpoint(tmp_path_factory.mktemp("micro"), hidden_size=96)
    return ModelConfig(name="micro", hf_id="local/micro", path=str(path))


def backend(model: ModelConfig, limits: TaskLimits, **kw) -> HFBackend:
    return HFBackend(HFBackendConfig(**({"dtype": "float32", "device": "cpu", "num_threads": 1} | kw)), model, NONE,
                     limits, progress=False)


def both(model: ModelConfig, limits: TaskLimits, ask) -> tuple:
    """``ask(backend)`` with the fast paths off, then on."""
    with backend(model, limits, **OFF) as plain:
        before = ask(plain)
    with backend(model, limits, decode_aware_batching=True) as fast:  # on CUDA by default; here asked for
        after = ask(fast)
    return before, after


def test_bulk_tokenization_gives_every_request_the_same_ids():
    from transformers import AutoTokenizer

    from runner.files.assets import smollm2_checkpoint

    tokenizer = AutoTokenizer.from_pretrained(smollm2_checkpoint())
    chat = ChatFormat()
    generation = task_requests("mmlu", 57) + task_requests("gsm8k", 8)
    generation.append(GenerationRequest("word " * 300, 4))  # over budget: truncated on the left, as one by one
    assert encode_requests(tokenizer, chat, generation, 512) == [encode_request(tokenizer, chat, r, 512)
                                                                  for r in generation]
    scored = task_requests("mmlu_0shot", 57) + [LoglikelihoodRequest("Trailing space ", "x"),
                                               LoglikelihoodRequest("", "a whole document")]
    assert Rows.of(tokenizer, chat, scored, 4094, 2, bulk=True).rows == Rows.of(tokenizer, chat, scored, 4094, 2).rows


def test_fast_paths_keep_5shot_greedy_answers_and_scores(micro):
    mmlu = task_requests("mmlu", 6)
    gsm8k = [GenerationRequest(r.prompt, 24, stop=r.stop) for r in task_requests("gsm8k", 3)]
    # sampled at temperature 1 from a random model's flat distributions: any change in a logit moves some token
    sampled = [GenerationRequest(r.prompt, 24, temperature=1.0, seed=7 + i) for i, r in enumerate(gsm8k)]
    letters = task_requests("mmlu", 3, "task.scoring=loglikelihood")
    multi = [LoglikelihoodRequest(r.context, " The answer is B.") for r in letters[:4]]

    def ask(be):
        return be.generate(mmlu), be.generate(gsm8k + sampled), be.loglikelihood(letters + multi)

    (mmlu_a, gsm_a, ll_a), (mmlu_b, gsm_b, ll_b) = both(micro, TaskLimits(4094, 256), ask)
    assert mmlu_a == mmlu_b and gsm_a == gsm_b
    assert len(set(gsm_a[len(gsm8k):])) == len(sampled)  # three different samples: the comparison has content
    assert [r.logprob for r in ll_b[:len(letters)]] == [r.logprob for r in ll_a[:len(letters)]]
    assert [r.logprob for r in ll_b] == pytest.approx([r.logprob for r in ll_a], rel=1e-6)
    assert [(r.is_greedy, r.num_tokens) for r in ll_b] == [(r.is_greedy, r.num_tokens) for r in ll_a]


def test_fast_paths_keep_the_embedded_models_answers():
    letters = task_requests("mmlu_0shot", 2)
    questions = [r.prompt.rsplit("Question:", 1)[-1] for r in task_requests("gsm8k", 2)]
    asked = [GenerationRequest("Question:" + q, 12, stop=("Question:",)) for q in questions]

    def ask(be):
        return be.loglikelihood(letters + [LoglikelihoodRequest(letters[0].context, " B because")]), be.generate(asked)

    (ll_a, gen_a), (ll_b, gen_b) = both(SMOLLM2, TaskLimits(1024, 12), ask)
    assert gen_a == gen_b
    assert [r.logprob for r in ll_b] == pytest.approx([r.logprob for r in ll_a], rel=1e-6)
    assert [r.is_greedy for r in ll_b] == [r.is_greedy for r in ll_a]


def test_a_preallocated_cache_gives_the_concatenated_caches_logits_bit_for_bit(micro):
    """Prefill and 8 decode steps with a shared 40-token prefix and unequal (left-padded) tails, and without a prefix:
    the preallocated cache (room for every step; room for half of them, so it grows once) gives exactly the logits
    of transformers' concatenating cache at every step."""
    import torch

    from runner.backends.hf import forward

    head = [(7 * i) % 500 + 10 for i in range(40)]
    rows = [head + [11, 12, 13, 14, 15], head + [21, 22], head + [31, 32, 33]]
    with backend(micro, TaskLimits(512, 8)) as be, torch.inference_mode():
        model = be.loaded[0]
        shared = forward.run_prefix(model, torch.device("cpu"), head)
        for prefix, cached in ((40, shared), (0, None)):
            plain = list(greedy_steps(model, rows, prefix, cached, 0, 8))
            for capacity in (45 + 8, 45 + 4):
                fast = list(greedy_steps(model, rows, prefix, cached, capacity, 8))
                assert all(torch.equal(a, b) for a, b in zip(plain, fast)), (prefix, capacity)
        assert type(forward.prefill(model, torch.device("cpu"), 0, rows, 1, 40, shared, 53)[1].layers[0]).__name__ \
            == "PreallocatedLayer"
