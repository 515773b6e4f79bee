"""A TensorRT-LLM test double generated from a signature manifest (runner/backends/trtllm/manifests/).

:func:`install` puts a fake ``tensorrt_llm`` package into ``sys.modules`` whose classes take exactly
the keyword fields the manifest lists and raise ``ValueError`` (as pydantic's ValidationError and
TensorRT-LLM's own checks do) for any other, so the real :func:`runner.backends.trtllm.api.load_api`
and the backends run against it unchanged. :func:`write_package` writes a directory that does the same
on import, for a subprocess (``python -m runner`` with it on PYTHONPATH).
"""

from __future__ import annotations

import copy
import enum
import json
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

MANIFEST_DIR = Path(__file__).resolve().parents[2] / "runner" / "backends" / "trtllm" / "manifests"
ENGINE_ONLY = ("BuildConfig", "QuantConfig", "CalibConfig", "TrtLlmArgs")


def manifest_paths() -> list[Path]:
    return sorted(MANIFEST_DIR.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def simulated_main(manifest: dict[str, Any], version: str = "1.3.0rc80") -> dict[str, Any]:
    """``manifest`` as upstream's main branch has it after the TensorRT engine backend was removed."""
    out = copy.deepcopy(manifest)
    out["tensorrt_llm_version"] = version
    for name in ENGINE_ONLY:
        out["classes"].pop(name, None)
    out["modules"] = dict(out.get("modules") or {}) | {"tensorrt_llm._tensorrt_engine": False}
    return out


def _defaults(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if v in ("<expr>", "<required>") else v) for k, v in fields.items()}


def strict_class(name: str, fields: dict[str, Any], calls: list) -> type:
    """A keyword-only class taking exactly ``fields``; records each construction in ``calls``."""
    required = [k for k, v in fields.items() if v == "<required>"]
    defaults = _defaults(fields)

    def __init__(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(fields))
        if unknown:
            raise ValueError(f"{name}: extra inputs are not permitted: {unknown}")
        missing = [k for k in required if k not in kwargs]
        if missing:
            raise ValueError(f"{name}: field required: {missing}")
        for key, default in defaults.items():
            setattr(self, key, kwargs.get(key, default))
        self.given = dict(kwargs)
        calls.append((name, dict(kwargs)))

    return type(name, (), {"__init__": __init__, "__repr__": lambda self: f"{name}({self.given})"})


def _output(text: str) -> Any:
    return SimpleNamespace(outputs=[SimpleNamespace(text=text, token_ids=[], logprobs=None, finish_reason="stop")])


def llm_class(args_name: str, manifest: dict[str, Any], namespace: Any, calls: list) -> type:
    """``LLM`` whose constructor takes the fields of ``args_name`` (TorchLlmArgs or TrtLlmArgs).

    The engine class (TrtLlmArgs) builds from a Hugging Face directory with the ``quant_config`` given,
    or loads a directory ``save()`` wrote, restoring only its build config (as
    ``TrtLlmArgs._load_config_from_engine`` does, so ``args.quant_config`` stays empty there)."""
    fields = manifest["classes"][args_name]["fields"]
    Args = strict_class(args_name, fields, calls)
    kv_dtypes = manifest.get("pytorch_kv_cache_dtypes") or ["auto"]
    no_quant = SimpleNamespace(quant_algo=None, kv_cache_quant_algo=None)

    iteration_stats = list(manifest.get("iteration_stats") or [])  # scripted, see install()

    class LLM:
        def __init__(self, **kwargs: Any) -> None:
            self.args = Args(**kwargs)
            self._stats: list[Any] = []
            kv = getattr(self.args.kv_cache_config, "dtype", "auto") if self.args.kv_cache_config else "auto"
            quant = getattr(self.args, "quant_config", None) or no_quant
            if args_name == "TorchLlmArgs":
                quant = SimpleNamespace(quant_algo=None, kv_cache_quant_algo="FP8" if kv == "fp8" and "fp8" in kv_dtypes else None)
            else:
                config = Path(str(kwargs["model"])) / "config.json"
                if config.is_file() and "build_config" in json.loads(config.read_text()):
                    calls.append(("engine.load", str(kwargs["model"])))
                    quant = no_quant
                else:
                    calls.append(("engine.build", str(kwargs["model"])))
            self.args.quant_config = quant
            self.shut = False

        def generate(self, prompts: list, sampling_params: Any = None, use_tqdm: bool = True, **kwargs: Any) -> list:
            params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
            calls.append(("generate", {"prompts": prompts, "params": params}))
            if getattr(self.args, "enable_iter_perf_stats", False):  # the records exist only when asked for
                self._stats += copy.deepcopy(iteration_stats)
            return [_output(f"A{'' if p.seed is None else p.seed}") for p in params]

        def get_stats(self, timeout: float = 2) -> list:
            """The queued iteration records, drained (as ``LLM.get_stats`` empties its queue)."""
            calls.append(("get_stats", {"timeout": timeout}))
            out, self._stats = self._stats, []
            return out

        def save(self, path: str) -> None:
            Path(path).mkdir(parents=True, exist_ok=True)
            quant = self.args.quant_config
            quantization = {k: None if getattr(quant, k, None) is None else str(getattr(quant, k).value)
                            for k in ("quant_algo", "kv_cache_quant_algo")}
            build = getattr(self.args, "build_config", None)
            (Path(path) / "config.json").write_text(json.dumps({
                "version": namespace.__version__, "pretrained_config": {"dtype": "bfloat16", "quantization": quantization},
                "build_config": dict(getattr(build, "given", {}))}))

        def shutdown(self) -> None:
            self.shut = True

    LLM.__name__ = "LLM"
    return LLM


