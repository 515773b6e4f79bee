"""Batch planning of the hf backend, and its exactness on the embedded model cut to 2 layers.

The planner's golden cuts are worked out by hand from its cost (rows x longest row + a per-call
cost); the exactness checks compare the backend's batched, prefix-shared answers with one plain
unpadded forward per question (float32), on MMLU prompts of two subjects plus 0-shot ones.
"""

from __future__ import annotations

import pytest

from runner.backends.hf import batching
from runner.backends.hf.batching import Limits, plan, split


def test_split_minimises_padding_plus_calls():
    # lengths 2,2,3,10 with a call cost of 5: [2,2,3] + [10] costs (5 + 3*3) + (5 + 10) = 29;
    # one batch 5 + 4*10 = 45; [2,2] [3] [10] = 9 + 8 + 15 = 32; each alone 7+7+8+15 = 37
    assert split([2, 2, 3, 10], ["a", "b", "c", "d"], Limits(64, 10_000, 5)) == [["a", "b", "c"], ["d"]]
    # free calls: every row alone has no padding at all
    assert split([3, 2, 4], [0, 1, 2], Limits(64, 10_000, 0)) == [[1], [0], [2]]
    # costly calls: one batch
    assert split([3, 2, 4], [0, 1, 2], Limits(64, 10_000, 100)) == [[1, 0, 2]]


def test_a_generation_batch_counts_its_decode_steps_as_calls():
    # lengths 2,2,3,10, call cost 5: the prefill alone is cut [2,2,3] + [10] (29, above). With 2 decode steps a
    # batch costs 15 in calls: [2,2,3] + [10] = 24 + 25 = 49 < one batch 15 + 40 = 55, still two; with 8 decode
    # steps 45: two batches 54 + 55 = 109 > one 45 + 40 = 85
    assert split([2, 2, 3, 10], "abcd", Limits(64, 10_000, 5, decode_calls=2)) == [["a", "b", "c"], ["d"]]
    assert split([2, 2, 3, 10], "abcd", Limits(64, 10_000, 5, decode_calls=8)) == [["a", "b", "c", "d"]]


def test_split_respects_row_and_token_budgets():
    for limits in (Limits(2, 10_000, 100), Limits(64, 12, 100)):  # 3 rows of 5 = 15 tokens > 12
        batches = split([5] * 5, list(range(5)), limits)
        assert sorted(len(b) for b in batches) == [1, 2, 2]
        assert sorted(i for b in batches for i in b) == [0, 1, 2, 3, 4]
    assert split([50], [0], Limits(64, 12, 100)) == [[0]]  # a row over the budget still runs, alone


def test_a_kv_position_cap_counts_the_shared_prefix_and_the_decode_steps():
    # four rows of 10 tail tokens after a 100-token prefix, 5 decode steps: each row holds 100 + 10 + 5 = 115 KV
    # positions, so a cap of 230 fits two rows a batch and 229 one; without growth 110 a row, so 220 fits two
    limits = Limits(64, 10_000, 100, max_cache_tokens=230, cache_growth=5)
    assert split([10] * 4, "abcd", limits, prefix=100) == [["a", "b"], ["c", "d"]]
    assert split([10] * 4, "abcd", Limits(64, 10_000, 1_000, max_cache_tokens=229, cache_growth=5),
                 prefix=100) == [["a"], ["b"], ["c"], ["d"]]
    assert split([10] * 4, "abcd", Limits(64, 10_000, 1_000, max_cache_tokens=220), prefix=100) == [["a", "b"], ["c", "d"]]
    assert split([10] * 4, "abcd", Limits(64, 10_000, 1_000), prefix=100) == [["a", "b", "c", "d"]]  # no cap
    # through plan(): the prefix a group shares is what its batches count
    head = list(range(100, 200))
    rows = [head + [i] * 10 for i in range(4)]
    groups = plan(rows, [0, 1, 2, 3], [1] * 4, Limits(64, 10_000, 100, max_cache_tokens=230, cache_growth=5))
    assert [(g.prefix, [len(b) for b in g.batches]) for g in groups] == [(100, [2, 2])]


