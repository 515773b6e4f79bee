"""ARC-Easy as lm-evaluation-harness's ``arc_easy`` task scores it: cloze multiple choice by log-likelihood.

Each question is ``Question: {question}\\nAnswer:``; every answer option is a continuation
``" {text}"``, scored by its log-likelihood. The prediction is the option with the highest one
(``accuracy``); ``accuracy_norm`` divides each log-likelihood by the option's length in bytes first,
as lm-eval's ``acc_norm``. Zero-shot; the subset is a seeded sample of the split's rows.

Rows come through ``datasets`` from a local copy (``task.dataset.local_path``: a Hub snapshot of
``allenai/ai2_arc`` config ``ARC-Easy``, or one JSON Lines file in its layout) or the Hub.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, Sequence

from evaluators.base import Evaluator
from evaluators.checks import check_choice
from evaluators.deviations import chat_deviation
from evaluators.metrics import mean
from runner.contract.errors import DataError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.requests import Request, Response, LoglikelihoodRequest
from runner.contract.task_config import DatasetConfig, TaskConfig


@dataclass
class ArcEasyTaskConfig(TaskConfig):
    METRICS: ClassVar[tuple[str, ...]] = ("accuracy", "accuracy_norm")
    metric: str = "accuracy"  # accuracy | accuracy_norm (lm-eval's acc / acc_norm)
    chance_level: Optional[float] = None  # by each question's option count (3 to 5)
    dataset: DatasetConfig = field(default_factory=lambda: DatasetConfig(hub_id="allenai/ai2_arc", hub_config="ARC-Easy"))


CONFIG = ArcEasyTaskConfig
"""The task's schema, registered as ``schema_task_arc_easy``."""
METRICS = ArcEasyTaskConfig.METRICS


class ArcEasyEvaluator(Evaluator):
    uses_loglikelihood = True
    loglikelihood_fix = "ARC-Easy scores answer options by log-likelihood: use backend=hf"

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        check_choice(config.metric, METRICS, "ARC-Easy metric", "task.metric")

    def extra_acc_spec(self) -> str | None:
        return ",".join(chat_deviation(self.config)) or None

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        ds = self.config.dataset
        rows = list(self.load_rows(packaged="set task.dataset.local_path to a copy of allenai/ai2_arc (ARC-Easy)"))
        where = f"task.dataset ({self.source_used})"
        out = []
        for i in self.seeded_subset(len(rows), num_samples, seed, "arc_easy"):
            row = rows[i]
            labels, texts = list(row["choices"]["label"]), list(row["choices"]["text"])
            if row["answerKey"] not in labels:
                raise DataError("the answer key is not among the option labels", where=f"{where}, row {i}",
                                given=row["answerKey"], allowed=", ".join(labels))
            out.append(Sample(id=f"{ds.split}/{row['id']}", prompt=f"Question: {row['question']}\nAnswer:",
                              target=row["answerKey"], meta={"labels": labels, "texts": texts}))
        return out

    def requests(self, sample: Sample) -> list[Request]:
        return [LoglikelihoodRequest(sample.prompt, f" {text}") for text in sample.meta["texts"]]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        labels, texts = sample.meta["labels"], sample.meta["texts"]
        raw = [r.logprob for r in responses]  # type: ignore[union-attr]
        norm = [lp / len(f" {t}".encode()) for lp, t in zip(raw, texts)]
        pick, pick_norm = labels[raw.index(max(raw))], labels[norm.index(max(norm))]
        scores = {"accuracy": 100.0 * (pick == sample.target), "accuracy_norm": 100.0 * (pick_norm == sample.target)}
        return ScoredSample(sample.id, sample.prompt, pick if self.metric == "accuracy" else pick_norm, sample.target,
                            scores[self.metric], {"options": len(labels)} | scores)

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        if not scored:
            return {self.metric: float("nan")}
        return {m: mean(s.meta[m] for s in scored) for m in METRICS}

    def chance_level(self, samples: Sequence[Sample]) -> float | None:
        return mean(100.0 / len(s.meta["labels"]) for s in samples) if samples else None
