"""The shipped references against TensorRT-LLM's newest tables, and the explicit-floor keys.

Every expected value below was typed by hand from upstream's files (NVIDIA/TensorRT-LLM
tests/integration/defs/accuracy/references/<task>.yaml at the commits noted in each shipped file's
header), and every expected threshold was worked out by hand from accuracy_core.py's rule
(reference + z(alpha) sqrt(2 sigma^2 / n), z(0.05) = -1.6448536, z(0.002) = -2.878162); none is read
back through the loader under test.
"""

from __future__ import annotations

import io
import json
import textwrap
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from runner.commands import plan
from runner.contract.errors import ReferenceError_
from runner.contract.spec import AccuracySpec
from runner.references.store import default_reference_dir, lookup
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics.ztest import compute_threshold

MMLU = HypothesisParams(alpha=0.05, beta=0.2, sigma=50.0, num_samples=4096)
GSM8K = HypothesisParams(alpha=0.05, beta=0.2, sigma=50.0, num_samples=1319)
GPQA = HypothesisParams(alpha=0.05, beta=0.2, sigma=50.0, num_samples=198)
CNN = HypothesisParams(alpha=0.002, beta=0.2, sigma=11.06, num_samples=512)
JSON_MODE = HypothesisParams(alpha=0.05, beta=0.2, sigma=50.0, num_samples=100)

# (task, metric, defaults, model, spec, upstream's value, hand-computed threshold)
SAMPLE = [
    ("mmlu", "accuracy", MMLU, "meta-llama/Llama-3.3-70B-Instruct", AccuracySpec(quant_algo="FP8"), 80.40, 78.5827),
    ("mmlu", "accuracy", MMLU, "Qwen3/Qwen3-8B", AccuracySpec(), 76.12, 74.3027),
    ("mmlu", "accuracy", MMLU, "Qwen3/Qwen3-30B-A3B", AccuracySpec(quant_algo="W4A16_MXFP4"), 79.80, 77.9827),
    ("mmlu", "accuracy", MMLU, "deepseek-ai/DeepSeek-V3-Lite",
     AccuracySpec(quant_algo="FP8_BLOCK_SCALES", spec_dec_algo="MTP"), 71.29, 69.4727),
    ("mmlu", "accuracy", MMLU, "meta-llama/Llama-3.1-8B",
     AccuracySpec(quant_algo="MIXED_PRECISION", extra_acc_spec="autoq_format=int4_awq,fp8,w4a8_awq;auto_quantize_bits=5.8"),
     64.99, 63.1727),
    ("mmlu", "accuracy", MMLU, "google/gemma-3-27b-it", AccuracySpec(quant_algo="FP8", kv_cache_quant_algo="FP8"), 76.80, 74.9827),
    ("gsm8k", "accuracy", GSM8K, "nvidia/Llama-3_3-Nemotron-Super-49B-v1", AccuracySpec(), 92.57, 89.3676),
    ("gsm8k", "accuracy", GSM8K, "deepseek-ai/DeepSeek-R1",
     AccuracySpec(quant_algo="FP8_BLOCK_SCALES", kv_cache_quant_algo="FP8", spec_dec_algo="MTP"), 95.413, 92.2106),
    ("gpqa_diamond", "accuracy", GPQA, "meta-llama/Llama-3.3-70B-Instruct",
     AccuracySpec(quant_algo="NVFP4", kv_cache_quant_algo="FP8"), 45.55, 37.2843),
    ("cnn_dailymail", "rouge1", CNN, "mistralai/Mixtral-8x7B-v0.1", AccuracySpec(quant_algo="W8A16"), 27.624, 25.6345),
    ("cnn_dailymail", "rouge1", CNN, "lmsys/vicuna-7b-v1.3", AccuracySpec(dtype="float16", spec_dec_algo="Medusa"),
     33.419, 31.4295),
    ("json_mode_eval", "accuracy", JSON_MODE, "deepseek-ai/DeepSeek-V3-Lite", AccuracySpec(spec_dec_algo="MTP"), 77.00, 65.3691),
]


