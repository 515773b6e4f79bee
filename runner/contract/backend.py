"""The backend contract shared by every implementation (hf, trtllm, trtllm_pytorch, openai, the fake):
what a task imposes on requests, what a backend reports and declares, and the :class:`Backend` base class."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from runner.contract.requests import GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult
from runner.contract.spec import AccuracySpec


@dataclass(frozen=True)
class TaskLimits:
    """Length limits and decoding features a task imposes on every request (TensorRT-LLM sizes its
    engine and sets up its executor from them)."""

    max_input_len: int
    max_output_len: int
    max_batch_size: int = 128
    # Schema-constrained decoding for requests with a json_schema: "none", "auto" (the backend's
    # library) or a library name; TensorRT-LLM sets it up when the LLM is created.
    guided_decoding: str = "none"


@dataclass(frozen=True)
class ChatFormat:
    """How prompts are wrapped before tokenization (a task setting, applied by the backend)."""

    apply_chat_template: bool = False
    system_prompt: str | None = None
    # keyword arguments of the chat template (``enable_thinking``...), sorted (key, value) pairs
    template_kwargs: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class BackendInfo:
    """What was actually loaded: the effective spec is the reference key."""

    name: str
    # its extra_acc_spec: the backend's own parts of the reference key (what it loaded that upstream's
    # protocol would not have, e.g. trtllm's calibration set), joined after the task's
    spec: AccuracySpec
    device: str
    model_path: str
    versions: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    # the spec is what the config declares (a served model), not read back from what was loaded
    spec_declared: bool = False


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, declared by its class and checked before any model loads."""

    loglikelihood: bool = True  # answers LoglikelihoodRequest
    token_counter: bool = False  # count_tokens() (length filters in the model's own tokens)
    per_request_seeds: bool = True  # a sampled request's seed decides its output
    loglikelihood_fix: str = ""  # without loglikelihood: what would make this backend score such requests
    # scores a LoglikelihoodRequest.rolling_window text longer than its window, in lm-eval's rolling windows
    # (without it such a text is refused before any request; one that fits one window is an ordinary request)
    rolling_windows: bool = False
    sampling: bool = True  # honours a request's temperature, top_p, top_k and seed
    chat_template_kwargs: bool = True  # passes ChatFormat.template_kwargs to the chat template


@dataclass(frozen=True)
class Perturbation:
    """One way a later run of the same model is likely to differ from a recording (batch size 1, the other dtype
    ``auto`` can choose, concurrency 1): its name, and the backend settings (``backend.<key>``) it replaces."""

    name: str
    settings: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class GpuNeeds:
    """How a job of this backend takes GPUs in a sweep that runs one job per GPU group.

    ``device_key``: the backend places itself with ``backend.device`` (``auto`` is replaced by
    ``cuda:k``); otherwise it uses every visible GPU and is narrowed with ``CUDA_VISIBLE_DEVICES``,
    ``per_job`` GPUs a job (tensor x pipeline parallel). ``per_job`` 0: no GPU (an HTTP client)."""

    device_key: bool = False
    per_job: int = 1


class Answerer(Protocol):
    """What answers requests in bulk, in request order: a backend, or the generation cache's view of one."""

    def generate(self, requests: Sequence[GenerationRequest]) -> list[str]: ...

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]: ...


class Backend(ABC):
    """A context manager answering requests in bulk; the constructor only validates its config.

    Heavy libraries are imported and the model loaded in ``__enter__``. ``generate`` and
    ``loglikelihood`` take every request of one kind at once and answer in request order;
    ``info()`` returns the EFFECTIVE accuracy spec read back from what was loaded."""

    capabilities: Capabilities = Capabilities()
    # backend settings (dotted, under ``backend.``) that change no answer, so the generation cache
    # ignores them: where a log goes, how long to wait, how often to retry
    answer_neutral_settings: tuple[str, ...] = ()
    progress: bool = False  # whether the job draws a progress bar for this backend's answers
    # the acceptance_length.yaml entry this run's speculative decoding is gated against; None: no such gate
    acceptance_key: str | None = None

    @classmethod
    def gpu_needs(cls, config: Any) -> GpuNeeds:
        """What a sweep job of this backend needs to be given (see :class:`GpuNeeds`)."""
        return GpuNeeds()

    def preflight(self) -> None:
        """Checks that need no model (libraries importable, a device present); run before anything loads."""

    @abstractmethod
    def __enter__(self) -> "Backend": ...

    @abstractmethod
    def __exit__(self, *exc: object) -> None: ...

    @abstractmethod
    def generate(self, requests: Sequence[GenerationRequest]) -> list[str]: ...

    @abstractmethod
    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]: ...

    @abstractmethod
    def info(self) -> BackendInfo: ...

    def host_fields(self) -> dict[str, str]:
        """This backend's part of the host fingerprint (:mod:`runner.contract.fingerprint`), once entered: the
        compute dtype, threads, batch budget, parallel degree, attention kernels or server it actually used."""
        return {}

    def perturbations(self) -> list[Perturbation]:
        """The A/A replicate's perturbations (``reference.noise=replicate``), once entered: the settings a later run
        on another host or configuration is likely to differ by; empty where the backend declares none."""
        return []

    def acceptance_length(self) -> float | None:
        """Mean acceptance length of speculative decoding over what was generated so far (accepted draft
        tokens plus one per speculative step, per step); None: no speculative decoding, or no such step."""
        return None

    def track(self, progress: Any) -> None:
        """Advance ``progress`` (the job's :class:`runner.contract.progress.Progress`) by each answer
        from now on; a backend that keeps no count ignores it."""

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts of ``texts`` (only where ``capabilities.token_counter``)."""
        raise NotImplementedError(f"{type(self).__name__} counts no tokens")

    def tokenizer_counter(self) -> Callable[[Sequence[str]], list[int]] | None:
        """Token counts as :meth:`count_tokens` gives them, without entering the backend (no weights loaded,
        no server started): a dry run draws a length-filtered subset with it. None where it needs the model."""
        return None
