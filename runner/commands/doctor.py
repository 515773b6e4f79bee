"""GPU smoke check for the TensorRT-LLM backends: ``python -m runner.doctor`` (or ``make gpu-check``).

Run it first on a GPU host. It checks, in order: Python, torch and the GPU; that ``tensorrt_llm``
imports and its version; the names each backend imports from it; what the release does with seeds and
KV cache dtypes; then, with a GPU and a model (``--model``, default the embedded SmolLM2-135M): a tiny
engine build followed by a cache hit with its effective spec read back, an FP8 KV cache spec read back
on the PyTorch backend, and a parity run of a few MMLU questions comparing the prompt token ids the
runner sends with those of TensorRT-LLM's own MMLU evaluator (``tensorrt_llm.evaluate.mmlu``) on the
same ``LLM`` object. It prints a pass/fail table; exit status 0 when nothing failed, 1 otherwise.
Without a GPU or without tensorrt_llm it says so in the table and skips what needs them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from evaluators.tasks.mmlu import LETTERS, Question, build_prompt, csv_frame
from runner.backends.trtllm import api
from runner.backends.trtllm.api import INSTALL_HINT
from runner.backends.trtllm.engine import TRTLLMBackendConfig, TRTLLMEngineBackend
from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackend, TRTLLMPyTorchBackendConfig
from runner.contract.backend import TaskLimits
from runner.contract.errors import UserError
from runner.contract.requests import GenerationRequest
from runner.contract.task_config import ModelConfig, QuantConfig
from runner.files.assets import smollm2_checkpoint

PASS, FAIL, SKIP = "pass", "FAIL", "skip"
ENGINE_REMOVED = ("upstream removed the TensorRT engine backend from trtllm-eval (--backend accepts only pytorch) "
                  "and from its main branch; releases 1.0-1.2.x still build engines (backend=trtllm); "
                  "backend=trtllm_pytorch is the GPU default going forward")
"""What the doctor says about backend=trtllm on every release: upstream's state, read from its main branch."""


@dataclass
class Check:
    name: str
    status: str
    detail: str


def _message(err: BaseException) -> str:

    if isinstance(err, UserError):
        return " / ".join(line.strip() for line in err.render().splitlines() if line.strip())
    return f"{type(err).__name__}: {err}".splitlines()[0]


def _attempt(name: str, fn: Callable[[], str], verbose: bool) -> Check:
    try:
        return Check(name, PASS, fn())
    except Exception as err:  # noqa: BLE001 - every failure becomes a table row
        if verbose:
            traceback.print_exc()
        return Check(name, FAIL, _message(err))


# ----------------------------------------------------------------------------- host checks
def host_checks() -> tuple[list[Check], bool, Optional[str]]:
    """Python, torch/GPU and tensorrt_llm rows; plus whether a GPU is usable and the installed version."""
    rows = [Check("python", PASS, f"{platform.python_version()} on {platform.system()} {platform.machine()}")]
    gpu = False
    try:
        import torch

        gpu = bool(torch.cuda.is_available())
        rows.append(Check("torch / GPU", PASS if gpu else FAIL,
                          f"torch {torch.__version__}, " + (f"CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}"
                                                           if gpu else "no GPU (torch.cuda.is_available() is False)")))
    except ImportError as err:
        rows.append(Check("torch / GPU", FAIL, f"no torch: {err}"))
    version: Optional[str] = None
    if importlib.util.find_spec("tensorrt_llm") is None:

        rows.append(Check("tensorrt_llm", FAIL, "no tensorrt_llm: not installed; " + INSTALL_HINT))
        return rows, gpu, None
    try:
        import tensorrt_llm

        version = str(getattr(tensorrt_llm, "__version__", "unknown"))
        rows.append(Check("tensorrt_llm", PASS, f"version {version}"))
    except Exception as err:  # noqa: BLE001 - a broken install (CUDA, a dependency) is a row, not a crash
        rows.append(Check("tensorrt_llm", FAIL, f"installed but cannot be imported: {_message(err)}"))
    return rows, gpu, version


