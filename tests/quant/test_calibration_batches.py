"""Calibration in batches: rows grouped into forward calls give ModelOpt the statistics of one row per call.

The calibrated quantizer state (amax, AWQ pre-quant scales, SmoothQuant scales, the smoothed weights) of
a tiny random-weight Llama is compared between one row per call with every logit computed (the
path before batching) and the batched path; a batching that breaks the equal-size rule is shown to
change AWQ's result, so the comparison can fail.
"""

from __future__ import annotations

import copy

import pytest
import torch

from runner.contract.task_config import QuantConfig
from runner.quant import modelopt as hf_quant
from runner.quant.calibration import MMAP_THRESHOLD_MAX, calibration_batches, calibration_budget, cpu_call_tokens
from tests.conftest import needs

pytestmark = needs("torch", "modelopt", reason="pip install nvidia-modelopt (the [quant] extra)")

WIDTH = 16


def test_rows_of_one_length_go_in_equal_calls_within_the_budget():
    rows = [[i] * 100 for i in range(12)]
    assert [len(b) for b in calibration_batches(rows, 500)] == [4, 4, 4]  # 5 fit; 4 is the largest divisor of 12
    assert [len(b) for b in calibration_batches(rows, 100_000)] == [12]
    assert [len(b) for b in calibration_batches(rows, 99)] == [1] * 12  # a row larger than the budget still runs
    assert [len(b) for b in calibration_batches(rows[:7], 600)] == [1] * 7  # 7 is prime: no equal split under 6
    assert sum(calibration_batches(rows, 500), []) == rows  # order kept, nothing dropped
    short_tail = rows[:5] + [[9] * 40]
    assert calibration_batches(short_tail, 100_000) == [[row] for row in short_tail]
    assert calibration_batches([], 100) == []


def test_a_cpu_call_keeps_its_widest_float32_activation_within_the_mmap_threshold():
    from types import SimpleNamespace

    smollm2 = SimpleNamespace(hidden_size=576, intermediate_size=1536)  # the embedded model's config.json
    # 32 MiB / (1536 values x 4 bytes) = 5461 tokens: 10 rows of 512, and 8 the largest divisor of 512 rows
    assert calibration_budget(16384, "cpu", smollm2) == 5461
    rows = [[1] * 512] * 512
    assert {len(b) for b in calibration_batches(rows, calibration_budget(16384, "cpu", smollm2))} == {8}
    assert calibration_budget(2048, "cpu", smollm2) == 2048  # a smaller budget the user set stays
    assert calibration_budget(16384, "cuda", smollm2) == 16384  # a GPU's memory is not malloc's
    assert cpu_call_tokens(1536) * 1536 * 4 <= MMAP_THRESHOLD_MAX < (cpu_call_tokens(1536) + 1) * 1536 * 4
    assert cpu_call_tokens(10 ** 9) == 1  # a huge layer still runs one token a call
    assert calibration_budget(16384, "cpu", SimpleNamespace(hidden_size=4096)) == 512  # 32 MiB / (4 x 4096 x 4 B)


@pytest.fixture(scope="module")
def setup():
    from transformers import LlamaConfig, LlamaForCausalLM

    mtq = hf_quant.import_modelopt()[0]
    config = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True)

    def model():
        torch.manual_seed(0)
        return LlamaForCausalLM(config).eval()

    rows = torch.randint(0, 96, (4, WIDTH), generator=torch.Generator().manual_seed(1)).tolist()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads only add contention on a shared host
    yield mtq, model, rows
    torch.set_num_threads(threads)


def calibrated(setup, quant: QuantConfig, budget: int) -> dict:
    mtq, model, rows = setup
    cfg, _ = hf_quant.modelopt_config(quant, mtq)
    done = hf_quant.run_calibration(model(), copy.deepcopy(cfg), rows, budget, torch.device("cpu"), mtq, False)
    return {k: v.detach().clone() for k, v in done.state_dict().items()}


def worst_relative(a: dict, b: dict) -> float:
    assert sorted(a) == sorted(b)
    return max(((a[k] - b[k]).abs().max() / a[k].abs().max().clamp_min(1e-30)).item() for k in a)


@pytest.mark.parametrize("quant", [
    QuantConfig(name="fp8_kv", quant_algo="FP8", kv_cache_quant_algo="FP8"),
    QuantConfig(name="int8_sq", quant_algo="W8A8_SQ_PER_CHANNEL", smoothquant_alpha=1.0),
    QuantConfig(name="w4a16_awq", quant_algo="W4A16_AWQ", group_size=32),
], ids=lambda q: q.name)
def test_batched_calibration_matches_one_row_per_call(setup, quant, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(hf_quant, "_head_is_quantized", lambda model: True)  # every logit, as one row per call computed
        one_row = calibrated(setup, quant, WIDTH)
    state = calibrated(setup, quant, 4 * WIDTH)
    assert any("quantizer._amax" in k for k in state)
    assert worst_relative(one_row, state) < 1e-5
    if quant.quant_algo == "W4A16_AWQ":
        assert any("_pre_quant_scale" in k for k in state)
        rows = setup[2]
        monkeypatch.setattr(hf_quant, "calibration_batches", lambda r, budget: [rows[:3], rows[3:]])
        assert worst_relative(one_row, calibrated(setup, quant, 0)) > 1e-3  # unequal calls shift AWQ's averages
