"""The evaluator contract: what every task implements, the optional steps it may take part in (declared,
with defaults), and the records it produces."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from runner.contract.backend import Capabilities
from runner.contract.requests import Request, Response


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


CORPUS_ITEM = "corpus_item"
"""The meta field of a sample's corpus item: what a corpus metric pools (JSON values, kept in samples.jsonl and with
the reference's per-sample scores so a paired bootstrap can recompute the metric on both sides)."""


LOGLIKELIHOODS = "loglikelihoods"
"""The meta field of a log-likelihood task's sample: every scored option's (or document's) log-likelihood, in the
order of its requests; the A/A replicate reads how far they move (runner/job/replicate.py)."""


TOP_TOKENS = "top_tokens"
"""The meta field of a teacher-forced text's per-position top-k record (:mod:`runner.contract.top_tokens`): the
perplexity task keeps it in samples.jsonl and with the reference's per-sample rows, which a run's top-1 agreement
and KL divergence against the reference are computed from."""


ROW = "row"
"""The meta field naming a sample's row for a person, where the sample id is not the dataset's own id (lm-eval's
samples are keyed by doc index): ``id=Mercury_7175875``, or ``doc index 12`` when the row carries no id."""
ROW_ID_KEYS = ("id", "question_id", "qid", "example_id", "uid", "idx", "ind")
"""Fields in which datasets carry their own row id (ARC's ``id``, BoolQ's ``idx``, HellaSwag's ``ind``), first wins."""


def row_label(doc: Any, doc_index: Any) -> str:
    """The row a person looks up: the document's own id where it carries one, else the doc index, said so."""
    for key in ROW_ID_KEYS:
        value = doc.get(key) if isinstance(doc, dict) else None
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return f"{key}={value}"
    return f"doc index {doc_index}"


@dataclass(frozen=True)
class CorpusMetric:
    """A task metric computed over all samples' items at once, not as the mean of per-sample scores: corpus BLEU,
    a perplexity pooled over words or bytes. ``compute(items)`` gives the metric on the task's scale; the
    decision then bootstraps it over samples (resampling documents, or a group's subtasks as clusters).

    Optional additive form (both or neither): ``statistics(items)``, one row of numbers per item, and
    ``from_statistics(sums)``, the metric from their column sums, equal to ``compute`` on any multiset of
    items; ``sums`` is an array whose last axis holds the statistics (shape ``(..., k)``, one value returned per
    row), so many resamples are scored in one call. A resample then sums rows instead of recomputing the metric
    (sacrebleu's own bootstrap does so), and the paired rule takes the metric's gradient from it."""

    name: str
    compute: Callable[[Sequence[Any]], float]
    statistics: Callable[[Sequence[Any]], Any] | None = None
    from_statistics: Callable[[Any], Any] | None = None


class Evaluator(ABC):
    """What every task implements, and the optional steps it may take part in (declared, with defaults).

    Required: ``samples(n, seed)`` (seeded, reproducible, stratified where the task is),
    ``requests(sample)``, ``score(sample, responses)``, ``aggregate(scored)`` and
    ``extra_acc_spec()`` (the protocol deviations that enter the reference key). The pipeline calls
    the optional steps on every evaluator; the defaults below do nothing.
    """

    uses_loglikelihood: bool = False
    """The task sends log-likelihood requests; a backend without them is refused before loading."""
    loglikelihood_fix: str = "use a backend that scores log-likelihood requests (backend=hf)"
    source_used: str | None = None
    """Where the rows came from (hub, local, packaged), recorded as provenance and checked before pairing."""

    def __init__(self, config: Any, source_used: str | None = None) -> None:
        """Every task calls this first; ``source_used``: where the rows come from when known up front
        (``generated``), else set when the rows are loaded."""
        self.config = config
        self.metric: str = config.metric
        self.higher_is_better: bool = config.higher_is_better
        self.source_used = source_used

    @abstractmethod
    def samples(self, num_samples: int, seed: int) -> list[Sample]: ...

    @abstractmethod
    def requests(self, sample: Sample) -> list[Request]: ...

    @abstractmethod
    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample: ...

    @abstractmethod
    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]: ...

    @abstractmethod
    def extra_acc_spec(self) -> str | None: ...

    # ------------------------------------------------------------------ optional steps
    def bind_backend(self, info: Any) -> None:
        """Called once the model is loaded, before ``extra_acc_spec()``, for a protocol that depends on
        what the backend can do (constrained decoding or free generation)."""

    def use_token_counter(self, count: Callable[[Sequence[str]], list[int]]) -> None:
        """Receives the backend's token counter before ``samples()``, when the backend has one (length
        filters measured in the model's own tokens)."""

    def use_capabilities(self, capabilities: Capabilities) -> None:
        """Receives the backend's declared :class:`runner.contract.backend.Capabilities` before any model loads,
        for a task that can only tell from its samples whether the backend can answer them (a rolling text
        longer than one window), so it refuses in ``samples()``, before any request."""

    def score_batch(self, samples: Sequence[Sample], responses: Sequence[Sequence[Response]]) -> list[ScoredSample]:
        """Score every sample; override to score in parallel (HumanEval runs programs)."""
        return [self.score(sample, resp) for sample, resp in zip(samples, responses)]

    def extra_gates(self, metrics: dict[str, float], reference: Any) -> list[Any]:
        """Further pass/fail checks against the same reference entry (runner.stats.decision.Gate)."""
        return []

    def reference_extras(self, metrics: dict[str, float]) -> dict[str, float]:
        """Extra keys written into a recorded reference entry."""
        return {}

    def corpus_metric(self) -> CorpusMetric | None:
        """The task metric when it is not the mean of per-sample scores (each sample then carries its
        ``meta[CORPUS_ITEM]``); None: the mean of the scores, as for every accuracy."""
        return None

    def score_bounds(self) -> tuple[float, float] | None:
        """The range every per-sample score lies in (ROUGE x 100: 0 to 100), called after ``samples()``; a paired
        test of a continuous metric then holds its alpha at any n (the betting test). None: unbounded or unknown
        (per-document perplexity), where only the asymptotic t-test is left; 0/100 scores need no declaration."""
        return None

    def answer_unparsed(self, scored: ScoredSample) -> bool | None:
        """Whether the task could read no answer from the generated text (GSM8K's extraction found no number), for
        the truncation- and error-aware verdict (:mod:`runner.contract.indicators`); None: the task does not say (an
        empty text counts as unparsed whatever the task says)."""
        return None

    def chance_level(self, samples: Sequence[Sample]) -> float | None:
        """A guessing model's score on these samples, or the metric's floor (the task's declared value)."""
        return self.config.chance_level
