"""TensorRT-LLM's quantization vocabulary (``QuantAlgo`` names) and its rules, shared by every backend
and by ``python -m runner.quantize``: which names exist, which need calibration."""

from __future__ import annotations

from typing import Any, Sequence

from runner.contract.errors import ConfigError

# QuantAlgo members of TensorRT-LLM 1.0-1.2 (tensorrt_llm/quantization/mode.py) that name a
# weight/activation scheme. INT8 is a KV cache algorithm only; MIXED_PRECISION needs a per-layer
# file, not a spec; NO_QUANT is spelled quant_algo: null here.
WEIGHT_ALGOS = (
    "W8A16", "W4A16", "W4A16_AWQ", "W4A8_AWQ", "W8A16_GPTQ", "W4A16_GPTQ", "W8A8_SQ_PER_CHANNEL",
    "W8A8_SQ_PER_TENSOR_PLUGIN", "W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN",
    "W8A8_SQ_PER_CHANNEL_PER_TENSOR_PLUGIN", "W8A8_SQ_PER_TENSOR_PER_TOKEN_PLUGIN",
    "W4A8_QSERVE_PER_GROUP", "W4A8_QSERVE_PER_CHANNEL", "FP8", "FP8_PER_CHANNEL_PER_TOKEN",
    "FP8_BLOCK_SCALES", "NVFP4", "W4A8_NVFP4_FP8", "W4A8_MXFP4_FP8", "W4A8_MXFP4_MXFP8", "W4A16_MXFP4",
)
# QuantConfig._requires_calibration: every weight algo except these, and any KV cache algo.
NO_CALIBRATION_ALGOS = frozenset({"W8A16", "W4A16", "FP8_PER_CHANNEL_PER_TOKEN"})
GROUPWISE_ALGOS = frozenset({"W4A16_AWQ", "W4A8_AWQ", "W4A16_GPTQ", "W8A16_GPTQ"})


def needs_calibration(quant: Any) -> bool:
    """Whether building this spec runs calibration (TensorRT-LLM's ``_requires_calibration`` rule)."""
    algo, kv = quant.quant_algo, quant.kv_cache_quant_algo
    return bool(kv) or (bool(algo) and algo not in NO_CALIBRATION_ALGOS)


def validate_spec(quant: Any, backend: str, kv_algos: Sequence[str]) -> None:
    """Reject algorithm names TensorRT-LLM does not know, before anything is loaded."""
    if quant.quant_algo is not None and quant.quant_algo not in WEIGHT_ALGOS:
        raise ConfigError(f"unknown quant_algo for backend={backend}", where=f"quant={quant.name}: quant_algo",
                          given=quant.quant_algo, allowed="null or one of " + ", ".join(WEIGHT_ALGOS))
    kv = quant.kv_cache_quant_algo
    if kv is not None and kv not in kv_algos:
        raise ConfigError(f"kv_cache_quant_algo not supported by backend={backend}",
                          where=f"quant={quant.name}: kv_cache_quant_algo", given=kv,
                          allowed="null or " + ", ".join(kv_algos))
    if quant.group_size < 1 or not 0.0 <= quant.smoothquant_alpha <= 1.0:
        raise ConfigError("group_size must be positive and smoothquant_alpha within [0, 1]",
                          where=f"quant={quant.name}", given=f"{quant.group_size} / {quant.smoothquant_alpha}")


AWQ_ALGOS = frozenset({"W4A16_AWQ", "W4A8_AWQ"})
# take longer ... Using calib_size=32 instead"); the same cap keeps the spec's meaning.
AWQ_MAX_CALIB_SAMPLES = 32
