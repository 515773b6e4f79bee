"""lm-eval's non-mean aggregations as corpus metrics (:class:`runner.contract.evaluator.CorpusMetric`), with their
additive form where the metric is a function of summed per-document statistics.

- ``weighted_perplexity`` and ``bits_per_byte`` pool ``(log-likelihood, words or bytes)``: the rows are the pairs.
- ``bleu``, ``chrf``, ``chrf++`` and ``ter`` are sacrebleu's corpus scores as lm-eval calls them: the rows are
  sacrebleu's per-sentence statistics of the same metric object (after lm-eval's own ``_sacreformat``), and the
  score comes from their sums, as sacrebleu's paired bootstrap computes it.

Each score takes the sums as an array whose last axis is the statistics (one row, or many resamples at once).

Any other aggregation is recomputed whole on each resample. The additive forms are tested equal to lm-eval's
functions on resampled items (``tests/tasks/test_lm_eval_corpus.py``).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from runner.contract.evaluator import CorpusMetric


def corpus_metric(name: str, aggregation: Callable[[Sequence[Any]], float], scale: float,
                  as_lm_eval: Callable[[Any], Any]) -> CorpusMetric:
    """The metric ``name`` pooled by lm-eval's ``aggregation`` over items stored as JSON (``as_lm_eval`` turns one
    back into lm-eval's shape), times ``scale``."""

    def compute(items: Sequence[Any]) -> float:
        return scale * float(aggregation([as_lm_eval(i) for i in items]))

    form = _additive(aggregation)
    if form is None:
        return CorpusMetric(name, compute)
    rows, score = form

    def statistics(items: Sequence[Any]) -> Any:
        return rows([as_lm_eval(i) for i in items])

    def from_statistics(summed: Any) -> Any:
        return scale * score(summed)

    return CorpusMetric(name, compute, statistics, from_statistics)


def _additive(aggregation: Callable[..., float]) -> tuple[Callable[[list[Any]], Any], Callable[[Any], float]] | None:
    """(per-item rows, metric from their sums) for the aggregations that have them; None for the others."""
    import numpy as np
    from lm_eval.api import metrics

    if aggregation is metrics.weighted_perplexity:
        return _pairs, lambda s: np.exp(-np.asarray(s)[..., 0] / np.asarray(s)[..., 1])
    if aggregation is metrics.bits_per_byte:
        return _pairs, lambda s: -np.asarray(s)[..., 0] / np.asarray(s)[..., 1] / math.log(2)
    sacre = _sacrebleu_metric(aggregation)
    if sacre is None:
        return None

    def rows(items: list[Any]) -> Any:
        refs, preds = metrics._sacreformat([i[0] for i in items], [i[1] for i in items])
        return np.asarray(sacre._extract_corpus_statistics(preds, refs))

    def score(summed: Any) -> Any:  # sacrebleu scores one row of sums at a time
        return np.apply_along_axis(lambda row: sacre._compute_score_from_stats(list(row)).score, -1,
                                   np.asarray(summed, dtype=float))

    return rows, score


def _pairs(items: list[Any]) -> Any:
    import numpy as np

    return np.asarray([[float(a), float(b)] for a, b in items], dtype=float)


def _sacrebleu_metric(aggregation: Callable[..., float]) -> Any:
    """The sacrebleu metric object lm-eval's aggregation builds (its compat functions' defaults), or None."""
    from lm_eval.api import metrics
    from sacrebleu.metrics import BLEU, CHRF, TER

    made = {metrics.bleu: lambda: BLEU(), metrics.chrf: lambda: CHRF(), metrics.chrfpp: lambda: CHRF(word_order=2),
            metrics.ter: lambda: TER()}.get(aggregation)
    return made() if made is not None else None