def release_checks(version: str) -> list[Check]:
    """Names each backend imports, and what the release does with seeds and KV cache dtypes."""

    rows = []
    for backend, names in (("trtllm", api.ENGINE_NAMES), ("trtllm_pytorch", api.PYTORCH_NAMES)):
        def resolve(backend: str = backend, names: Any = names) -> str:
            api.resolve_names(backend, version, names)
            return f"{len(names)} names: " + ", ".join(f"{m}.{n}" for m, n, _ in names)
        rows.append(_attempt(f"names for backend={backend}", resolve, False))
    engine = rows[0]
    if engine.status == FAIL:  # a release past upstream's removal: not a fault of this host
        rows[0] = Check(engine.name, SKIP, f"{ENGINE_REMOVED} ({engine.detail})")
    else:
        rows.append(Check("engine backend upstream", PASS, ENGINE_REMOVED))
    seeds = api.pytorch_per_request_seeds(version)
    rows.append(Check("seeds (trtllm_pytorch)", PASS, "per-request seeds honoured" if seeds else
                      "SamplingParams.seed ignored by this release's PyTorch sampler: sampled tasks are not "
                      "reproducible from the seed and bypass the generation cache"))
    rows.append(Check("KV cache dtypes (trtllm_pytorch)", PASS, ", ".join(api.pytorch_kv_cache_dtypes(version))))
    return rows


