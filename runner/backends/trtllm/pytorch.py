"""The ``trtllm_pytorch`` backend: TensorRT-LLM's PyTorch backend (``tensorrt_llm.LLM``).

It quantizes nothing itself: quant=none runs the original checkpoint, a quantized spec runs a
checkpoint that was quantized beforehand (a ModelOpt export: a directory with
``hf_quant_config.json``), named by ``backend.checkpoint`` (or ``model.path``). TensorRT-LLM reads the
quantization from that file; the runner reads it back from ``llm.args`` and the job compares it
with the requested spec, so a checkpoint that does not match the quant option is an error, not a
silently different reference key. An FP8 KV cache is a runtime choice here:
``KvCacheConfig(dtype="fp8")``; NVFP4 (``dtype="nvfp4"``) only on releases that map it (1.3 on;
1.0-1.2 are refused before loading). Supported releases: 1.0 to current main.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from runner.backends.models import resolve_model_source
from runner.backends.trtllm import speculative
from runner.backends.trtllm.api import pytorch_per_request_seeds, pytorch_kv_cache_dtypes
from runner.backends.trtllm.backend import (
    KV_DTYPE_TO_ALGO, TRTLLMBackendBase, TRTLLMCommonConfig, algo_name, read_effective_spec,
)
from runner.contract.backend import ChatFormat, TaskLimits
from runner.contract.errors import ConfigError, ModelError
from runner.contract.spec import AccuracySpec

ALGO_TO_KV_DTYPE = {algo: dtype for dtype, algo in KV_DTYPE_TO_ALGO.items()}


@dataclass
class TRTLLMPyTorchBackendConfig(TRTLLMCommonConfig):
    """TensorRT-LLM, PyTorch backend: runs the checkpoint as is (pre-quantized for quantized specs)."""

    _target_: str = "runner.backends.trtllm.pytorch.TRTLLMPyTorchBackend"
    name: str = "trtllm_pytorch"
    checkpoint: Optional[str] = None  # pre-quantized (ModelOpt) checkpoint directory; None: the model's path
    # LLM arguments passed through, as trtllm-eval --extra_llm_api_options: a YAML path or a mapping
    extra_llm_api_options: Optional[Any] = None
    # speculative decoding as LLM(speculative_config=...) takes it (decoding_type, max_draft_len, ...); its
    # decoding_type is the spec's spec_dec_algo (runner/backends/trtllm/speculative.py)
    speculative_config: Optional[Any] = None
    # the acceptance_length.yaml entry the run's mean acceptance length is gated against (needs a speculative config)
    acceptance_key: Optional[str] = None


def checkpoint_spec(path: Path) -> tuple[Optional[str], Optional[str]] | None:
    """``(quant_algo, kv_cache_quant_algo)`` a pre-quantized checkpoint declares, or None if it declares none.

    Read as TensorRT-LLM 1.0-1.2 reads it when the PyTorch backend loads a checkpoint
    (``ModelLoader._update_from_hf_quant_config`` in ``tensorrt_llm/llmapi/llm_utils.py``): the
    ``quantization`` mapping of ``hf_quant_config.json`` (a ModelOpt export) sets ``quant_algo`` and
    ``kv_cache_quant_algo``; a file without ``quant_algo`` is refused there, and here.
    """
    file = path / "hf_quant_config.json"
    if not file.is_file():
        return None
    try:
        quantization = json.loads(file.read_text()).get("quantization") or {}
    except (OSError, ValueError, AttributeError) as err:
        raise ModelError("hf_quant_config.json is not readable JSON", where=str(file), given=str(err)) from None
    algo, kv = algo_name(quantization.get("quant_algo")), algo_name(quantization.get("kv_cache_quant_algo"))
    if algo is None:
        raise ModelError("a pre-quantized checkpoint must name its quant_algo (TensorRT-LLM refuses it otherwise)",
                         where=str(file), given=json.dumps(quantization)[:200])
    return algo, kv


class TRTLLMPyTorchBackend(TRTLLMBackendBase):
    """PyTorch backend of TensorRT-LLM. Construct cheaply; load on entry."""

    name = "trtllm_pytorch"
    engine = False
    kv_cache_algos = tuple(ALGO_TO_KV_DTYPE)

    def __init__(self, config: TRTLLMPyTorchBackendConfig, model: Any, quant: Any, limits: TaskLimits,
                 chat: ChatFormat = ChatFormat(), progress: bool = True) -> None:
        super().__init__(config, model, quant, limits, chat, progress)
        self.extra_options = speculative.merge(self.extra_options, config.speculative_config)
        if config.acceptance_key and "speculative_config" not in self.extra_options:
            raise ConfigError("an acceptance-length gate needs speculative decoding", where="backend.acceptance_key",
                              given=config.acceptance_key,
                              fix="set backend.speculative_config (decoding_type: Eagle, MTP, NGram...), or drop the key")
        self.acceptance_key = config.acceptance_key

    @property
    def reads_acceptance(self) -> bool:
        return "speculative_config" in self.extra_options

    def _per_request_seeds(self, version: str) -> bool:

        return pytorch_per_request_seeds(version)

    def _check_release(self, version: str) -> None:
        """An NVFP4 KV cache needs a release whose PyTorch backend maps ``KvCacheConfig(dtype="nvfp4")``."""

        super()._check_release(version)
        kv = self.quant.kv_cache_quant_algo
        if kv and ALGO_TO_KV_DTYPE[kv] not in pytorch_kv_cache_dtypes(version):
            raise ConfigError(
                f"TensorRT-LLM {version} cannot run a {kv} KV cache on its PyTorch backend",
                where=f"quant={self.quant.name}: kv_cache_quant_algo", given=f"{kv} (KvCacheConfig dtype "
                f"{ALGO_TO_KV_DTYPE[kv]!r})",
                allowed="KV cache dtypes " + ", ".join(pytorch_kv_cache_dtypes(version)) + f" on TensorRT-LLM {version}",
                fix="use an FP8 KV cache (e.g. quant=fp8_kv), or a TensorRT-LLM release from 1.3 on",
            )

    def _load(self, api: Any) -> tuple[Any, str, str, dict[str, str], AccuracySpec]:
        m = self.model_config
        if self.config.checkpoint:
            checkpoint = Path(self.config.checkpoint).expanduser()
            if not checkpoint.is_dir():
                raise ModelError("the checkpoint directory does not exist", where="backend.checkpoint",
                                 given=str(checkpoint), fix="point backend.checkpoint at a local checkpoint directory")
            location, kind = str(checkpoint.resolve()), "checkpoint"
        else:
            source = resolve_model_source(m.name, m.hf_id, m.path, m.embedded)
            location, kind = source.location, source.kind
        if self.quant.quant_algo and not (Path(location) / "hf_quant_config.json").is_file():
            raise ModelError(
                f"quant={self.quant.name} on backend={self.name} needs a pre-quantized checkpoint",
                where="backend.checkpoint" if self.config.checkpoint else "model.path",
                given=f"{location} (no hf_quant_config.json)",
                allowed="a local ModelOpt export (a directory with hf_quant_config.json), e.g. a downloaded "
                        "nvidia/<model>-FP8 checkpoint",
                fix="set backend.checkpoint to the quantized checkpoint, or use backend=trtllm, which "
                    "quantizes while it builds the engine",
            )
        declared = checkpoint_spec(Path(location))
        if declared is not None and declared[0] != self.quant.quant_algo:
            raise ModelError(  # fail before the load: TensorRT-LLM would run the checkpoint's own algorithm
                f"the checkpoint is quantized as {declared[0]}, not as quant={self.quant.name} asks",
                where="backend.checkpoint" if self.config.checkpoint else "model.path",
                given=f"{location}: hf_quant_config.json quant_algo={declared[0]}, kv_cache_quant_algo={declared[1]}",
                allowed=f"a checkpoint with quant_algo={self.quant.quant_algo}",
                fix="choose the quant option that matches the checkpoint, or export a matching one with "
                    f"python -m runner.quantize quant={self.quant.name}",
            )
        kv_extra = {}
        if self.quant.kv_cache_quant_algo:
            kv_extra["dtype"] = ALGO_TO_KV_DTYPE[self.quant.kv_cache_quant_algo]
        start = time.monotonic()
        llm = api.llm_class(
            model=location, tokenizer=location, dtype="auto", revision=None if kind != "hub" else m.revision,
            tensor_parallel_size=self.config.tensor_parallel_size,
            pipeline_parallel_size=self.config.pipeline_parallel_size,
            trust_remote_code=m.trust_remote_code, kv_cache_config=self._kv_cache_config(api, **kv_extra),
            max_batch_size=self.limits.max_batch_size, max_num_tokens=self.config.max_num_tokens,
            max_seq_len=self.limits.max_input_len + self.limits.max_output_len,
            **self._guided_llm_kwargs(), **self._stats_kwargs(), **self._extra_llm_kwargs(),
        )
        details = {"model_source": kind, "checkpoint": location, "load_time_s": f"{time.monotonic() - start:.1f}",
                   "kv_cache_dtype": kv_extra.get("dtype", "auto")}
        try:
            spec, read_back = read_effective_spec(llm.args, kv_from_cache_dtype=True)
        except BaseException:
            llm.shutdown()
            raise
        return llm, location, location, details | read_back, spec

    def _stats_kwargs(self) -> dict[str, Any]:
        """``enable_iter_perf_stats=True`` with a speculative config (the acceptance length is read from them),
        unless the extra options set it themselves."""
        if self.reads_acceptance and "enable_iter_perf_stats" not in self.extra_options:
            return {"enable_iter_perf_stats": True}
        return {}
