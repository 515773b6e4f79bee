"""lm-eval's non-mean aggregations as corpus metrics: the additive forms (summed per-document statistics) equal
lm-eval's own functions (the oracle) on resampled items, for the perplexities and sacrebleu's BLEU, chrF, chrF++
and TER; any other aggregation is recomputed whole."""

from __future__ import annotations

import random

import numpy as np
import pytest

from evaluators.tasks.harness.corpus import corpus_metric
from evaluators.tasks.harness.evaluator import _lm_value

WORDS = "the a cat dog sat ran on under mat rug quickly slowly red blue big small house tree".split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))


def stored(items):
    """Items as samples.jsonl keeps them (tuples as lists), which the metric reads back."""
    return [list(i) if isinstance(i, tuple) else i for i in items]


@pytest.mark.parametrize("name", ["bleu", "chrf", "chrf++", "ter"])
def test_sacrebleu_metrics_from_summed_statistics_equal_lm_eval(name):
    from lm_eval.api import metrics

    aggregation = {"bleu": metrics.bleu, "chrf": metrics.chrf, "chrf++": metrics.chrfpp, "ter": metrics.ter}[name]
    rng = random.Random(7)
    items = [(sentence(rng), sentence(rng)) for _ in range(30)]  # (reference, prediction), as lm-eval pools them
    found = corpus_metric(name, aggregation, 1.0, _lm_value)
    assert found.statistics is not None and found.compute(stored(items)) == pytest.approx(aggregation(items))
    rows = np.asarray(found.statistics(stored(items)))
    draws = [[rng.randrange(len(items)) for _ in items] for _ in range(20)]
    expected = [aggregation([items[i] for i in idx]) for idx in draws]
    for idx, value in zip(draws, expected):
        assert found.from_statistics(rows[idx].sum(axis=0)) == pytest.approx(value, rel=1e-9, abs=1e-9)
    many = np.stack([rows[idx].sum(axis=0) for idx in draws])  # many resamples in one call, one value each
    assert np.asarray(found.from_statistics(many)) == pytest.approx(expected, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("name", ["weighted_perplexity", "bits_per_byte"])
def test_pooled_perplexities_from_summed_pairs_equal_lm_eval(name):
    from lm_eval.api import metrics

    aggregation = getattr(metrics, name)
    rng = random.Random(3)
    items = [(-rng.uniform(20, 300), rng.randint(10, 90)) for _ in range(25)]
    found = corpus_metric(name, aggregation, 1.0, _lm_value)
    rows = np.asarray(found.statistics(stored(items)))
    draws = [[rng.randrange(len(items)) for _ in items] for _ in range(20)]
    expected = [aggregation([items[i] for i in idx]) for idx in draws]
    for idx, value in zip(draws, expected):
        assert found.from_statistics(rows[idx].sum(axis=0)) == pytest.approx(value)
    assert np.asarray(found.from_statistics(np.stack([rows[idx].sum(axis=0) for idx in draws]))) == pytest.approx(expected)


def test_other_aggregations_are_recomputed_and_scaled():
    def agreement(items):  # a task's own aggregation over (gold, prediction) tuples
        assert all(isinstance(i, tuple) for i in items)  # lm-eval's shape, not the stored lists
        return sum(g == p for g, p in items) / len(items)

    found = corpus_metric("agree", agreement, 100.0, _lm_value)
    items = [(1, 1), (0, 0), (1, 0), (0, 0), (1, 1), (0, 1)]
    assert found.statistics is None and found.from_statistics is None
    assert found.compute(stored(items)) == pytest.approx(100 * 4 / 6)


def test_paired_bleu_with_no_four_gram_match_is_decided():
    """No 4-gram of any prediction matches its reference: the summed match count is 0, where BLEU's log is defined
    only on the right. The delta method's gradient steps there must stay inside the domain (it raised
    'math domain error' from sacrebleu)."""
    from lm_eval.api import metrics

    from runner.stats.numerics.corpus_bootstrap import paired_corpus_test, replicate

    rng = random.Random(3)
    ref = [(sentence(rng), " ".join(rng.sample(WORDS, 3))) for _ in range(20)]  # 3-word predictions: no 4-grams
    new = [(r, " ".join(rng.sample(WORDS, 3))) for r, _ in ref]
    bleu = corpus_metric("bleu", metrics.bleu, 1.0, _lm_value)
    reps = replicate(stored(ref), stored(new), bleu, n_boot=99, seed=0)
    assert np.isfinite(reps.spreads).all() and np.isfinite(reps.spread)
    assert paired_corpus_test(reps, 0.05, 0.2, True, 0.0, "regression").p_value <= 1.0
