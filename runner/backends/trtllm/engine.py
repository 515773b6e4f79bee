"""The ``trtllm`` backend: a TensorRT engine built through TensorRT-LLM's LLM API, kept in a cache.

Building is the expensive part (minutes to an hour with calibration), so an engine is saved under
``<cache>/engines/<key>/`` (see :mod:`runner.cache.engines`) and the next run with the same key loads
it with ``LLM(model=engine_dir, tokenizer=hf_dir)``. A file lock around check-and-build means two
jobs never build the same engine; the second waits and then loads. Build time, cache hit or miss
and the engine path are reported in ``BackendInfo.details``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from runner.backends.models import resolve_model_source
from runner.backends.trtllm.backend import (
    TRTLLMBackendBase, TRTLLMCommonConfig, build_config_kwargs, calib_config_kwargs, quant_config_kwargs,
    read_effective_spec, with_enum_algos,
)
from runner.cache.engines import fingerprint_digest, engine_key, EngineCache, fingerprint_dir
from runner.contract.errors import ConfigError, DataError, ModelError
from runner.contract.spec import AccuracySpec
from runner.files.assets import intact_directory, record_directory, sha256_of
from runner.files.locking import file_lock
from runner.files.paths import cache_dir
from runner.quant import modelopt as hf_quant
from runner.quant.algos import WEIGHT_ALGOS, needs_calibration

PACKAGED = "packaged"
AUTO = "auto"  # quant.calib_dataset's default: each backend's own default set
# CalibConfig's default calib_dataset (tensorrt_llm/llmapi/llm_args.py, 1.0 to main): a Hugging Face
# Hub dataset that the build loads with load_dataset(name, "3.0.0", split="train"), or a local snapshot
# whose path contains the name. Calibrating on it is upstream's protocol: no reference-key part.
UPSTREAM_CALIB = "cnn_dailymail"
OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")

# Algorithms an engine build cannot produce from an unquantized Hugging Face checkpoint: GPTQ and QServe
# need checkpoints quantized elsewhere, FP8_BLOCK_SCALES and the MXFP4 variants come only from a
# ModelOpt export (TensorRT-LLM's quantize_by_modelopt has no qformat for them in 1.0-1.2).
NOT_BUILDABLE_ALGOS = frozenset({"W4A16_GPTQ", "W8A16_GPTQ", "W4A8_QSERVE_PER_GROUP", "W4A8_QSERVE_PER_CHANNEL",
                                 "FP8_BLOCK_SCALES", "W4A8_MXFP4_FP8", "W4A8_MXFP4_MXFP8", "W4A16_MXFP4"})


@dataclass
class TRTLLMBackendConfig(TRTLLMCommonConfig):
    """TensorRT-LLM, TensorRT engine backend: builds (and caches) one engine per model x spec x limits."""

    _target_: str = "runner.backends.trtllm.engine.TRTLLMEngineBackend"
    name: str = "trtllm"
    engine_cache: bool = True  # keep built engines under <cache>/engines/<key>/
    engine_dir: Optional[str] = None  # an engine built elsewhere: loaded as is, its spec read from its config.json
    # LLM arguments passed through, as trtllm-eval --extra_llm_api_options: a YAML path or a mapping
    extra_llm_api_options: Optional[Any] = None


class TRTLLMEngineBackend(TRTLLMBackendBase):
    """TensorRT engine backend (``tensorrt_llm._tensorrt_engine.LLM``). Construct cheaply; build on entry."""

    name = "trtllm"
    engine = True
    # ModelOpt calibrates FP8 and INT8 KV caches for engines (QuantConfig._get_modelopt_kv_cache_dtype).
    kv_cache_algos = ("FP8", "INT8")

    def _validate(self, config: Any, quant: Any, limits: Any) -> None:
        """Refuse, before anything loads, what an engine build cannot do (TensorRT-LLM finds out only after loading)."""
        if limits.guided_decoding == "llguidance":
            raise ConfigError(
                "guided decoding with llguidance runs only on TensorRT-LLM's PyTorch backend",
                where="task.guided_decoding", given="llguidance (backend=trtllm)",
                allowed="xgrammar or auto on backend=trtllm; llguidance on backend=trtllm_pytorch",
                fix="set task.guided_decoding=xgrammar, or use backend=trtllm_pytorch",
            )
        if quant.quant_algo in NOT_BUILDABLE_ALGOS:
            raise ConfigError(
                f"quant_algo {quant.quant_algo} cannot be built from an unquantized Hugging Face checkpoint",
                where=f"quant={quant.name}: quant_algo", given=f"{quant.quant_algo} (backend=trtllm)",
                allowed="on backend=trtllm: " + ", ".join(sorted(set(WEIGHT_ALGOS) - NOT_BUILDABLE_ALGOS)),
                fix="quantize with NVIDIA ModelOpt (or the algorithm's own tool) and run the export on "
                    "backend=trtllm_pytorch with backend.checkpoint=<export directory>",
            )
        if not needs_calibration(quant) or config.engine_dir:
            return
        source = str(quant.calib_dataset or "").strip()
        path = Path(source).expanduser()
        if source in (AUTO, UPSTREAM_CALIB) and any(_truthy(os.environ.get(flag)) for flag in OFFLINE_FLAGS):
            raise ConfigError(
                f"quant={quant.name} calibrates on TensorRT-LLM's default set, {UPSTREAM_CALIB} from the Hugging "
                "Face Hub, and this process is offline",
                where=f"quant={quant.name}: calib_dataset",
                given=f"{quant.calib_dataset} with " + ", ".join(f"{f}={os.environ[f]}" for f in OFFLINE_FLAGS
                                                               if _truthy(os.environ.get(f))),
                allowed=f"auto or {UPSTREAM_CALIB} (the Hub), a local {UPSTREAM_CALIB} snapshot directory (its path "
                        "must contain 'cnn_dailymail'; same reference key), packaged, or a dataset directory",
                fix=f"point quant.calib_dataset at a local {UPSTREAM_CALIB} snapshot, or use quant.calib_dataset="
                    "packaged (the offline set; references are then keyed extra_acc_spec calib_dataset=packaged)",
            )
        if not source or (source not in (PACKAGED, AUTO, UPSTREAM_CALIB) and path.exists() and not path.is_dir()):
            raise ConfigError(
                f"quant={quant.name} is calibrated while the engine is built, and TensorRT-LLM reads "
                "calibration data from a local directory only",
                where=f"quant={quant.name}: calib_dataset", given=quant.calib_dataset,
                allowed="auto (TensorRT-LLM's default, cnn_dailymail from the Hub), packaged (the runner writes "
                        "the packaged text to a local directory), a Hugging Face snapshot of cnn_dailymail (its "
                        "path must contain 'cnn_dailymail'), or a dataset directory with a train split and a "
                        "'text' column",
                fix="point quant.calib_dataset at such a directory, or use quant.calib_dataset=packaged",
            )
        calib_config_kwargs(quant, source)  # checks the sample counts now, not after loading

    def _load(self, api: Any) -> tuple[Any, str, str, dict[str, str], AccuracySpec]:
        m = self.model_config
        source = resolve_model_source(m.name, m.hf_id, m.path, m.embedded)
        hf_dir = source.location
        common = dict(tokenizer=hf_dir, tensor_parallel_size=self.config.tensor_parallel_size,
                      pipeline_parallel_size=self.config.pipeline_parallel_size,
                      trust_remote_code=m.trust_remote_code, kv_cache_config=self._kv_cache_config(api),
                      **self._guided_llm_kwargs(), **self._extra_llm_kwargs())
        if self.config.engine_dir:
            return self._load_engine_dir(api, common, source.kind)
        calib = self._calib_source(hf_dir) if needs_calibration(self.quant) else None
        build_kw = build_config_kwargs(self.limits, self.config.max_num_tokens)
        quant_kw = quant_config_kwargs(self.quant)
        calib_kw = calib_config_kwargs(self.quant, str(calib)) if calib else None
        acc_part = calib_acc_spec(str(self.quant.calib_dataset), calib)

        def build() -> Any:
            kwargs = dict(model=hf_dir, dtype="auto", build_config=api.BuildConfig(**build_kw), **common)
            if quant_kw:
                kwargs["quant_config"] = api.QuantConfig(**with_enum_algos(api, quant_kw))
            if calib_kw:
                kwargs["calib_config"] = api.CalibConfig(**calib_kw)
            return api.llm_class(**kwargs)

        details = {"model_source": source.kind}
        if calib is not None:
            details["calib_dataset"] = str(calib)
        engine_dir: Path | None = None
        if not self.config.engine_cache:
            start = time.monotonic()
            llm = build()
            details |= {"engine_cache": "off", "build_time_s": f"{time.monotonic() - start:.1f}"}
        else:

            if not Path(hf_dir).is_dir():
                raise ModelError(
                    "the engine cache identifies a model by its files, so it needs a local checkpoint",
                    where=f"model={m.name}", given=f"{source.kind}: {hf_dir}",
                    fix="set model.path (or RUNNER_MODELS_ROOT) to a local checkpoint directory, "
                        "or backend.engine_cache=false to build without caching",
                )
            inputs = {
                "model": fingerprint_dir(Path(hf_dir)),
                "quant_config": quant_kw,
                "calib_config": None if calib_kw is None else (
                    {k: v for k, v in calib_kw.items() if k != "calib_dataset"}
                    | {"calib_dataset": _calib_identity(calib)}),
                "build_config": build_kw,
                "parallel": {"tensor_parallel_size": self.config.tensor_parallel_size,
                             "pipeline_parallel_size": self.config.pipeline_parallel_size},
                "dtype": "auto",
                "tensorrt_llm": api.version,
                "gpu": api.gpu_name(),
            }
            if self.extra_options:  # pass-through LLM arguments can change the engine (speculative decoding, ...)
                inputs["extra_llm_api_options"] = json.loads(json.dumps(self.extra_options, sort_keys=True, default=str))
            key = engine_key(inputs)
            cache = EngineCache()
            with cache.locked(key) as entry:
                start = time.monotonic()
                complete = entry.complete()
                changed = complete and not entry.verified()  # re-hashed before use (each file's sha256 memoized)
                if complete and not changed:
                    llm = api.llm_class(model=str(entry.engine_dir), **common)
                    details |= {"engine_cache": "hit", "load_time_s": f"{time.monotonic() - start:.1f}"}
                else:
                    llm = build()
                    seconds = time.monotonic() - start
                    manifest = {"inputs": inputs, "model_path": hf_dir, "calib_dataset_path": str(calib) if calib else None,
                                "build_time_s": round(seconds, 1), "built_by": f"runner backend={self.name}"}
                    try:
                        cache.store(key, lambda target: llm.save(str(target)), manifest)
                    except BaseException:
                        llm.shutdown()
                        raise
                    details |= {"engine_cache": "rebuilt (the entry was changed on disk)" if changed else "miss",
                                "build_time_s": f"{seconds:.1f}"}
            engine_dir = entry.engine_dir
            details |= {"engine_dir": str(engine_dir), "engine_key": key}
        try:
            spec, read_back = read_effective_spec(llm.args, _engine_config(engine_dir))
        except BaseException:
            llm.shutdown()
            raise
        return llm, hf_dir, hf_dir, details | read_back, replace(spec, extra_acc_spec=acc_part)

    def _load_engine_dir(self, api: Any, common: dict, model_source: str) -> tuple[Any, str, str, dict[str, str], AccuracySpec]:
        """An existing engine (``backend.engine_dir``): no build; the spec comes from the engine's own config."""
        engine_dir = Path(self.config.engine_dir).expanduser().resolve()
        config = _engine_config(engine_dir)
        if config is None or "pretrained_config" not in config:
            raise ModelError("backend.engine_dir is not a TensorRT-LLM engine directory", where="backend.engine_dir",
                             given=str(engine_dir), fix="point it at a directory written by LLM.save() or trtllm-build "
                             "(config.json with pretrained_config and build_config)")
        start = time.monotonic()
        llm = api.llm_class(model=str(engine_dir), **common)
        details = {"model_source": model_source, "engine_cache": "external", "engine_dir": str(engine_dir),
                   "load_time_s": f"{time.monotonic() - start:.1f}"}
        try:
            spec, read_back = read_effective_spec(llm.args, config)
        except BaseException:
            llm.shutdown()
            raise
        return llm, common["tokenizer"], str(engine_dir), details | read_back, spec

    def _calib_source(self, hf_dir: str) -> Path | str:
        """What TensorRT-LLM calibrates on: its default Hub dataset's name (``auto``), or a local directory
        (``quant.calib_dataset``, or the packaged text written to one)."""
        if self.quant.calib_dataset in (AUTO, UPSTREAM_CALIB):
            return UPSTREAM_CALIB
        if self.quant.calib_dataset == PACKAGED:
            return packaged_calibration_dir(self.quant, hf_dir, self.model_config.trust_remote_code)
        path = Path(str(self.quant.calib_dataset)).expanduser()
        if not path.is_dir():
            raise DataError("the calibration dataset directory does not exist", where=f"quant={self.quant.name}: calib_dataset",
                            given=str(path), fix="point quant.calib_dataset at a local calibration data directory, "
                                                 "or use quant.calib_dataset=packaged")
        return path.resolve()


