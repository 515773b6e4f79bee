"""The bootstrap rule for corpus metrics: resamples (documents, or whole clusters), the unpaired spread, and the
paired corpus bootstrap, whose interval inverts its p-value. Oracles: the bootstrap variance of a mean (the plug-in
variance over n) and scipy's own paired basic bootstrap on a pooled perplexity."""

from __future__ import annotations

import math

import numpy as np
import pytest

from runner.contract.evaluator import CorpusMetric
from runner.stats.corpus import bootstrap_sigma, paired_corpus_test, replicate, resamples


def perplexity(items):
    """exp(-sum of log-likelihoods / sum of words): lm-eval's word_perplexity over (loglikelihood, words) items."""
    return math.exp(-sum(ll for ll, _ in items) / sum(w for _, w in items))


pooled_perplexity = CorpusMetric("word_perplexity", perplexity)
additive_perplexity = CorpusMetric("word_perplexity", perplexity, lambda items: np.asarray(items, dtype=float),
                                   lambda s: math.exp(-s[0] / s[1]))


def corpus(seed, n=40, shift=0.0):
    rng = np.random.default_rng(seed)
    words = rng.integers(20, 80, size=n)
    per_word = rng.normal(-2.5, 0.3, size=n)
    return [(float(p * w), int(w)) for p, w in zip(per_word, words)], [(float((p + shift) * w), int(w))
                                                                       for p, w in zip(per_word, words)]


def test_resamples_draw_documents_or_whole_clusters():
    plain = resamples(5, 50, seed=1)
    assert all(len(r) == 5 and set(r) <= set(range(5)) for r in plain)
    assert plain == resamples(5, 50, seed=1) and plain != resamples(5, 50, seed=2)
    labels = ["a", "a", "a", "b", "c", "c"]  # clusters of 3, 1 and 2 samples
    for r in resamples(6, 200, seed=3, clusters=labels):
        counts = {label: sum(labels[i] == label for i in r) for label in "abc"}
        # every drawn cluster comes whole: its samples appear equally often
        assert all(r.count(i) == r.count(j) for i in range(6) for j in range(6) if labels[i] == labels[j])
        assert counts["a"] % 3 == 0 and counts["c"] % 2 == 0
        assert sum(v // {"a": 3, "b": 1, "c": 2}[k] for k, v in counts.items()) == 3  # three clusters drawn


def test_bootstrap_sigma_of_a_mean_is_the_plug_in_spread():
    values = [0.0, 1.0, 4.0, 9.0, 16.0, 25.0, 36.0, 49.0]
    expected = float(np.std(values))  # the bootstrap variance of a mean is var_plugin / n: sigma = sd (ddof 0)
    found = bootstrap_sigma(values, CorpusMetric("mean", lambda xs: sum(xs) / len(xs)), n_boot=4000, seed=0)
    assert found == pytest.approx(expected, rel=0.05)


def test_paired_interval_matches_scipy_basic_bootstrap_on_pooled_perplexity():
    from scipy import stats as sps

    ref, new = corpus(7, shift=-0.05)  # the new build loses 0.05 nats per word
    reps = replicate(ref, new, pooled_perplexity, n_boot=4000, seed=0)
    result = paired_corpus_test(reps, alpha=0.05, beta=0.2, higher_is_better=False)
    assert result.reference_mean == pytest.approx(perplexity(ref))
    assert result.new_mean == pytest.approx(perplexity(new))
    assert result.mean_diff == pytest.approx(perplexity(new) - perplexity(ref))

    columns = [np.array(c, dtype=float) for c in (*zip(*ref), *zip(*new))]

    def diff(ll_r, w_r, ll_n, w_n, axis=-1):
        return np.exp(-ll_n.sum(axis) / w_n.sum(axis)) - np.exp(-ll_r.sum(axis) / w_r.sum(axis))

    oracle = sps.bootstrap(columns, diff, paired=True, vectorized=True, n_resamples=4000, method="basic",
                           confidence_level=0.90, random_state=np.random.default_rng(11))
    low, high = result.ci
    width = oracle.confidence_interval.high - oracle.confidence_interval.low
    assert low == pytest.approx(oracle.confidence_interval.low, abs=0.1 * width)
    assert high == pytest.approx(oracle.confidence_interval.high, abs=0.1 * width)
    assert result.sd_diff == pytest.approx(oracle.standard_error * math.sqrt(len(ref)), rel=0.1)


@pytest.mark.parametrize("shift", [-0.08, -0.02, 0.0, 0.03])
def test_verdict_and_interval_agree_for_both_claims(shift):
    ref, new = corpus(3, shift=shift)
    reps = replicate(ref, new, pooled_perplexity, n_boot=999, seed=5)
    margin, tolerance = 0.0, 0.5
    regression = paired_corpus_test(reps, 0.05, 0.2, higher_is_better=False, tolerance=margin, gate="regression")
    within = paired_corpus_test(reps, 0.05, 0.2, higher_is_better=False, tolerance=tolerance, gate="noninferiority")
    low, high = regression.ci
    assert within.ci == regression.ci  # one set of replicates, one interval
    # lower is better: a regression is shown when the whole interval lies above +margin, GO when below +tolerance
    assert (not regression.passed) == (low > margin)
    assert within.passed == (high < tolerance)
    if shift <= -0.08:
        assert not regression.passed and regression.p_value == pytest.approx(1 / 1000)


def test_uniformly_worse_documents_give_the_smallest_p_value():
    ref = [(-2.0 * 30, 30), (-2.1 * 40, 40), (-2.2 * 50, 50)]
    new = [(ll - 0.5 * w, w) for ll, w in ref]  # every document loses 0.5 nats per word
    reps = replicate(ref, new, pooled_perplexity, n_boot=999, seed=0)
    result = paired_corpus_test(reps, 0.05, 0.2, higher_is_better=False)
    # each resample's perplexity rises by the factor e^0.5 exactly; the basic replicate 2 D - D* is extreme only if
    # a resample's reference perplexity doubled, which documents between e^2.0 and e^2.2 per word cannot do
    assert np.allclose(reps.differences / [perplexity([ref[i] for i in r]) for r in resamples(3, 999, 0)],
                       math.exp(0.5) - 1)
    assert result.p_value == pytest.approx(1 / 1000) and not result.passed


def test_the_additive_form_gives_the_same_replicates_as_recomputing():
    ref, new = corpus(5, shift=-0.03)
    plain = replicate(ref, new, pooled_perplexity, n_boot=300, seed=2)
    summed = replicate(ref, new, additive_perplexity, n_boot=300, seed=2)
    assert np.allclose(plain.differences, summed.differences, rtol=1e-12, atol=0)
    assert bootstrap_sigma(ref, additive_perplexity, 300, 4) == pytest.approx(bootstrap_sigma(ref, pooled_perplexity, 300, 4))


def test_too_few_samples_or_resamples_are_refused():
    with pytest.raises(ValueError, match="at least 2 samples"):
        replicate([(-1.0, 1)], [(-1.0, 1)], pooled_perplexity)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_sigma([1.0, 2.0], CorpusMetric("sum", sum), n_boot=0, seed=0)
    with pytest.raises(ValueError, match="equal lengths"):
        replicate([(-1.0, 1)] * 2, [(-1.0, 1)] * 3, pooled_perplexity)
