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