def calib_acc_spec(choice: str, calib: Path | str | None) -> str | None:
    """The reference-key part (``extra_acc_spec``) of the calibration set ``choice`` (``quant.calib_dataset``)
    resolved to ``calib``: None when nothing is calibrated or on TensorRT-LLM's own default (the Hub's
    cnn_dailymail, or a local snapshot of it); else the set, as a model calibrated on other text is
    another model than the one upstream's references measured."""
    if calib is None:
        return None
    if choice == PACKAGED:
        return f"calib_dataset={PACKAGED}"
    if UPSTREAM_CALIB in str(calib):  # TensorRT-LLM reads such a path as its default set
        return None
    return f"calib_dataset=local:{_calib_identity(calib)[:12]}"


def _calib_identity(calib: Path | str) -> str:
    """The calibration set as the engine cache keys it: the Hub dataset's name, or a local set's digest."""
    if isinstance(calib, str):
        return calib

    return fingerprint_digest(calib)


def _truthy(value: str | None) -> bool:
    return str(value or "").strip().lower() in ("1", "true", "yes", "on")


def packaged_calibration_dir(quant: Any, tokenizer_dir: str, trust_remote_code: bool) -> Path:
    """The packaged calibration text as a dataset directory TensorRT-LLM reads: ``<dir>/train.jsonl``.

    TensorRT-LLM calibrates on the first ``calib_batches`` rows of a local directory's train split
    (``text`` column), each truncated to ``calib_max_seq_length`` tokens; it does not pack or shuffle.
    To calibrate on what ``backend=hf`` calibrates on, the rows written here are that backend's rows
    (:func:`runner.quant.modelopt.calibration_rows`: documents shuffled with ``calib_seed``,
    packed into ``calib_num_samples`` rows of ``calib_max_seq_length`` tokens), decoded back to text
    with the model's tokenizer. The directory lives in the cache, keyed by the data, the tokenizer
    files and those settings, so its fingerprint (part of the engine key) is stable.
    """
    from transformers import AutoTokenizer

    docs, description, fingerprint = hf_quant.calibration_documents(PACKAGED)
    tokenizer_files = sorted(p for p in Path(tokenizer_dir).glob("*") if p.is_file() and (
        p.name.startswith(("tokenizer", "special_tokens", "vocab", "merges")) or p.suffix == ".model"))
    settings = {"kind": "trtllm-packaged-calibration", "data": fingerprint, "format": hf_quant.CALIB_FORMAT,
                "tokenizer": {p.name: sha256_of(p) for p in tokenizer_files},
                "num_samples": int(quant.calib_num_samples), "max_seq_length": int(quant.calib_max_seq_length),
                "seed": int(quant.calib_seed)}
    root = cache_dir() / "calibration"
    key = engine_key(settings)
    target = root / key
    with file_lock(root / f"{key}.lock"):
        if not intact_directory(target, "train.jsonl", "the packaged calibration set"):
            tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, trust_remote_code=trust_remote_code)
            rows = hf_quant.calibration_rows(docs, tokenizer, settings["num_samples"], settings["max_seq_length"],
                                             settings["seed"])
            tmp = root / f"{key}.tmp"
            tmp.mkdir(parents=True, exist_ok=True)
            with open(tmp / "train.jsonl", "w") as handle:
                for row in rows:
                    handle.write(json.dumps({"text": tokenizer.decode(row, skip_special_tokens=True)}) + "\n")
            (tmp / "source.json").write_text(json.dumps(settings | {"description": description}, indent=2))
            tmp.rename(target)
            record_directory(target)
    return target


def _engine_config(engine_dir: Path | None) -> dict | None:
    """The ``config.json`` of an engine directory (None when there is none)."""
    if engine_dir is None or not (engine_dir / "config.json").is_file():
        return None
    return json.loads((engine_dir / "config.json").read_text())