def test_batch_budgets_for_a_cpu_and_for_a_gpu_from_its_memory():
    from runner.backends.hf.devices import GIB, BatchBudget, ModelShape, cuda_budget

    # an 80 GiB card and an 8B-like model: 16 GiB of weights, 128 KiB of KV and 150 KiB of activations and logits a
    # token. Left for batches: 0.9 x 80 - 16 - 1 = 55 GiB; KV 0.6 x 55 GiB / 128 KiB = 270336 positions;
    # tokens 0.3 x 55 GiB / 150 KiB = 115343 (rounded down)
    shape = ModelShape(16 * GIB, 128 * 1024, 150 * 1024)
    free = int(0.9 * 80 * GIB) - 17 * GIB
    assert free == 55 * GIB
    budget = cuda_budget(80 * GIB, shape, None, None)
    assert budget.cache_tokens == int(0.6 * free) // (128 * 1024) == 270336
    assert budget.tokens == int(0.3 * free) // (150 * 1024) == 115343
    assert budget.rows == 256 and "80.0 GiB" in budget.describe()
    # what the user set stays; a tiny model's token budget stops at 262144, a huge one's never below a CPU's 16384
    assert cuda_budget(80 * GIB, shape, 32, 4096) == BatchBudget(32, 4096, 270336, budget.source)
    assert cuda_budget(141 * GIB, ModelShape(GIB // 4, 23040, 18432), None, None).tokens == 262144
    assert cuda_budget(24 * GIB, ModelShape(20 * GIB, 128 * 1024, 10 ** 6), None, None).tokens == 16384


def test_the_embedded_models_shape_in_memory():
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from runner.backends.hf.devices import model_shape
    from runner.files.assets import smollm2_checkpoint

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(smollm2_checkpoint()), dtype=torch.bfloat16)
    shape = model_shape(model, 2)
    # SmolLM2-135M: 30 layers, 3 KV heads of 64, hidden 576, MLP 1536, vocabulary 49152, tied embeddings.
    # Parameters: embeddings 49152 x 576 = 28,311,552; a layer q,o 576^2 each, k,v 576 x 192 each, gate/up/down
    # 576 x 1536 each, two norms of 576 = 3,540,096; 30 layers + a final norm: 134,515,008, 2 bytes each
    assert shape.weight_bytes == 2 * 134_515_008
    assert shape.kv_bytes_per_token == 2 * 30 * 3 * 64 * 2 == 23040
    assert shape.activation_bytes_per_token == 2 * (8 * 576 + 3 * 1536) + 10 * 49152


def test_plan_shares_long_prefixes_and_keeps_scored_tokens_out_of_them():
    head = list(range(100, 140))  # 40 shared tokens
    rows = [head + [1, 2], head + [3], head[:20] + [9], [7, 7, 7]]
    groups = plan(rows, [0, 1, 2, 3], [1, 1, 1, 1], Limits(64, 10_000, 0))
    shared = [g for g in groups if g.prefix]
    assert [g.prefix for g in shared] == [40]
    assert sorted(i for b in shared[0].batches for i in b) == [0, 1]
    (loners,) = [g for g in groups if not g.prefix]
    assert sorted(i for b in loners.batches for i in b) == [2, 3]
    # row 1's last token is scored: the prefix stops before it
    groups = plan([head + [1], head], [0, 1], [2, 1], Limits(64, 10_000, 0))
    assert [g.prefix for g in groups] == [39]
    assert plan(rows, [0, 1], [1, 1], Limits(64, 10_000, 0, share_prefix=False))[0].prefix == 0


def test_rows_sharing_a_short_head_share_it_when_it_saves_more_than_a_call():
    head = [5] * 10
    rows = [head + [1, 2], head + [3], head + [4, 4, 4]]
    # 10 tokens x 2 rows saved = 20 > a call of 16 tokens: shared; a call of 20 or more: not
    assert [g.prefix for g in plan(rows, [0, 1, 2], [1, 1, 1], Limits(64, 10_000, 16))] == [10]
    assert [g.prefix for g in plan(rows, [0, 1, 2], [1, 1, 1], Limits(64, 10_000, 20))] == [0]
    assert batching.MIN_SHARED_PREFIX == 32


def test_a_long_prefix_is_shared_only_where_the_positions_it_saves_outweigh_its_call():
    # a 40-token head: 2 rows save 40 positions, less than a call of 64: not shared; 3 rows save 80: shared
    head = list(range(100, 140))
    rows = [head + [i] * 50 for i in range(3)]
    assert not batching.pays(40, 2, Limits(64, 10_000, 64)) and batching.pays(40, 3, Limits(64, 10_000, 64))
    assert [g.prefix for g in plan(rows, [0, 1], [1] * 2, Limits(64, 10_000, 64))] == [0]
    assert [g.prefix for g in plan(rows, [0, 1, 2], [1] * 3, Limits(64, 10_000, 64))] == [40]


@pytest.fixture(scope="module")
def mmlu_prompts():
    from evaluators.tasks.mmlu import MMLUEvaluator, MMLUTaskConfig

    prompts = []
    for shots in (1, 0):
        config = MMLUTaskConfig(_target_="evaluators.tasks.mmlu.MMLUEvaluator", name="mmlu", num_samples=171,
                                scoring="loglikelihood", num_fewshot=shots)
        samples = MMLUEvaluator(config).samples(171, 0)
        prompts += [s.prompt for s in samples if s.meta["subject"] in ("anatomy", "astronomy")]
    # 2 subjects x 3 questions, 1-shot then 0-shot: one worked example is a shared prefix of 83 and 103 tokens
    # (over batching.MIN_SHARED_PREFIX) with question tails of different lengths, so the padded batch pads 16
    # tokens; five examples would only make every forward pass 2-3 times longer
    return prompts


@pytest.mark.e2e
def test_batched_prefix_shared_answers_equal_plain_forwards(mmlu_prompts, two_layer_checkpoint):
    """On the embedded model cut to 2 layers: the check is the backend's batched, padded, prefix-shared
    arithmetic against transformers' plain forward and generate on the same weights, which the layer count does
    not change (a wrong position, mask or cached prefix moves the logprobs far past 1e-4 on any depth)."""
    import torch

    from runner.contract.requests import GenerationRequest, LoglikelihoodRequest
    from runner.contract.backend import TaskLimits
    from tests.backends.test_hf_backend import backend, two_layers

    letters = [" A", " B", " C", " D"]
    # batches of 2 rows: a subject's 3 questions run in two batches (one padded) over one few-shot
    # prefix; a call cheap enough (24 tokens) makes the 0-shot questions share their header
    with backend(two_layers(two_layer_checkpoint), batch_size=2, batch_call_cost_tokens=24,
                 limits=TaskLimits(4094, 2)) as be:
        results = be.loglikelihood([LoglikelihoodRequest(p, c) for p in mmlu_prompts for c in letters])
        outputs = be.generate([GenerationRequest(p, 2) for p in mmlu_prompts])
        groups = be._plan([be._tokenizer(p)["input_ids"] for p in mmlu_prompts], list(range(12)), [1] * 12)
        assert sorted((g.prefix >= batching.MIN_SHARED_PREFIX, len(g.batches)) for g in groups) == \
            [(False, 3), (True, 2), (True, 2)]
        assert all(g.prefix > 0 for g in groups)
        for q, prompt in enumerate(mmlu_prompts):
            if q in (3, 4):  # the second subject's padded batch, planned as the first's (q=0, 2), which is checked
                continue
            ids = be._tokenizer(prompt, return_tensors="pt")
            with torch.inference_mode():  # one plain greedy generate; its first step is the plain forward's logits
                plain = be._model.generate(**ids, max_new_tokens=2, do_sample=False, output_logits=True,
                                           return_dict_in_generate=True)
                last = torch.log_softmax(plain.logits[0][0].float(), -1)
                greedy = plain.sequences
            expected = [last[be._tokenizer(c, add_special_tokens=False)["input_ids"][0]].item() for c in letters]
            got = [r.logprob for r in results[4 * q:4 * q + 4]]
            assert got == pytest.approx(expected, abs=1e-4)
            assert max(range(4), key=got.__getitem__) == max(range(4), key=expected.__getitem__)
            assert outputs[q] == be._tokenizer.decode(greedy[0, ids.input_ids.shape[1]:], skip_special_tokens=True)
