"""ModelOpt post-training quantization, exported for TensorRT-LLM (``python -m runner.quantize``).

``backend=trtllm_pytorch`` runs pre-quantized checkpoints only. This entry point makes one from the
model and quant options the runner already composes:

1. the model is loaded and quantized exactly as ``backend=hf`` does it (``HFBackend`` with
   :func:`runner.quant.modelopt.quantize`: the spec's ModelOpt recipe, its calibration settings
   from ``quant.calib_*``, and the same quantized-model cache, so a spec already evaluated on
   ``backend=hf`` is exported without calibrating again);
2. ModelOpt's unified Hugging Face export (``modelopt.torch.export.export_hf_checkpoint``) writes
   the packed weights, their scales, ``config.json`` with a ``quantization_config`` and
   ``hf_quant_config.json``, which TensorRT-LLM reads to pick its kernels; the tokenizer is saved
   next to them, and ``quantize_manifest.json`` records the spec, the calibration, the model's
   content fingerprint and the library versions;
3. the declared spec is read back with the code ``backend=trtllm_pytorch`` uses
   (:func:`runner.backends.trtllm.pytorch.checkpoint_spec`) and must equal the requested one.

What ModelOpt 0.47 exports, measured on CPU (``EXPORTABLE``): FP8, FP8_PER_CHANNEL_PER_TOKEN,
W8A16, W8A8_SQ_PER_CHANNEL, W4A16_AWQ and W4A8_AWQ, with or without an FP8 KV cache. NVFP4
quantizes on CUDA only. W4A16 (per-channel INT4, TensorRT-LLM's ``int4_wo``) has no unified
export: ModelOpt packs INT4 weights group-wise only. Group-wise INT4 also needs every quantized
layer's input width to be a multiple of ``quant.group_size``.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from omegaconf import MISSING

from runner.backends.hf.backend import HFBackend
from runner.backends.models import resolve_model_source
from runner.backends.trtllm.pytorch import checkpoint_spec
from runner.cache.engines import fingerprint_digest
from runner.contract.backend import TaskLimits
from runner.contract.errors import ConfigError, ModelError
from runner.quant import modelopt as hf_quant


@dataclass
class QuantizeJobConfig:
    """``python -m runner.quantize``: ModelOpt quantization of the model, exported as a checkpoint."""

    model: Any = MISSING
    quant: Any = MISSING
    backend: Any = MISSING  # backend=hf: the device and dtype that calibration runs in
    output_dir: Optional[str] = None  # None: quantized/<model.name>-<quant.name> under the working directory
    overwrite: bool = False  # replace an existing export in output_dir


# quant_algo -> exported with ModelOpt's unified Hugging Face format (modelopt.torch.export)
EXPORTABLE = ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "W8A16", "W8A8_SQ_PER_CHANNEL", "W4A16_AWQ", "W4A8_AWQ", "NVFP4")
EXPORTABLE_KV = ("FP8", "NVFP4")
CPU_EXPORT_HINT = "fp8, fp8_kv, fp8_per_channel_per_token, w8a16, int8_sq, w4a16_awq, w4a8_awq"
GROUPWISE = ("W4A16_AWQ", "W4A8_AWQ")
MANIFEST = "quantize_manifest.json"
DTYPES = ("bfloat16", "float16", "float32")


@dataclass(frozen=True)
class Exported:
    path: Path
    quant_algo: str | None
    kv_cache_quant_algo: str | None
    manifest: dict[str, Any]


# ---------------------------------------------------------------------------- checks before any work
def check_exportable(quant: Any) -> None:
    """Refuse specs ModelOpt cannot export as a unified checkpoint, before anything is loaded."""

    where = f"quant={quant.name}"
    if not hf_quant.is_quantized(quant):
        raise ConfigError("quant=none has nothing to quantize", where=where, given="quant_algo=null",
                          allowed=CPU_EXPORT_HINT + ", nvfp4, nvfp4_kv",
                          fix="backend=trtllm_pytorch runs the original checkpoint for quant=none; pick a quantized option")
    if quant.quant_algo is None:
        raise ConfigError("a KV-cache-only spec cannot be exported: TensorRT-LLM requires a pre-quantized "
                          "checkpoint to name its quant_algo", where=where,
                          given=f"kv_cache_quant_algo={quant.kv_cache_quant_algo}",
                          fix="on backend=trtllm_pytorch the KV cache dtype is set at run time; use the unquantized checkpoint")
    if quant.quant_algo not in EXPORTABLE:
        raise ConfigError(
            f"ModelOpt has no unified Hugging Face export for quant_algo={quant.quant_algo}"
            + (" (per-channel INT4 weights; ModelOpt packs INT4 weights group-wise only)" if quant.quant_algo == "W4A16" else ""),
            where=where, given=quant.quant_algo,
            allowed=f"on CPU: {CPU_EXPORT_HINT}; on a GPU also nvfp4, nvfp4_kv",
            fix="quant=w4a16_awq is the exportable INT4 weight-only format" if quant.quant_algo == "W4A16"
            else "choose an exportable quant option",
        )
    if quant.kv_cache_quant_algo is not None and quant.kv_cache_quant_algo not in EXPORTABLE_KV:
        raise ConfigError("this KV cache algorithm has no unified export", where=f"{where}: kv_cache_quant_algo",
                          given=quant.kv_cache_quant_algo, allowed="null, " + ", ".join(EXPORTABLE_KV))
    hf_quant.validate_spec(quant)


def check_device(quant: Any, device_type: str) -> None:
    """NVFP4 is quantized with CUDA kernels only (see ``hf_quant.cuda_reasons``)."""

    reasons = hf_quant.cuda_reasons(quant)
    if reasons and device_type != "cuda":
        raise ConfigError(
            f"quant={quant.name} needs a CUDA GPU to quantize: ModelOpt computes NVFP4's block scales with "
            f"CUDA kernels only ({', '.join(reasons)})",
            where=f"python -m runner.quantize quant={quant.name} backend.device={device_type}", given=device_type,
            allowed=f"backend.device=cuda (or auto on a GPU host); on CPU: {CPU_EXPORT_HINT}",
            fix="run on a GPU host, or choose a format that quantizes on CPU",
        )


def check_group_size(quant: Any, config: Any) -> None:
    """Group-wise INT4 export packs whole groups: every quantized layer's input width must be a multiple.

    The widths come from the model config (hidden size, MLP width, attention output width), so the
    check runs before calibration, not after minutes of AWQ search.
    """
    if quant.quant_algo not in GROUPWISE:
        return
    config = getattr(config, "text_config", None) or config
    widths = {"hidden_size": getattr(config, "hidden_size", None),
              "intermediate_size": getattr(config, "intermediate_size", None)}
    heads, head_dim = getattr(config, "num_attention_heads", None), getattr(config, "head_dim", None)
    if heads and head_dim:
        widths["num_attention_heads x head_dim"] = heads * head_dim
    bad = {k: v for k, v in widths.items() if isinstance(v, int) and v % int(quant.group_size)}
    if bad:
        divisors = [g for g in (128, 64, 32, 16) if all(v % g == 0 for v in widths.values() if isinstance(v, int))]
        raise ConfigError(
            f"group-wise INT4 export needs every layer's input width to be a multiple of group_size "
            f"(ModelOpt packs whole groups only)",
            where=f"quant={quant.name}: group_size", given=f"{quant.group_size}; widths {bad}",
            allowed=", ".join(str(g) for g in divisors) or "none of 128, 64, 32, 16",
            fix=f"override quant.group_size={divisors[0]}" if divisors else "choose another format",
        )


def resolve_output_dir(cfg: QuantizeJobConfig) -> Path:
    """``output_dir`` or ``quantized/<model>-<quant>``; an existing export is kept unless ``overwrite``."""
    path = Path(cfg.output_dir or f"quantized/{cfg.model.name}-{cfg.quant.name}").expanduser().resolve()
    if path.exists() and (not path.is_dir() or any(path.iterdir())) and not cfg.overwrite:
        raise ConfigError("the output directory exists and is not empty", where="output_dir", given=str(path),
                          fix="choose another output_dir, or add overwrite=true to replace it")
    return path


# ---------------------------------------------------------------------------- the export
def quantize_and_export(cfg: QuantizeJobConfig, progress: bool = True) -> Exported:
    """Quantize (or restore from the quantized-model cache) and export; see the module docstring."""

    if cfg.backend.name != "hf":
        raise ConfigError("runner.quantize calibrates with the transformers backend", where="backend",
                          given=cfg.backend.name, allowed="hf (its device and dtype are used)",
                          fix="drop the backend override, or use backend=hf backend.device=cuda")
    quant, model_cfg, backend_cfg = cfg.quant, cfg.model, copy.copy(cfg.backend)
    backend_cfg.fold_quantized_weights = False  # the export reads the live weight quantizers (amax, block sizes)
    check_exportable(quant)
    out = resolve_output_dir(cfg)
    import torch

    check_device(quant, HFBackend(backend_cfg, model_cfg, quant, TaskLimits(1, 1))._resolve_device(torch).type)
    source = resolve_model_source(model_cfg.name, model_cfg.hf_id, model_cfg.path, model_cfg.embedded)
    hf_config = _hf_config(source.location, model_cfg)
    check_group_size(quant, hf_config)
    if backend_cfg.dtype == "auto":  # the checkpoint's dtype, also on CPU: what the export stores
        native = str(getattr(hf_config, "dtype", None) or getattr(hf_config, "torch_dtype", None) or "float32")
        backend_cfg.dtype = native.removeprefix("torch.") if native.removeprefix("torch.") in DTYPES else "float32"
    backend = HFBackend(backend_cfg, model_cfg, quant, TaskLimits(1, 1), progress=progress)
    backend.preflight()  # ModelOpt importable
    _, _, modelopt_version = hf_quant.import_modelopt()

    with backend:
        info = backend.info()
        model, tokenizer = backend.loaded
        dtype = getattr(torch, info.details["torch_dtype"])
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        start = time.monotonic()
        try:
            _export(model, dtype, tmp, quant)
            tokenizer.save_pretrained(str(tmp))
            declared = checkpoint_spec(tmp)
            manifest = _manifest(quant, model_cfg, source, info, modelopt_version, time.monotonic() - start)
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    asked = (quant.quant_algo, quant.kv_cache_quant_algo)
    if declared != asked:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ConfigError("the exported checkpoint declares another spec than the one requested",
                          where=f"quant={quant.name}", given=f"hf_quant_config.json: {declared}",
                          allowed=f"quant_algo={asked[0]}, kv_cache_quant_algo={asked[1]}")
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(out)
    return Exported(out, declared[0], declared[1], manifest)


def _hf_config(location: str, model_cfg: Any) -> Any:
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(location, revision=model_cfg.revision, trust_remote_code=model_cfg.trust_remote_code)
    except OSError as err:
        raise ModelError("could not read the model's config", where=f"model={model_cfg.name}", given=str(err).splitlines()[0],
                         fix="set model.path to a local checkpoint directory") from None


def _export(model: Any, dtype: Any, target: Path, quant: Any) -> None:
    import torch
    from modelopt.torch.export import export_hf_checkpoint

    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export_hf_checkpoint(model, dtype=dtype, export_dir=str(target))
    except (NotImplementedError, AssertionError, TypeError, ValueError) as err:
        raise ConfigError(f"ModelOpt could not export quant={quant.name} for this model", where=f"quant={quant.name}",
                          given=f"{type(err).__name__}: {str(err)[:300]}",
                          allowed=f"on CPU: {CPU_EXPORT_HINT}; on a GPU also nvfp4, nvfp4_kv") from None


def _manifest(quant: Any, model_cfg: Any, source: Any, info: Any, modelopt_version: str, export_s: float) -> dict[str, Any]:

    calibrated = hf_quant.needs_calibration(quant)
    details = info.details
    model_dir = Path(source.location)
    return {
        "format": "modelopt unified Hugging Face checkpoint (hf_quant_config.json)",
        "spec": {"quant_option": quant.name, "quant_algo": quant.quant_algo,
                 "kv_cache_quant_algo": quant.kv_cache_quant_algo,
                 "group_size": quant.group_size if quant.quant_algo in GROUPWISE else None,
                 "smoothquant_alpha": quant.smoothquant_alpha if quant.quant_algo == "W8A8_SQ_PER_CHANNEL" else None},
        "calibration": None if not calibrated else {
            "dataset": hf_quant.local_calibration_source(quant), "num_samples": hf_quant.calib_num_samples(quant),
            "max_seq_length": quant.calib_max_seq_length, "max_batch_tokens": quant.calib_max_batch_tokens,
            "seed": quant.calib_seed, "description": details.get("quant_calibration"),
            "time_s": details.get("quant_calib_time_s")},
        "recipe": details.get("quant_recipe"),
        "quantized_layers": details.get("quant_layers"),
        "model": {"name": model_cfg.name, "hf_id": model_cfg.hf_id, "source": source.kind, "path": source.location,
                  "files_sha256": fingerprint_digest(model_dir) if model_dir.is_dir() else None},
        "calibrated_on": {"device": info.device, "dtype": details.get("torch_dtype")},
        "dtype": details.get("torch_dtype"),  # of the unquantized tensors, and what the quantized ones dequantize to
        "quant_cache": details.get("quant_cache"),
        "quant_key": details.get("quant_key"),
        "versions": dict(info.versions) | {"modelopt": modelopt_version},
        "export_time_s": round(export_s, 1),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
