"""A weight-only quantized model kept as plain weights, so that a cache hit loads it without ModelOpt.

Once ModelOpt's ``fold_weight`` has applied a weight-only spec's quantizers (W8A16, W4A16, W4A16_AWQ) to the
weights, every quantizer is disabled: what the model computes is a plain checkpoint whose linear weights hold the
fake-quantized values, plus, for AWQ, each input multiplied by its stored ``pre_quant_scale`` before the product
(what ModelOpt's disabled input quantizer still does). Both are stored in ``folded.safetensors`` beside the spec
read back from the quantizers (``readback.json``), in an :class:`~runner.cache.engines.EngineCache` entry verified
by its content digest like every other entry. A hit copies the weights into the freshly loaded base model and
hooks the scales in front of their layers: the logits are bit-equal to ModelOpt's folded model, and neither
ModelOpt's import nor its restore nor the fold is paid (tests/quant/test_folded.py).

Specs with live activation or KV-cache quantizers (FP8, INT8 SmoothQuant, W4A8) are not plain after the fold and
keep ModelOpt's restore. The entry's key is computed without importing ModelOpt (:func:`folded_key`).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.cache.engines import EngineCache, engine_key
from runner.quant.readback import ReadBack

log = logging.getLogger("runner")

FOLDABLE_ALGOS = frozenset({"W8A16", "W4A16", "W4A16_AWQ"})
WEIGHTS = "folded.safetensors"
SPEC = "readback.json"
SCALE_SUFFIX = ".pre_quant_scale"  # stored under "<linear>.pre_quant_scale" beside "<linear>.weight"
FORMAT = 2  # bump when what is stored, or how it is applied, changes


def foldable(quant: Any) -> bool:
    """Whether the spec, once folded, is a plain checkpoint (weight-only, no KV-cache quantization)."""
    return quant.quant_algo in FOLDABLE_ALGOS and not quant.kv_cache_quant_algo


def folded_key(inputs: dict[str, Any]) -> str:
    """The entry's key, from what determines the folded weights (the spec's fields, not ModelOpt's recipe object)."""
    return engine_key({"kind": "hf-modelopt-folded-weights", "folded_format": FORMAT, **inputs})


@dataclass(frozen=True)
class Restored:
    spec: ReadBack
    details: dict[str, str]
    path: Path


def load(model: Any, key: str, store: EngineCache) -> Restored | None:
    """The stored folded weights and scales applied to ``model`` (the base checkpoint, loaded), or None when the
    entry is missing or does not hold what was built into it (the caller restores through ModelOpt)."""
    import torch
    from safetensors.torch import load_file  # lazy: imports torch

    start = time.monotonic()
    with store.locked(key) as entry:
        if not entry.verified():
            return None
        path = entry.engine_dir / WEIGHTS
        tensors = load_file(str(path), device=str(next(model.parameters()).device))
        saved = json.loads((entry.engine_dir / SPEC).read_text())
    weights = {name: t for name, t in tensors.items() if not name.endswith(SCALE_SUFFIX)}
    if any(_mismatch(model, name, t) for name, t in weights.items()):
        log.warning("the folded weights in %s do not fit this model: restoring through ModelOpt", path)
        return None
    for name, tensor in weights.items():  # replaced, not copied into: writing a checkpoint's mapped pages costs seconds
        module_name, _, attr = name.rpartition(".")
        setattr(model.get_submodule(module_name), attr, torch.nn.Parameter(tensor, requires_grad=False))
    for name, scale in tensors.items():
        if name.endswith(SCALE_SUFFIX):
            model.get_submodule(name.removesuffix(SCALE_SUFFIX)).register_forward_pre_hook(_scaled_by(scale))
    spec = ReadBack(saved["quant_algo"], saved["kv_cache_quant_algo"], saved["details"])
    details = saved["build_details"] | {"quant_load_time_s": f"{time.monotonic() - start:.1f}"}
    return Restored(spec, details, path)


def _mismatch(model: Any, name: str, new: Any) -> bool:
    """Whether ``new`` cannot stand for the model's parameter ``name`` (absent, another shape or dtype)."""
    try:
        old = model.get_parameter(name)
    except AttributeError:
        return True
    return old.shape != new.shape or old.dtype != new.dtype


def _scaled_by(scale: Any) -> Any:
    """A forward pre-hook multiplying a layer's input by ``scale``, as ModelOpt's disabled input quantizer does."""
    def hook(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (args[0] * scale, *args[1:])
    return hook


def plain_tensors(model: Any) -> dict[str, Any] | None:
    """The folded model's quantized weights and live input scales by name, or None when some quantizer is still
    enabled (the model is not a plain checkpoint). Call after ``fold_weight``."""
    from modelopt.torch.quantization.nn import TensorQuantizer

    tensors: dict[str, Any] = {}
    for name, module in model.named_modules():
        if isinstance(module, TensorQuantizer):
            if module.is_enabled or module.rotate_is_enabled:
                return None
            continue
        quantizer = getattr(module, "weight_quantizer", None)
        if isinstance(quantizer, TensorQuantizer) and hasattr(quantizer, "_amax"):  # a weight quantizer calibrated
            tensors[f"{name}.weight"] = module.weight.detach().contiguous()
        scale = getattr(getattr(module, "input_quantizer", None), "pre_quant_scale", None)
        if scale is not None:
            tensors[f"{name}{SCALE_SUFFIX}"] = scale.detach().contiguous()
    return tensors


def save(model: Any, key: str, store: EngineCache, spec: ReadBack, build_details: dict[str, str],
         manifest: dict[str, Any]) -> Path | None:
    """Store the folded model's plain form under ``key``; None (nothing stored) when it is not plain."""
    from safetensors.torch import save_file  # lazy: imports torch

    tensors = plain_tensors(model)
    if tensors is None:
        log.debug("folded weights not stored: the model keeps live quantizers after the fold")
        return None

    def write(target: Path) -> None:
        target.mkdir(parents=True)
        save_file(tensors, str(target / WEIGHTS))
        (target / SPEC).write_text(json.dumps({"quant_algo": spec.quant_algo,
                                               "kv_cache_quant_algo": spec.kv_cache_quant_algo,
                                               "details": spec.details, "build_details": build_details},
                                              indent=2, sort_keys=True) + "\n")

    with store.locked(key) as entry:
        if not entry.verified():
            entry = store.store(key, write, manifest)
    return entry.engine_dir / WEIGHTS
