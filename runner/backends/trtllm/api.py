"""The one place that imports TensorRT-LLM, so nothing else in the runner needs it installed.

The TensorRT-LLM backends call :func:`load_api` on entry and use only the symbols it returns. A
missing or broken installation becomes a single :class:`~runner.errors.BackendUnavailable` that says
what is missing and how to get it. Tests replace ``load_api`` with a double built from the real
signatures (``tests/backends/test_trtllm_backend.py``), so the translation layer is tested on any machine.

Written against TensorRT-LLM's LLM API of releases 1.0-1.2.x:
- ``tensorrt_llm.LLM``: the PyTorch backend (the default LLM class since 1.0);
- ``tensorrt_llm._tensorrt_engine.LLM``: the TensorRT engine backend (gone from upstream's main
  branch in 2026, hence imported only by the backend that needs it);
- ``tensorrt_llm.SamplingParams``, ``tensorrt_llm.sampling_params.GuidedDecodingParams`` and
  ``tensorrt_llm.llmapi.{BuildConfig, CalibConfig, KvCacheConfig, QuantAlgo, QuantConfig}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from runner.errors import BackendUnavailable

INSTALL_HINT = (
    "install TensorRT-LLM from NVIDIA's package index: "
    "pip install tensorrt-llm --extra-index-url https://pypi.nvidia.com "
    "(Linux x86-64/aarch64 with a CUDA GPU, Python 3.10 or 3.12), or run inside the TensorRT-LLM "
    "NGC container nvcr.io/nvidia/tensorrt-llm/release; backend=hf runs everywhere"
)


@dataclass(frozen=True)
class TRTLLMApi:
    """The TensorRT-LLM symbols the backends use, plus the two host facts they need."""

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


def load_api(backend: str, *, engine: bool) -> TRTLLMApi:
    """Import TensorRT-LLM for ``backend`` (its config name, used in messages).

    ``engine`` selects the TensorRT engine LLM class instead of the PyTorch one. Raises
    :class:`BackendUnavailable` when the package (or, for ``engine``, its engine backend) is absent.
    """
    try:
        import tensorrt_llm
        from tensorrt_llm import SamplingParams
        from tensorrt_llm.llmapi import BuildConfig, CalibConfig, KvCacheConfig, QuantAlgo, QuantConfig
        from tensorrt_llm.sampling_params import GuidedDecodingParams
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
    if engine:
        try:
            from tensorrt_llm._tensorrt_engine import LLM as llm_class
        except ImportError as err:
            raise BackendUnavailable(
                f"TensorRT-LLM {version} has no TensorRT engine backend",
                where=f"backend={backend}", given=f"import tensorrt_llm._tensorrt_engine: {err}",
                allowed="TensorRT-LLM 1.0-1.2.x for backend=trtllm",
                fix="install a 1.0-1.2.x release (pip install 'tensorrt-llm<1.3' --extra-index-url "
                    "https://pypi.nvidia.com), or use backend=trtllm_pytorch",
            ) from None
    else:
        from tensorrt_llm import LLM as llm_class
    return TRTLLMApi(version, llm_class, BuildConfig, QuantConfig, QuantAlgo, CalibConfig, KvCacheConfig,
                     SamplingParams, _gpu_name, _load_tokenizer, GuidedDecodingParams)


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
