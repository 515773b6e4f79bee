"""The ``trtllm`` backend: a TensorRT engine built through TensorRT-LLM's LLM API, kept in a cache.

Building is the expensive part (minutes to an hour with calibration), so an engine is saved under
``<cache>/engines/<key>/`` (see :mod:`runner.engine_cache`) and the next run with the same key loads
it with ``LLM(model=engine_dir, tokenizer=hf_dir)``. A file lock around check-and-build means two
jobs never build the same engine; the second waits and then loads. Build time, cache hit or miss
and the engine path are reported in ``BackendInfo.details``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from runner.backends.trtllm import (
    TRTLLMBackendBase,
    build_config_kwargs,
    calib_config_kwargs,
    needs_calibration,
    quant_config_kwargs,
    read_effective_spec,
    with_enum_algos,
)
from runner.errors import ConfigError, DataError, ModelError
from runner.models import resolve_model_source
from runner.spec import AccuracySpec


class TRTLLMEngineBackend(TRTLLMBackendBase):
    """TensorRT engine backend (``tensorrt_llm._tensorrt_engine.LLM``). Construct cheaply; build on entry."""

    name = "trtllm"
    engine = True
    # ModelOpt calibrates FP8 and INT8 KV caches for engines (QuantConfig._get_modelopt_kv_cache_dtype).
    kv_cache_algos = ("FP8", "INT8")

    def _validate(self, config: Any, quant: Any) -> None:
        if not needs_calibration(quant):
            return
        if not config.calib_dataset:
            raise ConfigError(
                f"quant={quant.name} is calibrated while the engine is built, and no calibration data was given",
                where="backend.calib_dataset", given=None,
                allowed="a local directory: a Hugging Face snapshot of cnn_dailymail (its path must contain "
                        "'cnn_dailymail'), or a dataset directory with a train split and a 'text' column",
                fix="set backend.calib_dataset=/path/to/calibration/data (TensorRT-LLM would otherwise "
                    "download cnn_dailymail from the Hub)",
            )
        calib_config_kwargs(quant, str(config.calib_dataset))  # checks the sample counts now, not after loading

    def _load(self, api: Any) -> tuple[Any, str, str, dict[str, str], AccuracySpec]:
        m = self.model_config
        source = resolve_model_source(m.name, m.hf_id, m.path, m.embedded)
        hf_dir = source.location
        calib = self._calib_dir() if needs_calibration(self.quant) else None
        build_kw = build_config_kwargs(self.limits, self.config.max_num_tokens)
        quant_kw = quant_config_kwargs(self.quant)
        calib_kw = calib_config_kwargs(self.quant, str(calib)) if calib else None
        common = dict(tokenizer=hf_dir, tensor_parallel_size=self.config.tensor_parallel_size,
                      pipeline_parallel_size=self.config.pipeline_parallel_size,
                      trust_remote_code=m.trust_remote_code, kv_cache_config=self._kv_cache_config(api))

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
            from runner.engine_cache import EngineCache, engine_key, fingerprint_digest, fingerprint_dir

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
                    | {"calib_dataset_fingerprint": fingerprint_digest(calib)}),
                "build_config": build_kw,
                "parallel": {"tensor_parallel_size": self.config.tensor_parallel_size,
                             "pipeline_parallel_size": self.config.pipeline_parallel_size},
                "dtype": "auto",
                "tensorrt_llm": api.version,
                "gpu": api.gpu_name(),
            }
            key = engine_key(inputs)
            cache = EngineCache()
            with cache.locked(key) as entry:
                start = time.monotonic()
                if entry.complete():
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
                    details |= {"engine_cache": "miss", "build_time_s": f"{seconds:.1f}"}
            engine_dir = entry.engine_dir
            details |= {"engine_dir": str(engine_dir), "engine_key": key}
        try:
            spec, read_back = read_effective_spec(llm.args, _engine_config(engine_dir))
        except BaseException:
            llm.shutdown()
            raise
        return llm, hf_dir, hf_dir, details | read_back, spec

    def _calib_dir(self) -> Path:
        path = Path(str(self.config.calib_dataset)).expanduser()
        if not path.is_dir():
            raise DataError("the calibration dataset directory does not exist", where="backend.calib_dataset",
                            given=str(path), fix="point backend.calib_dataset at a local calibration data directory")
        return path.resolve()


def _engine_config(engine_dir: Path | None) -> dict | None:
    if engine_dir is None or not (engine_dir / "config.json").is_file():
        return None
    return json.loads((engine_dir / "config.json").read_text())
