"""The one place that imports TensorRT-LLM, so nothing else in the runner needs it installed.

The TensorRT-LLM backends call :func:`load_api` on entry and use only the symbols it returns. Each
backend imports only the names it uses (:data:`ENGINE_NAMES`, :data:`PYTORCH_NAMES`), so the PyTorch
backend keeps working on TensorRT-LLM releases without the TensorRT engine backend (upstream's main
branch since 2026). A missing package, a broken installation (CUDA, a dependency) and a release that
lacks a name each become one :class:`~runner.contract.errors.BackendUnavailable` saying which. Tests replace
``load_api`` with a double generated from signature manifests of real releases
(``runner/backends/trtllm/manifests/``, ``tests/helpers/trtllm_double.py``).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from runner.contract.errors import BackendUnavailable

INSTALL_HINT = (
    "install TensorRT-LLM from NVIDIA's package index: "
    "pip install tensorrt-llm --extra-index-url https://pypi.nvidia.com "
    "(Linux x86-64/aarch64 with a CUDA GPU, Python 3.10 or 3.12), or run inside the TensorRT-LLM "
    "NGC container nvcr.io/nvidia/tensorrt-llm/release; backend=hf runs everywhere"
)

# Which TensorRT-LLM releases each backend is written for (README, docs/gpu.md).
SUPPORTED = {"trtllm": "1.0-1.2.x (the TensorRT engine backend is gone from upstream's main branch)",
             "trtllm_pytorch": "1.0 to current main"}

# (module, name, TRTLLMApi field) each backend needs; the LLM class is the ``llm_class`` field.
ENGINE_NAMES = (
    ("tensorrt_llm._tensorrt_engine", "LLM", "llm_class"),
    ("tensorrt_llm", "SamplingParams", "SamplingParams"),
    ("tensorrt_llm.llmapi", "BuildConfig", "BuildConfig"),
    ("tensorrt_llm.llmapi", "QuantConfig", "QuantConfig"),
    ("tensorrt_llm.llmapi", "QuantAlgo", "QuantAlgo"),
    ("tensorrt_llm.llmapi", "CalibConfig", "CalibConfig"),
    ("tensorrt_llm.llmapi", "KvCacheConfig", "KvCacheConfig"),
    ("tensorrt_llm.sampling_params", "GuidedDecodingParams", "GuidedDecodingParams"),
)
PYTORCH_NAMES = (
    ("tensorrt_llm", "LLM", "llm_class"),
    ("tensorrt_llm", "SamplingParams", "SamplingParams"),
    ("tensorrt_llm.llmapi", "KvCacheConfig", "KvCacheConfig"),
    ("tensorrt_llm.sampling_params", "GuidedDecodingParams", "GuidedDecodingParams"),
)

# The first release line whose PyTorch backend honours SamplingParams.seed per request. In 1.0-1.2
# its default sampler (TorchSampler) draws from one generator seeded once, whatever the request's seed.
PER_REQUEST_SEEDS_SINCE = (1, 3)
# The first release line whose PyTorch backend maps KvCacheConfig(dtype="nvfp4") to an NVFP4 KV cache;
# 1.0-1.2 sync only "fp8" (TorchLlmArgs.sync_quant_config_with_kv_cache_config_dtype) and warn otherwise.
NVFP4_KV_DTYPE_SINCE = (1, 3)


@dataclass(frozen=True)
class TRTLLMApi:
    """The TensorRT-LLM symbols a backend uses (None where that backend does not need one), plus host facts."""

    version: str
    llm_class: Any  # the LLM class of the requested backend (engine or PyTorch)
    BuildConfig: Any
    QuantConfig: Any
    QuantAlgo: Any
    CalibConfig: Any
    KvCacheConfig: Any
    SamplingParams: Any
    gpu_name: Callable[[], str]  # the GPU model of device 0 (part of the engine cache key)
    load_tokenizer: Callable[[str, bool, Optional[str]], Any]  # (path, trust_remote_code, revision)
    GuidedDecodingParams: Any = None  # tensorrt_llm.sampling_params.GuidedDecodingParams (json=<schema text>)


def release(version: str) -> tuple[int, int, bool]:
    """``(major, minor, final)`` of a version string; ``final`` is False for rc/dev/unknown versions."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?(.*)$", version.strip())
    if not match:
        return (0, 0, False)
    return int(match.group(1)), int(match.group(2)), not match.group(4)


