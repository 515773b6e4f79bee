"""What the two TensorRT-LLM backends share: the translation between the runner and the LLM API.

The runner speaks accuracy specs, task limits and string requests; TensorRT-LLM speaks QuantConfig,
CalibConfig, BuildConfig, KvCacheConfig and SamplingParams. The pure functions below do that
translation (and are what the test double checks); :class:`TRTLLMBackendBase` holds the lifecycle
both backends share: validation in the constructor, prompts, generation, the effective spec.

The classes of TensorRT-LLM itself are never imported here: a backend gets them from
:func:`runner.backends.trtllm.api.load_api` on entry. Field names follow TensorRT-LLM 1.0-1.2.x
(``tensorrt_llm/llmapi/llm_args.py``, ``tensorrt_llm/builder.py``,
``tensorrt_llm/models/modeling_utils.py``, ``tensorrt_llm/quantization/mode.py``,
``tensorrt_llm/sampling_params.py``).
"""

from __future__ import annotations

import logging
import platform
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional, Sequence

from runner.backends.configured import ConfiguredBackend
from runner.backends.hf import guided
from runner.backends.prompting import encode_request, encode_requests_cut
from runner.backends.trtllm import extra_options, speculative, api as trtllm_api
from runner.contract.backend import Capabilities, GpuNeeds, BackendInfo, ChatFormat, Perturbation, TaskLimits
from runner.contract.errors import ConfigError, ModelError
from runner.contract.indicators import Generated, GenerationFacts
from runner.contract.requests import GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, cut_at_stop
from runner.contract.spec import AccuracySpec
from runner.quant.algos import GROUPWISE_ALGOS, validate_spec

log = logging.getLogger(__name__)

# KvCacheConfig.dtype values the PyTorch backend maps to a KV cache QuantAlgo.
KV_DTYPE_TO_ALGO = {"fp8": "FP8", "nvfp4": "NVFP4"}

LOGLIKELIHOOD_REFUSAL = dict(
    where="task.scoring", given="loglikelihood", allowed="task.scoring=generate on TensorRT-LLM backends",
    fix="use task.scoring=generate (TensorRT-LLM's own MMLU protocol), or backend=hf for log-likelihood scoring",
)


@dataclass
class TRTLLMCommonConfig:
    """The settings both TensorRT-LLM backends read (:class:`TRTLLMBackendBase`); each backend's config
    extends it and names its own ``_target_``."""

    _target_: str = ""
    name: str = ""
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    max_num_tokens: int = 8192  # tokens per engine step; at least task.max_input_len
    free_gpu_memory_fraction: float = 0.9  # share of free GPU memory given to the KV cache
    enable_block_reuse: bool = True  # reuse KV blocks of shared prompt prefixes (same tokens; logits
    # agree within numerical noise, not bit for bit, as batching and kernels differ from a fresh prefill)
    # rows per engine step below the task's (task.max_batch_size); None: the task's. The A/A replicate's batch-size
    # perturbation sets 1 (reference.noise=replicate: a second engine is built)
    max_batch_size: Optional[int] = None
    # the tensor-parallel degree the candidate will run with: reference.noise=replicate also scores the samples at it
    # (that many GPUs); None: no parallel-degree replicate
    replicate_tensor_parallel: Optional[int] = None


# ---------------------------------------------------------------------------- spec -> QuantConfig
def quant_config_kwargs(quant: Any) -> dict[str, Any]:
    """QuantConfig arguments for the spec, algorithms as names; empty for an unquantized spec.

    ``group_size`` is passed only to group-wise algorithms and ``smoothquant_val`` only to
    SmoothQuant ones: elsewhere TensorRT-LLM ignores them, and leaving them out keeps an unrelated
    setting from changing the engine cache key.
    """
    kwargs: dict[str, Any] = {}
    algo = quant.quant_algo
    if algo:
        kwargs["quant_algo"] = algo
    if quant.kv_cache_quant_algo:
        kwargs["kv_cache_quant_algo"] = quant.kv_cache_quant_algo
    if algo in GROUPWISE_ALGOS:
        kwargs["group_size"] = int(quant.group_size)
    if algo and algo.startswith("W8A8_SQ"):
        kwargs["smoothquant_val"] = float(quant.smoothquant_alpha)
    return kwargs


