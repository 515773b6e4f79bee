"""Reading the effective spec back from a ModelOpt-quantized model: what its quantizers compute.

The spec that keys a reference must be what runs, never what was asked for: each quantized linear
layer is classified as a TensorRT-LLM ``QuantAlgo`` from its weight and input quantizers, the KV
cache from the attention's K/V quantizers, and a static quantizer calibration never reached marks
the spec as uncalibrated. ModelOpt is imported inside the functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass(frozen=True)
class ReadBack:
    quant_algo: Optional[str]
    kv_cache_quant_algo: Optional[str]
    details: dict[str, str] = field(default_factory=dict)


def _bits(q: Any) -> Any:
    bits = q.num_bits
    return tuple(bits) if isinstance(bits, (list, tuple)) else bits


def _block(q: Any) -> Optional[dict]:
    return dict(q.block_sizes) if q.block_sizes else None


def linear_format(module: Any) -> tuple[Optional[str], Optional[int]]:
    """TensorRT-LLM's QuantAlgo name for one quantized linear layer, from its quantizers.

    Mirrors ModelOpt's export classifier (``modelopt.torch.export.quant_utils.get_quantization_format``
    and ``process_layer_quant_config``), plus TensorRT-LLM's per-channel W4A16, and tells AWQ
    (which leaves a pre_quant_scale) from plain group-wise INT4. Returns (name, group_size); an
    unrecognized combination comes back as a descriptive name that matches no spec.
    """
    from modelopt.torch.quantization.nn import SequentialQuantizer

    wq, iq = module.weight_quantizer, getattr(module, "input_quantizer", None)
    act = iq is not None and iq.is_enabled
    smoothed = iq is not None and iq.pre_quant_scale is not None
    if isinstance(wq, SequentialQuantizer):
        if not any(q.is_enabled for q in wq):
            return None, None
        first, second = wq[0], wq[1]
        if (first.is_enabled and _bits(first) == 4 and _block(first) and _bits(second) == (4, 3)
                and act and _bits(iq) == (4, 3) and smoothed):
            return "W4A8_AWQ", int(_block(first)[-1])
        return f"UNRECOGNIZED(sequential {[_bits(q) for q in wq]})", None
    if not wq.is_enabled:
        return None, None
    bits, block, axis = _bits(wq), _block(wq), wq.axis
    act_bits = _bits(iq) if act else None
    act_dynamic = bool(act and getattr(iq, "_dynamic", False))
    act_per_tensor = act and iq.axis is None and not _block(iq)
    if bits == 8 and axis == 0 and not block:
        if not act:
            return "W8A16", None
        if act_bits == 8 and act_per_tensor and not act_dynamic and smoothed:
            return "W8A8_SQ_PER_CHANNEL", None
    if bits == 4 and not act:
        if axis == 0 and not block:
            return "W4A16", None
        if block and block.get("type", "static") == "static" and smoothed:
            return "W4A16_AWQ", int(block[-1])
    if bits == (4, 3) and act_bits == (4, 3):
        if axis is None and not block and act_per_tensor and not act_dynamic:
            return "FP8", None
        if axis == 0 and not block and act_dynamic:
            return "FP8_PER_CHANNEL_PER_TOKEN", None
    if (bits == (2, 1) and block and block.get("scale_bits") in ((4, 3), [4, 3]) and act_bits == (2, 1)):
        return "NVFP4", int(block[-1])
    return (f"UNRECOGNIZED(weight bits={bits} axis={axis} block={block}, "
            f"input={'off' if not act else f'bits={act_bits} dynamic={act_dynamic}'}, pre_quant_scale={smoothed})"), None


def read_effective_spec(model: Any, mto: Any = None) -> ReadBack:
    """The spec the quantized model computes, read from its quantizers (and ModelOpt's state)."""
    from modelopt.torch.quantization.nn import TensorQuantizer

    formats: dict[str, int] = {}
    groups: set[int] = set()
    kv_bits: dict[str, int] = {}
    attentions = kv_layers = uncalibrated = 0
    for name, module in model.named_modules():
        if hasattr(module, "weight_quantizer") and hasattr(module, "weight"):
            fmt, group = linear_format(module)
            if fmt is not None:
                formats[fmt] = formats.get(fmt, 0) + 1
                if group:
                    groups.add(group)
        if hasattr(module, "k_bmm_quantizer") and hasattr(module, "v_bmm_quantizer"):
            attentions += 1
            found = [q for q in (module.k_bmm_quantizer, module.v_bmm_quantizer) if q.is_enabled]
            if found:
                kv_layers += 1
            for q in found:
                label = {(4, 3): "FP8", (2, 1): "NVFP4", 8: "INT8"}.get(_bits(q), f"bits={_bits(q)}")
                kv_bits[label] = kv_bits.get(label, 0) + 1
        if isinstance(module, TensorQuantizer) and _static_needs_amax(module):
            uncalibrated += 1
    if len(formats) > 1:
        algo = "MIXED_PRECISION"
    else:
        algo = next(iter(formats), None)
    kv = None
    if kv_bits:
        kv = next(iter(kv_bits)) if len(kv_bits) == 1 and kv_layers == attentions else \
            f"PARTIAL({kv_bits}, {kv_layers}/{attentions} attention layers)"
    details = {
        "quant_layers": ", ".join(f"{k}: {v}" for k, v in sorted(formats.items())) or "none",
        "quant_kv_layers": f"{kv_layers}/{attentions}",
    }
    if groups:
        details["quant_group_size"] = ",".join(str(g) for g in sorted(groups))
    if uncalibrated:
        details["quant_uncalibrated_quantizers"] = str(uncalibrated)
        algo = f"UNCALIBRATED({algo})"
    if mto is not None:
        state = mto.modelopt_state(model)["modelopt_state_dict"]
        details["quant_modelopt_modes"] = ",".join(mode for mode, _ in state)
    return ReadBack(algo, kv, details)


def _static_needs_amax(q: Any) -> bool:
    """An enabled static quantizer with no amax: calibration did not reach it."""
    try:
        if not q.is_enabled or getattr(q, "_dynamic", False):
            return False
        block = _block(q)
        if block and block.get("type") == "dynamic":
            return False
        return getattr(q, "amax", None) is None
    except Exception:  # containers (SequentialQuantizer) and exotic quantizers: not checked
        return False