def _at_least(version: str, line: tuple[int, int]) -> bool:
    """Whether ``version`` is a release of ``line`` or later; pre-releases of ``line`` itself do not count
    (which rc brought a change is not recorded here, so they are treated as the older behaviour)."""
    major, minor, final = release(version)
    return (major, minor) > line or ((major, minor) == line and final)


def pytorch_per_request_seeds(version: str) -> bool:
    """Whether the PyTorch backend of TensorRT-LLM ``version`` decides a sampled request's output by its seed."""
    return _at_least(version, PER_REQUEST_SEEDS_SINCE)


def pytorch_kv_cache_dtypes(version: str) -> tuple[str, ...]:
    """The ``KvCacheConfig.dtype`` values the PyTorch backend of ``version`` turns into a KV cache algorithm."""
    return ("auto", "fp8", "nvfp4") if _at_least(version, NVFP4_KV_DTYPE_SINCE) else ("auto", "fp8")


def load_api(backend: str, *, engine: bool) -> TRTLLMApi:
    """Import what ``backend`` (its config name, used in messages) needs from TensorRT-LLM.

    ``engine`` selects the TensorRT engine backend's names (:data:`ENGINE_NAMES`) instead of the
    PyTorch backend's (:data:`PYTORCH_NAMES`). Raises :class:`BackendUnavailable` when the package is
    absent, cannot be imported, or is a release without one of those names.
    """
    try:
        import tensorrt_llm
    except ModuleNotFoundError as err:
        if err.name and err.name.split(".")[0] != "tensorrt_llm":
            raise _broken(backend, err) from None
        raise BackendUnavailable(
            f"backend={backend} needs TensorRT-LLM (the Python package tensorrt_llm), which is not installed",
            where=f"backend={backend}", given=f"import tensorrt_llm: {err}", fix=INSTALL_HINT,
        ) from None
    except (ImportError, OSError, RuntimeError) as err:  # installed, but CUDA or a dependency is missing
        raise _broken(backend, err) from None
    version = str(getattr(tensorrt_llm, "__version__", "unknown"))
    found = resolve_names(backend, version, ENGINE_NAMES if engine else PYTORCH_NAMES)
    fields = {f: found.get(f) for f in ("BuildConfig", "QuantConfig", "QuantAlgo", "CalibConfig")}
    return TRTLLMApi(version, found["llm_class"], fields["BuildConfig"], fields["QuantConfig"], fields["QuantAlgo"],
                     fields["CalibConfig"], found["KvCacheConfig"], found["SamplingParams"], _gpu_name,
                     _load_tokenizer, found["GuidedDecodingParams"])


def resolve_names(backend: str, version: str, names: tuple[tuple[str, str, str], ...]) -> dict[str, Any]:
    """``{field: object}`` for each (module, name, field); a module or name this release lacks is a
    :class:`BackendUnavailable` naming the release range the backend is written for."""
    found: dict[str, Any] = {}
    for module_name, name, field in names:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if not (err.name or "").startswith("tensorrt_llm"):
                raise _broken(backend, err) from None
            raise _missing(backend, version, f"module {module_name}", err) from None
        except (ImportError, OSError, RuntimeError) as err:
            raise _broken(backend, err) from None
        try:
            found[field] = getattr(module, name)
        except AttributeError as err:
            raise _missing(backend, version, f"{module_name}.{name}", err) from None
    return found


def _missing(backend: str, version: str, what: str, err: BaseException) -> BackendUnavailable:
    if backend == "trtllm":
        fix = ("install a 1.0-1.2.x release (pip install 'tensorrt-llm<1.3' --extra-index-url "
               "https://pypi.nvidia.com), or use backend=trtllm_pytorch")
    else:
        fix = ("install TensorRT-LLM 1.0 or later (pip install 'tensorrt-llm>=1.0' --extra-index-url "
               "https://pypi.nvidia.com), or use backend=hf")
    return BackendUnavailable(
        f"TensorRT-LLM {version} has no {what}, which backend={backend} needs",
        where=f"backend={backend}", given=f"{type(err).__name__}: {err}",
        allowed=f"TensorRT-LLM {SUPPORTED.get(backend, '1.0-1.2.x')} for backend={backend}", fix=fix,
    )


def _broken(backend: str, err: BaseException) -> BackendUnavailable:
    return BackendUnavailable(
        f"backend={backend} needs TensorRT-LLM, which is installed but cannot be imported",
        where=f"backend={backend}", given=f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
        fix="check the CUDA driver and the packages TensorRT-LLM depends on, or " + INSTALL_HINT,
    )


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"


def _load_tokenizer(path: str, trust_remote_code: bool, revision: Optional[str]) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, revision=revision)