class DecodingBaseConfig:
    """``tensorrt_llm.llmapi.llm_args.DecodingBaseConfig.from_dict``: a decoding config named by ``decoding_type``."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DecodingBaseConfig":
        if not data.get("decoding_type"):
            raise ValueError("DecodingBaseConfig.from_dict: decoding_type is required")
        return cls(**data)


def speculative_stats(accepted: list[int], requests: list[int], draft_tokens: int = 3) -> list[dict[str, Any]]:
    """Iteration records as ``LLM.get_stats()`` returns them with ``enable_iter_perf_stats`` and a speculative
    config: one per iteration, with ``specDecodingStats`` (accepted draft tokens, requests that drafted), plus one
    iteration without drafting (``numDraftTokens`` 0), which upstream's formula skips."""
    records: list[dict[str, Any]] = [{"iter": 0, "specDecodingStats": {"numDraftTokens": 0, "numAcceptedTokens": 0,
                                                                       "numRequestsWithDraftTokens": 0}}]
    for i, (acc, req) in enumerate(zip(accepted, requests), start=1):
        records.append({"iter": i, "specDecodingStats": {"numDraftTokens": draft_tokens * req, "numAcceptedTokens": acc,
                                                         "numRequestsWithDraftTokens": req, "acceptanceLength": None}})
    return records


def install(manifest: dict[str, Any], calls: Optional[list] = None) -> list:
    """Put the fake ``tensorrt_llm`` (and its submodules) into ``sys.modules``; returns the call log.

    A manifest's ``iteration_stats`` (a test's addition, e.g. :func:`speculative_stats`) are the records each
    ``LLM.generate`` queues for ``LLM.get_stats`` when the LLM was created with ``enable_iter_perf_stats``."""
    calls = [] if calls is None else calls
    uninstall()
    classes = manifest["classes"]
    modules = manifest.get("modules") or {}  # null: not read, every module assumed present
    made = {name: strict_class(name, spec["fields"], calls) for name, spec in classes.items()
            if name not in ("BaseLlmArgs", "TrtLlmArgs", "TorchLlmArgs")}
    if "QuantAlgo" in manifest.get("enums", {}):
        members = manifest["enums"]["QuantAlgo"]["members"]
        made["QuantAlgo"] = enum.Enum("QuantAlgo", [(m, m) for m in members], type=str)
    root = types.ModuleType("tensorrt_llm")
    root.__version__ = manifest["tensorrt_llm_version"]
    root.__path__ = []  # a package, so submodules import
    llmapi = types.ModuleType("tensorrt_llm.llmapi")
    sampling = types.ModuleType("tensorrt_llm.sampling_params")
    for name in ("SamplingParams", "GuidedDecodingParams"):
        if name in made:
            setattr(sampling, name, made[name])
    for name in ("BuildConfig", "QuantConfig", "QuantAlgo", "CalibConfig", "KvCacheConfig", "SamplingParams"):
        if name in made:
            setattr(llmapi, name, made[name])
    if "SamplingParams" in made:
        root.SamplingParams = made["SamplingParams"]
    if "TorchLlmArgs" in classes:
        root.LLM = llmapi.LLM = llm_class("TorchLlmArgs", manifest, root, calls)
    llm_args = types.ModuleType("tensorrt_llm.llmapi.llm_args")
    llm_args.DecodingBaseConfig = DecodingBaseConfig
    sys.modules.update({"tensorrt_llm": root, "tensorrt_llm.llmapi": llmapi, "tensorrt_llm.sampling_params": sampling,
                        "tensorrt_llm.llmapi.llm_args": llm_args})
    if modules.get("tensorrt_llm._tensorrt_engine", True) and "TrtLlmArgs" in classes:
        engine = types.ModuleType("tensorrt_llm._tensorrt_engine")
        engine.LLM = llm_class("TrtLlmArgs", manifest, root, calls)
        sys.modules["tensorrt_llm._tensorrt_engine"] = engine
    return calls


def uninstall() -> None:
    for name in [n for n in sys.modules if n == "tensorrt_llm" or n.startswith("tensorrt_llm.")]:
        del sys.modules[name]


def write_package(manifest: dict[str, Any], target: Path) -> Path:
    """A directory to put on PYTHONPATH: ``import tensorrt_llm`` there installs the double of ``manifest``."""
    package = target / "tensorrt_llm"
    package.mkdir(parents=True, exist_ok=True)
    (target / "manifest.json").write_text(json.dumps(manifest))
    (package / "__init__.py").write_text(
        "import json, pathlib, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from tests.helpers import trtllm_double\n"
        "trtllm_double.install(json.loads((pathlib.Path(__file__).parents[1] / 'manifest.json').read_text()))\n"
    )
    return target
