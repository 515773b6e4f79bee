"""The evaluator contract and the records it produces."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, Union

from runner.backends.base import GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult

Request = Union[GenerationRequest, LoglikelihoodRequest]
Response = Union[str, LoglikelihoodResult]


@dataclass(frozen=True)
class Sample:
    """One evaluation item. ``id`` is stable across runs and seeds (source split and row)."""

    id: str
    prompt: str
    target: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScoredSample:
    """What a person debugs with: the prediction, the target and the per-sample score (metric scale)."""

    sample_id: str
    prompt: str
    prediction: str
    target: str
    score: float
    meta: dict[str, Any] = field(default_factory=dict)


class Evaluator(Protocol):
    metric: str
    higher_is_better: bool

    def samples(self, num_samples: int, seed: int) -> list[Sample]: ...

    def requests(self, sample: Sample) -> list[Request]: ...

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample: ...

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]: ...

    def extra_acc_spec(self) -> str | None: ...


class EvaluatorHooks(Protocol):
    """Optional members an evaluator may define; ``runner.job`` checks for each and skips it when absent.

    - ``uses_loglikelihood: bool`` and ``loglikelihood_fix: str``: the task sends log-likelihood
      requests; a backend without them is refused up front with ``loglikelihood_fix`` as the advice.
    - ``bind_backend(info)``: called once the model is loaded, before ``extra_acc_spec()``, for a
      protocol that depends on what the backend can do (constrained decoding or free generation).
    - ``use_token_counter(count)``: receives the backend's ``count_tokens`` before ``samples()``, for
      length filters measured in the model's own tokens (perplexity's minimum document length).
    - ``score_batch(samples, responses)``: scores every sample at once (HumanEval runs programs in parallel).
    - ``extra_gates(metrics, reference)``: further pass/fail checks against the same reference entry
      (SCORE's consistency rate); a failed gate fails the job with the regression exit status.
    - ``reference_extras(metrics)``: extra keys written into a recorded reference entry.
    - ``source_used: str``: where the rows came from (hub, local, packaged), recorded as provenance.
    """

