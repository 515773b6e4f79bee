"""ROUGE as upstream's evaluators compute it: rouge-score's scorer (Google's ROUGE-1.5.5
reimplementation) per sample, and the `evaluate` rouge metric's aggregate, the median of 1000
bootstrap means drawn from numpy's global generator (shared by CNN/DailyMail and HumanEval's ROUGE protocol)."""

from __future__ import annotations

import logging
from typing import Sequence

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")  # the `evaluate` metric's default, in its order
BOOTSTRAP_RESAMPLES = 1000  # rouge-score's BootstrapAggregator default (n_samples), median = its "mid"


class RougeScorer:
    """ROUGE-1/2/L/Lsum F-measures (0-100) of one prediction against one reference, via ``rouge-score``.

    ``rouge-score`` lower-cases, keeps [a-z0-9] tokens, and (for Lsum) splits summaries on newlines.
    """

    def __init__(self, use_stemmer: bool = False) -> None:

        from rouge_score import rouge_scorer

        logging.getLogger("absl").setLevel(logging.WARNING)  # rouge-score announces its default tokenizer at INFO
        self._scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer)

    def __call__(self, prediction: str, reference: str) -> dict[str, float]:
        scores = self._scorer.score(reference, prediction)  # rouge-score takes (target, prediction)
        return {name: 100.0 * scores[name].fmeasure for name in ROUGE_TYPES}


def bootstrap_medians(columns: Sequence[Sequence[float]], seed: int) -> list[float]:
    """Upstream's aggregate of each column, in turn: the median of 1000 bootstrap means.

    Each resample draws ``len(column)`` indices with replacement through ``RandomState.choice``,
    the legacy stream (frozen across numpy versions) that ``np.random.choice`` uses after
    ``np.random.seed(seed)``; the columns share one stream, as upstream's ROUGE types do.
    """
    import numpy as np

    rng = np.random.RandomState(seed)
    out = []
    for column in columns:
        values = np.asarray(column, dtype=float)
        population = np.arange(len(values))
        means = np.array([values[rng.choice(population, size=len(values))].mean()
                          for _ in range(BOOTSTRAP_RESAMPLES)])
        out.append(float(np.percentile(means, 50)))
    return out