# ----------------------------------------------------------------------------- GPU checks
def _model(path: Optional[str]) -> Any:

    if path:
        return ModelConfig(name="doctor", hf_id=Path(path).name, path=str(Path(path).expanduser()))

    return ModelConfig(name="doctor", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct", path=str(smollm2_checkpoint()))


def _limits() -> Any:

    return TaskLimits(max_input_len=1024, max_output_len=2, max_batch_size=8)


def engine_build_and_hit(model: Any) -> str:

    seen = []
    for _ in range(2):
        backend = TRTLLMEngineBackend(TRTLLMBackendConfig(max_num_tokens=1024), model=model,
                                      quant=QuantConfig(name="none"), limits=_limits(), progress=False)
        backend.preflight()
        with backend:
            info = backend.info()
            seen.append(info.details.get("engine_cache"))
            backend.generate([_request("The capital of France is")])
    if seen != ["miss", "hit"]:
        raise RuntimeError(f"engine cache: expected a build then a hit, got {seen}")
    if info.spec.quant_algo is not None or info.spec.kv_cache_quant_algo is not None:
        raise RuntimeError(f"effective spec read back as {info.spec}, expected no quantization")
    return f"built, then loaded from the cache; effective spec {info.spec}"


def _request(prompt: str) -> Any:

    return GenerationRequest(prompt=prompt, max_tokens=2)


def pytorch_fp8_kv_and_parity(model: Any, parity: bool) -> tuple[Check, Check]:
    """The FP8 KV cache spec read back on the PyTorch backend; then MMLU prompt-token parity on that LLM."""

    backend = TRTLLMPyTorchBackend(TRTLLMPyTorchBackendConfig(max_num_tokens=1024), model=model,
                                   quant=QuantConfig(name="fp8_kv_only", kv_cache_quant_algo="FP8"),
                                   limits=_limits(), progress=False)
    backend.preflight()
    with backend:
        spec = backend.info().spec
        kv = Check("FP8 KV cache spec (trtllm_pytorch)", PASS if spec.kv_cache_quant_algo == "FP8" else FAIL,
                   f"effective spec {spec}")
        if not parity:
            return kv, Check("MMLU prompt parity", SKIP, "tensorrt_llm.evaluate.mmlu is not importable")
        return kv, _attempt("MMLU prompt parity", lambda: mmlu_parity(backend), False)


PARITY_ROWS = (  # (question, A, B, C, D, answer): the formatting, not the content, is under test
    ("What is 2 + 3?", "4", "5", "6", "7", "B"),
    ("Which number is even?", "3", "9", "8", "1", "C"),
    ("How many sides has a triangle?", "3", "4", "5", "6", "A"),
    ("Which is a prime number?", "4", "6", "9", "7", "D"),
)


def mmlu_parity(backend: Any) -> str:
    """Token ids of the runner's MMLU prompts against TensorRT-LLM's MMLU evaluator, on one LLM object."""
    from tensorrt_llm.evaluate.mmlu import MMLU

    subject = "elementary_mathematics"
    questions = [Question(subject, r[0], tuple(r[1:5]), LETTERS.index(r[5]), i) for i, r in enumerate(PARITY_ROWS)]
    shots, tests = questions[:2], questions[2:]
    upstream = MMLU(dataset_path=tempfile.gettempdir(), num_fewshot=len(shots))
    header = upstream.gen_prompt(csv_frame([list(r) for r in PARITY_ROWS[:2]]), subject, len(shots))
    frame = csv_frame([list(r) for r in PARITY_ROWS[2:]])
    tokenizer = backend._llm.tokenizer
    for i, q in enumerate(tests):
        theirs_text = header + upstream.format_example(frame, i, include_answer=False)
        ours_text = build_prompt(q, shots)
        if theirs_text != ours_text:
            raise RuntimeError(f"prompt text differs for question {i}: {ours_text[-80:]!r} vs {theirs_text[-80:]!r}")
        ours, theirs = backend._encode_request(_request(ours_text)), list(tokenizer.encode(theirs_text))
        if ours != theirs:
            raise RuntimeError(f"prompt token ids differ for question {i}: {len(ours)} vs {len(theirs)} tokens")
    return f"{len(tests)} prompts: identical text and token ids"


# ----------------------------------------------------------------------------- the command
def run_checks(model_path: Optional[str], verbose: bool = False) -> list[Check]:
    rows, gpu, version = host_checks()
    if version is None:
        return rows + [Check("GPU checks", SKIP, "need tensorrt_llm")]
    rows += release_checks(version)
    if not gpu:
        return rows + [Check("GPU checks", SKIP, "no GPU")]
    os.environ.setdefault("RUNNER_CACHE_DIR", tempfile.mkdtemp(prefix="runner-doctor-"))
    try:
        model = _model(model_path)
    except Exception as err:  # noqa: BLE001
        return rows + [Check("model", FAIL, _message(err))]
    if any(r.name == "names for backend=trtllm" and r.status == SKIP for r in rows):
        rows.append(Check("engine build + cache hit (trtllm)", SKIP, "this release has no engine backend"))
    else:
        rows.append(_attempt("engine build + cache hit (trtllm)", lambda: engine_build_and_hit(model), verbose))
    try:
        import tensorrt_llm.evaluate.mmlu  # noqa: F401 - TensorRT-LLM's own MMLU evaluator, for the parity run
        parity = True
    except Exception:  # noqa: BLE001 - absent, or importing an engine module this release lacks
        parity = False
    try:
        rows += list(pytorch_fp8_kv_and_parity(model, parity))
    except Exception as err:  # noqa: BLE001
        if verbose:
            traceback.print_exc()
        rows.append(Check("FP8 KV cache spec (trtllm_pytorch)", FAIL, _message(err)))
    return rows


def table(rows: list[Check]) -> str:
    width = max(len(r.name) for r in rows)
    return "\n".join(f"{r.status:<4}  {r.name:<{width}}  {r.detail}" for r in rows)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a local Hugging Face checkpoint (default: the embedded SmolLM2-135M)")
    parser.add_argument("--verbose", action="store_true", help="print tracebacks of failed checks")
    args = parser.parse_args(argv)
    rows = run_checks(args.model, args.verbose)
    print(table(rows))
    failed = [r for r in rows if r.status == FAIL]
    print(f"\n{len(failed)} failed, {sum(r.status == PASS for r in rows)} passed, "
          f"{sum(r.status == SKIP for r in rows)} skipped")
    return 1 if failed else 0