@pytest.mark.parametrize("task,metric,defaults,model,spec,value,threshold", SAMPLE, ids=lambda v: str(v)[:30])
def test_shipped_entries_match_upstream(task, metric, defaults, model, spec, value, threshold) -> None:
    ref = lookup(default_reference_dir(), task, metric, model, spec, defaults)
    assert ref.value == value
    assert ref.threshold is None  # upstream registers no explicit floor for these
    p = ref.params
    assert compute_threshold(ref.value, p.num_samples, p.sigma, p.alpha, p.higher_is_better) == pytest.approx(threshold, abs=1e-3)


def test_first_match_keeps_upstream_order_and_per_entry_overrides() -> None:
    d = default_reference_dir()
    # gpt2 beam_width=256 carries num_samples: 32 upstream
    ref = lookup(d, "cnn_dailymail", "rouge1", "gpt2", AccuracySpec(extra_acc_spec="beam_width=256"), CNN)
    assert (ref.value, ref.params.num_samples) == (29.422, 32)
    # humaneval keeps upstream's rouge figures under rouge1 with its sigma 15.08
    ref = lookup(d, "humaneval", "rouge1", "bigcode/starcoder2-3b", AccuracySpec(), CNN)
    assert (ref.value, ref.params.sigma) == (30.339, 15.08)


def test_upstream_comments_are_reference_notes() -> None:
    ref = lookup(default_reference_dir(), "gpqa_diamond", "accuracy", "nvidia/Llama-3_3-Nemotron-Super-49B-v1",
                 AccuracySpec(quant_algo="FP8", kv_cache_quant_algo="FP8"), GPQA)
    assert ref.value == 42.42 and "7 repeated evaluations" in ref.note


def _refs(tmp_path: Path, entry: str) -> Path:
    text = "org/model:\n  - accuracy: 70.0\n" + textwrap.indent(textwrap.dedent(entry), "  ")
    (tmp_path / "mmlu.yaml").write_text(text, encoding="utf-8")
    return tmp_path


def test_threshold_override_is_the_explicit_floor_in_plan(tmp_path: Path) -> None:
    d = _refs(tmp_path, """\
        - quant_algo: FP8
          accuracy: 69.0
          threshold_override: 65.5
          reference_note: floor agreed after a known tokenizer change
        """)
    ref = lookup(d, "mmlu", "accuracy", "org/model", AccuracySpec(quant_algo="FP8"), MMLU)
    assert (ref.value, ref.threshold) == (69.0, 65.5)
    assert ref.note == "floor agreed after a known tokenizer change"
    out = io.StringIO()
    with redirect_stdout(out):
        assert plan.main(["--task", "mmlu", "--model", "org/model", "--quant-algo", "FP8",
                          "--references", str(d), "--json"]) == 0
    shown = json.loads(out.getvalue())
    assert shown["threshold"] == 65.5 and shown["explicit_threshold"] is True
    # the entry without a floor keeps the computed one (70 - 1.8173)
    assert lookup(d, "mmlu", "accuracy", "org/model", AccuracySpec(), MMLU).threshold is None


@pytest.mark.parametrize("entry,needle", [
    ("- quant_algo: FP8\n  accuracy: 69.0\n  threshold_override: 65.0\n  threshold: 64.0\n", "two different explicit thresholds"),
    ("- quant_algo: FP8\n  accuracy: 69.0\n  threshold_override: low\n", "threshold_override"),
])
def test_bad_explicit_floors_are_refused(tmp_path: Path, entry: str, needle: str) -> None:
    d = _refs(tmp_path, entry)
    with pytest.raises(ReferenceError_, match=needle):
        lookup(d, "mmlu", "accuracy", "org/model", AccuracySpec(quant_algo="FP8"), MMLU)


def test_same_floor_under_both_names_is_accepted(tmp_path: Path) -> None:
    d = _refs(tmp_path, "- quant_algo: FP8\n  accuracy: 69.0\n  threshold_override: 65\n  threshold: 65.0\n")
    assert lookup(d, "mmlu", "accuracy", "org/model", AccuracySpec(quant_algo="FP8"), MMLU).threshold == 65.0