def with_enum_algos(api: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Replace algorithm names by ``api.QuantAlgo`` members, as QuantConfig expects."""
    return {k: api.QuantAlgo[v] if k in ("quant_algo", "kv_cache_quant_algo") else v for k, v in kwargs.items()}


def calib_config_kwargs(quant: Any, dataset: str) -> dict[str, Any]:
    """CalibConfig arguments: ``calib_num_samples`` samples in batches of ``calib_batch_size``.

    Despite its name and docstring ("number of batches"), ``CalibConfig.calib_batches`` counts
    SAMPLES: the engine build passes it to ``quantize_and_export(calib_size=calib_batches,
    batch_size=calib_batch_size)`` (``tensorrt_llm/models/modeling_utils.py``), whose
    ``get_calib_dataloader`` keeps the first ``calib_size`` texts and batches them by ``batch_size``
    (``tensorrt_llm/quantization/quantize_by_modelopt.py``). So it takes ``calib_num_samples`` as is.
    """
    if quant.calib_num_samples < 1 or quant.calib_batch_size < 1:
        raise ConfigError("calib_num_samples and calib_batch_size must be positive",
                          where=f"quant={quant.name}", given=f"{quant.calib_num_samples} / {quant.calib_batch_size}")
    kwargs: dict[str, Any] = {
        "calib_dataset": dataset,
        "calib_batches": int(quant.calib_num_samples),
        "calib_batch_size": int(quant.calib_batch_size),
        "calib_max_seq_length": int(quant.calib_max_seq_length),
        "random_seed": int(quant.calib_seed),
    }
    if quant.calib_max_seq_length > 2048:  # the tokenizer is initialised for 2048 tokens by default
        kwargs["tokenizer_max_seq_length"] = int(quant.calib_max_seq_length)
    return kwargs


# ---------------------------------------------------------------------------- limits -> BuildConfig
def build_config_kwargs(limits: TaskLimits, max_num_tokens: int) -> dict[str, Any]:
    """BuildConfig sized from the task: the longest prompt plus the longest answer fit."""
    return {
        "max_input_len": limits.max_input_len,
        "max_seq_len": limits.max_input_len + limits.max_output_len,
        "max_batch_size": limits.max_batch_size,
        "max_num_tokens": max_num_tokens,
    }


# ---------------------------------------------------------------------------- requests -> SamplingParams
def sampling_kwargs(request: GenerationRequest, limits: TaskLimits) -> dict[str, Any]:
    """SamplingParams arguments for one request.

    Greedy requests set no sampling field: TensorRT-LLM decodes greedily when top_k and top_p are
    unset. A sampled request must carry a seed (TensorRT-LLM would otherwise use seed 0 for every
    request). As TensorRT-LLM also decodes greedily when a temperature comes without top_k or top_p,
    such a request gets top_p=1.0: sampling from the whole distribution, as backend=hf does.
    """
    kwargs: dict[str, Any] = {"max_tokens": min(request.max_tokens, limits.max_output_len)}
    if request.stop:
        kwargs["stop"] = list(request.stop)
    if not request.greedy:
        if request.seed is None:
            raise ConfigError("a sampled request needs an explicit seed", where="generation request",
                              given=f"temperature={request.temperature}, seed=None")
        kwargs["temperature"] = float(request.temperature)
        kwargs["seed"] = int(request.seed)
        if request.top_k:
            kwargs["top_k"] = int(request.top_k)
        if request.top_p is not None:
            kwargs["top_p"] = float(request.top_p)
        if not request.top_k and request.top_p is None:
            kwargs["top_p"] = 1.0
    return kwargs


# ---------------------------------------------------------------------------- outputs -> effective spec
def algo_name(value: Any) -> Optional[str]:
    """A QuantAlgo member (a StrEnum), a name or None, as a spec value (NO_QUANT means none)."""
    if value is None:
        return None
    name = str(getattr(value, "value", value))
    return None if name in ("", "None", "NO_QUANT") else name


def read_effective_spec(args: Any, engine_config: Optional[dict] = None,
                        kv_from_cache_dtype: bool = False) -> tuple[AccuracySpec, dict[str, str]]:
    """The spec that was loaded, read back from ``llm.args`` (as TensorRT-LLM's accuracy suite does).

    ``engine_config`` is the loaded engine's ``config.json``. When an engine is loaded rather than
    built, TensorRT-LLM restores only its build config and parallel layout into ``llm.args``
    (``TrtLlmArgs._load_config_from_engine``), so ``llm.args.quant_config`` stays empty; the
    engine's own ``pretrained_config.quantization`` is then the authority.
    ``kv_from_cache_dtype``: on the PyTorch backend a KV cache algorithm is asked for through
    ``kv_cache_config.dtype``. 1.0-1.2 copy only ``"fp8"`` into ``quant_config.kv_cache_quant_algo``
    (``TorchLlmArgs.sync_quant_config_with_kv_cache_config_dtype``; any other dtype only logs a
    warning), and a checkpoint's ``hf_quant_config.json`` may set it too; when ``quant_config``
    names none, the dtype that was passed is what runs, so it counts.
    """
    details: dict[str, str] = {}
    quant_config = getattr(args, "quant_config", None)
    algo = algo_name(getattr(quant_config, "quant_algo", None))
    kv = algo_name(getattr(quant_config, "kv_cache_quant_algo", None))
    if engine_config is not None:
        pretrained = engine_config.get("pretrained_config") or {}
        quantization = pretrained.get("quantization") or {}
        algo, kv = algo_name(quantization.get("quant_algo")), algo_name(quantization.get("kv_cache_quant_algo"))
        if pretrained.get("dtype"):
            details["engine_dtype"] = str(pretrained["dtype"])
    if kv is None and kv_from_cache_dtype:
        kv_dtype = str(getattr(getattr(args, "kv_cache_config", None), "dtype", "auto")).lower()
        kv = KV_DTYPE_TO_ALGO.get(kv_dtype)
    dtype = str(getattr(args, "dtype", None) or "auto")
    decoding = getattr(getattr(args, "speculative_config", None), "decoding_type", None)
    spec_dec = str(decoding) if decoding else None  # upstream keys speculative references by decoding_type
    return AccuracySpec(dtype=dtype, quant_algo=algo, kv_cache_quant_algo=kv, spec_dec_algo=spec_dec), details


# ---------------------------------------------------------------------------- the shared lifecycle
class TRTLLMBackendBase(ConfiguredBackend):
    """Validation, prompts, generation and info shared by ``trtllm`` and ``trtllm_pytorch``.

    Subclasses implement ``_load(api) -> (llm, tokenizer_path, model_path, details, spec)``.
    """

    name = "trtllm"
    engine = True  # which LLM class load_api returns
    kv_cache_algos: tuple[str, ...] = ()
    capabilities = Capabilities(loglikelihood=False, token_counter=False, per_request_seeds=True)

    @classmethod
    def gpu_needs(cls, config: Any) -> GpuNeeds:
        """Every visible GPU, narrowed to tensor x pipeline parallel GPUs a job in a one-job-per-GPU sweep."""
        return GpuNeeds(device_key=False,
                        per_job=config.tensor_parallel_size * config.pipeline_parallel_size)

    def __init__(self, config: Any, model: Any, quant: Any, limits: TaskLimits,
                 chat: ChatFormat = ChatFormat(), progress: bool = True) -> None:
        where = f"backend={self.name}"
        if config.tensor_parallel_size < 1 or config.pipeline_parallel_size < 1:
            raise ConfigError("parallel sizes must be at least 1", where=f"{where}: tensor/pipeline_parallel_size",
                              given=f"{config.tensor_parallel_size} / {config.pipeline_parallel_size}")
        if not 0.0 < config.free_gpu_memory_fraction <= 1.0:
            raise ConfigError("free_gpu_memory_fraction must be within (0, 1]",
                              where="backend.free_gpu_memory_fraction", given=config.free_gpu_memory_fraction)
        if config.max_num_tokens < limits.max_input_len:
            raise ConfigError("max_num_tokens must hold the task's longest prompt (no chunked prefill)",
                              where="backend.max_num_tokens", given=config.max_num_tokens,
                              allowed=f">= task.max_input_len ({limits.max_input_len})")
        if limits.max_input_len < 1 or limits.max_output_len < 1 or limits.max_batch_size < 1:
            raise ConfigError("task limits must be positive", where="task.max_input_len / max_output_len / max_batch_size",
                              given=f"{limits.max_input_len} / {limits.max_output_len} / {limits.max_batch_size}")
        for key in ("max_batch_size", "replicate_tensor_parallel"):
            value = getattr(config, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"{key} is a whole number >= 1, or null", where=f"backend.{key}", given=value,
                                  allowed="null, or >= 1")
        if config.max_batch_size is not None:
            limits = replace(limits, max_batch_size=min(config.max_batch_size, limits.max_batch_size))
        validate_spec(quant, self.name, self.kv_cache_algos)
        self._validate(config, quant, limits)
        self.guided_backend = guided.resolve_trtllm(limits.guided_decoding, self.name)
        self.extra_options = extra_options.load(config.extra_llm_api_options)
        super().__init__(config, model, quant, limits, chat, progress)
        self._llm: Any = None
        self._api: Any = None
        self._tokenizer: Any = None
        self._warned_seeds = False
        self._acceptance = speculative.AcceptanceCounts()

    # ------------------------------------------------------------------ lifecycle
    def preflight(self) -> None:
        """Stop before any other work (tracking, data, model) when TensorRT-LLM is missing, lacks a
        name this backend needs, or is a release that cannot do what the job asks."""

        api = trtllm_api.load_api(self.name, engine=self.engine)
        self._check_release(api.version)
        self._api = api

    def _check_release(self, version: str) -> None:
        """Release-dependent refusals and capabilities (no model, no GPU needed)."""
        self.capabilities = replace(type(self).capabilities, per_request_seeds=self._per_request_seeds(version))

    def _per_request_seeds(self, version: str) -> bool:
        """The engine backend's C++ sampler seeds each request from ``SamplingParams.seed``."""
        return True

    def release_details(self) -> dict[str, str]:
        """What the report and MLflow tags say about seeds (``BackendInfo.details``)."""
        if self.capabilities.per_request_seeds:
            return {"per_request_seeds": "honoured"}
        return {"per_request_seeds": "not honoured",
                "seed_note": "this TensorRT-LLM release ignores SamplingParams.seed on the PyTorch backend: sampled "
                             "generations are not reproducible from the seed and bypass the generation cache"}

    def __enter__(self) -> "TRTLLMBackendBase":

        api = self._api
        if api is None:
            api = trtllm_api.load_api(self.name, engine=self.engine)
            self._check_release(api.version)
        llm, tokenizer_path, model_path, details, spec = self._load(api)
        try:
            self._tokenizer = api.load_tokenizer(tokenizer_path, self.model_config.trust_remote_code,
                                                 None if Path(tokenizer_path).is_dir() else self.model_config.revision)
        except (ModelError, MemoryError, KeyboardInterrupt):
            llm.shutdown()
            raise
        except Exception as err:  # the tokenizer files are the user's input: say what is wrong with them
            llm.shutdown()
            raise ModelError("could not read the model's tokenizer", where=f"model={self.model_config.name} "
                             f"(tokenizer: {tokenizer_path})", given=f"{type(err).__name__}: {err}"[:300],
                             fix="check tokenizer.json and tokenizer_config.json there (copy them from the original "
                                 "checkpoint), or point model.path at a complete checkpoint") from None
        except BaseException:
            llm.shutdown()
            raise
        self._api, self._llm = api, llm
        details = (details | {"guided_decoding": self.guided_backend} | self.release_details()
                   | extra_options.details(self.extra_options, self.config.extra_llm_api_options))
        layout = self.config.tensor_parallel_size * self.config.pipeline_parallel_size
        device = f"cuda ({api.gpu_name()})" + (
            f" x{layout} (tp={self.config.tensor_parallel_size}, pp={self.config.pipeline_parallel_size})"
            if layout > 1 else "")
        self._info = BackendInfo(
            name=self.name, spec=spec, device=device, model_path=model_path,
            versions={"tensorrt_llm": api.version, "python": platform.python_version()},
            details=details,
        )
        return self

    def host_fields(self) -> dict[str, str]:
        """The engine's dtype, parallel degree and step budget (its batch budget)."""
        info = self.info()
        return {"compute_dtype": info.details.get("engine_dtype", info.spec.dtype),
                "tensor_parallel": str(self.config.tensor_parallel_size),
                "pipeline_parallel": str(self.config.pipeline_parallel_size),
                "batch_budget": f"{self.limits.max_batch_size} rows, {self.config.max_num_tokens} tokens"}

    def perturbations(self) -> list[Perturbation]:
        """Batch size 1 against the task's batches, and the tensor-parallel degree the candidate will use
        (``backend.replicate_tensor_parallel``) against this one: each pass builds its own engine."""
        out = [Perturbation("max_batch_size=1", (("max_batch_size", 1),))] if self.limits.max_batch_size > 1 else []
        tp = self.config.replicate_tensor_parallel
        if tp is not None and tp != self.config.tensor_parallel_size:
            out.append(Perturbation(f"tensor_parallel_size={tp}", (("tensor_parallel_size", tp),)))
        return out

    def __exit__(self, *exc: object) -> None:
        if self._llm is not None:
            self._llm.shutdown()
        self._llm = None
        self._tokenizer = None

    def _validate(self, config: Any, quant: Any, limits: TaskLimits) -> None:
        """Backend-specific checks of the constructor (no heavy imports, no file access)."""

    def _load(self, api: Any) -> tuple[Any, str, str, dict[str, str], AccuracySpec]:
        raise NotImplementedError

    def _guided_llm_kwargs(self) -> dict[str, Any]:
        """``LLM(guided_decoding_backend=...)`` when the task constrains outputs; nothing otherwise."""
        return {} if self.guided_backend == guided.NONE else {"guided_decoding_backend": self.guided_backend}

    def _kv_cache_config(self, api: Any, **extra: Any) -> Any:
        """KvCacheConfig from the backend settings, ``backend.extra_llm_api_options.kv_cache_config`` on top."""
        kv_options, _ = extra_options.split(self.extra_options)
        kwargs = {"free_gpu_memory_fraction": float(self.config.free_gpu_memory_fraction),
                  "enable_block_reuse": bool(self.config.enable_block_reuse)} | kv_options | extra
        return api.KvCacheConfig(**kwargs)

    def _extra_llm_kwargs(self) -> dict[str, Any]:
        """The pass-through ``LLM`` arguments of ``backend.extra_llm_api_options`` (KV cache ones excluded)."""
        return extra_options.llm_kwargs(self.extra_options)

    # ------------------------------------------------------------------ prompts
    def _encode_request(self, request: GenerationRequest) -> list[int]:
        """Token ids as backend=hf builds them (chat template or conversation, then truncation to max_input_len).

        Tokenizing here rather than in TensorRT-LLM (``truncate_prompt_tokens``) keeps the tokens
        identical across backends and lets truncation apply after the chat template.
        """
        return encode_request(self._tokenizer, self.chat, request, self.limits.max_input_len)

    def _sampling_params(self, request: GenerationRequest) -> Any:
        """SamplingParams of one request; a json_schema becomes ``GuidedDecodingParams(json=...)`` when guided decoding is on."""
        kwargs = sampling_kwargs(request, self.limits)
        if request.json_schema and self.guided_backend != guided.NONE:
            kwargs["guided_decoding"] = self._api.GuidedDecodingParams(json=request.json_schema)
        return self._api.SamplingParams(**kwargs)

    # ------------------------------------------------------------------ requests
    def generate(self, requests: Sequence[GenerationRequest]) -> list[str]:
        """All requests in one ``llm.generate`` call (TensorRT-LLM batches in flight); results in order."""
        if self._llm is None:
            raise RuntimeError("generate() needs the backend to be entered")
        if not requests:
            return []
        if not self.capabilities.per_request_seeds and not self._warned_seeds and any(not r.greedy for r in requests):
            self._warned_seeds = True
            log.warning("%s (TensorRT-LLM %s)", self.release_details()["seed_note"], self._api.version)
        params = [self._sampling_params(r) for r in requests]
        prompts, cut = encode_requests_cut(self._tokenizer, self.chat, requests, self.limits.max_input_len, bulk=False)
        # TensorRT-LLM draws its own bar for one call; a job's bar (counting its whole total) is advanced instead
        outputs = self._llm.generate(prompts, sampling_params=params,
                                     use_tqdm=self.progress and self.job_progress is None)
        if len(outputs) != len(requests):
            raise RuntimeError(f"TensorRT-LLM returned {len(outputs)} outputs for {len(requests)} requests")
        if self.reads_acceptance:
            self._acceptance.add(speculative.read_stats(self._llm))
        if self.job_progress is not None:
            self.job_progress.update(len(outputs))
        return [Generated(cut_at_stop(out.outputs[0].text, r.stop),
                          GenerationFacts(input_cut=was_cut, hit_limit=out.outputs[0].finish_reason == "length"))
                for out, r, was_cut in zip(outputs, requests, cut)]

    @property
    def reads_acceptance(self) -> bool:
        """Whether this backend reads the acceptance length back (a speculative config on the PyTorch backend)."""
        return False

    def acceptance_length(self) -> float | None:
        return self._acceptance.length

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """Refused: TensorRT-LLM gives no exact log-likelihood of a given continuation through the LLM API.

        What the LLM API offers:
        - ``SamplingParams(prompt_logprobs=k)``: per prompt position, the k most likely tokens
          with their log-probabilities. In 1.0-1.2 (``tensorrt_llm/executor/result.py``,
          ``compute_logprobs``) the prompt's own token is not added when it falls outside the top
          k, so a continuation's tokens are not guaranteed to be there; only k = vocabulary size
          is exact (a vocabulary-sized dict per prompt position). On the PyTorch backend the
          values come from context logits that the LLM API turns on internally and drops after
          use (``SamplingParams._get_output_config`` in the 1.1/1.2 development line); how later
          releases fill the top k is not covered here: check the installed release.
        - ``return_context_logits=True``: the full [prompt_len, vocab] logits (gigabytes per MMLU
          request); the engine backend needs an engine built with ``gather_context_logits``.
        Neither is practical or guaranteed exact, so a log-likelihood request stops with a
        :class:`ConfigError` that points to ``task.scoring=generate`` (the protocol of
        TensorRT-LLM's own accuracy suite). ``capabilities.loglikelihood`` says so before loading.
        """
        if not requests:
            return []
        raise ConfigError(f"log-likelihood scoring is not available on backend={self.name}", **LOGLIKELIHOOD_REFUSAL)
