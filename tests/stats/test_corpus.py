"""The bootstrap rule for corpus metrics: resamples (documents, or whole clusters), the unpaired spread, and the
paired corpus bootstrap-t, whose interval inverts its p-values. Oracles: the bootstrap variance of a mean (the
plug-in variance over n), scipy's paired t interval (the bootstrap-t's limit for normal differences), a
bootstrap-t written here with the perplexity's analytic gradient, and scipy's bootstrap standard error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from runner.contract.evaluator import CorpusMetric
from runner.stats.numerics.corpus_bootstrap import bootstrap_sigma, paired_corpus_test, replicate
from runner.stats.numerics.resampling import resamples


def perplexity(items):
    """exp(-sum of log-likelihoods / sum of words): lm-eval's word_perplexity over (loglikelihood, words) items."""
    return math.exp(-sum(ll for ll, _ in items) / sum(w for _, w in items))


pooled_perplexity = CorpusMetric("word_perplexity", perplexity)
additive_perplexity = CorpusMetric("word_perplexity", perplexity, lambda items: np.asarray(items, dtype=float),
                                   lambda s: np.exp(-np.asarray(s)[..., 0] / np.asarray(s)[..., 1]))
additive_mean = CorpusMetric("mean", lambda items: sum(x for x, _ in items) / len(items),
                             lambda items: np.asarray(items, dtype=float),
                             lambda s: np.asarray(s)[..., 0] / np.asarray(s)[..., 1])


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


def test_paired_interval_of_a_mean_is_the_paired_t_interval():
    from scipy import stats as sps

    rng = np.random.default_rng(4)
    ref_x = rng.normal(50, 10, size=60)
    new_x = ref_x + rng.normal(-1.0, 3.0, size=60)
    reps = replicate([(x, 1) for x in ref_x], [(x, 1) for x in new_x], additive_mean, n_boot=4000, seed=0)
    result = paired_corpus_test(reps, alpha=0.05, beta=0.2)
    oracle = sps.ttest_rel(new_x, ref_x).confidence_interval(0.90)  # normal differences: bootstrap-t -> t
    width = oracle.high - oracle.low
    assert result.mean_diff == pytest.approx(float(np.mean(new_x - ref_x)))
    assert result.ci[0] == pytest.approx(oracle.low, abs=0.06 * width)
    assert result.ci[1] == pytest.approx(oracle.high, abs=0.06 * width)


def test_paired_interval_matches_a_bootstrap_t_with_the_analytic_gradient():
    from scipy import stats as sps

    ref, new = corpus(7, shift=-0.05)  # the new build loses 0.05 nats per word
    reps = replicate(ref, new, pooled_perplexity, n_boot=4000, seed=0)
    result = paired_corpus_test(reps, alpha=0.05, beta=0.2, higher_is_better=False)
    assert result.reference_mean == pytest.approx(perplexity(ref))
    assert result.new_mean == pytest.approx(perplexity(new))
    assert result.mean_diff == pytest.approx(perplexity(new) - perplexity(ref))

    r, m = np.asarray(ref, dtype=float), np.asarray(new, dtype=float)

    def diff_and_se(rows_r, rows_n):  # exp(-L/W): d/dL = -P/W, d/dW = P L/W^2; influence of each document
        out = []
        for rows in (rows_r, rows_n):
            big_l, big_w = rows[..., 0].sum(-1), rows[..., 1].sum(-1)
            p = np.exp(-big_l / big_w)
            out.append((p, (-p / big_w)[..., None] * rows[..., 0] + (p * big_l / big_w**2)[..., None] * rows[..., 1]))
        (p_r, u_r), (p_n, u_n) = out
        u = u_n - u_r
        return p_n - p_r, np.sqrt(((u - u.mean(-1, keepdims=True)) ** 2).sum(-1))

    d, se = diff_and_se(r, m)
    idx = np.random.default_rng(99).integers(0, len(ref), size=(4000, len(ref)))
    d_star, se_star = diff_and_se(r[idx], m[idx])
    t = (d_star - d) / se_star
    equal = (d - se * np.quantile(t, 0.95), d - se * np.quantile(t, 0.05))
    symmetric = (d - se * np.quantile(np.abs(t), 0.90), d + se * np.quantile(np.abs(t), 0.90))
    low, high = min(equal[0], symmetric[0]), max(equal[1], symmetric[1])
    width = high - low
    assert result.ci[0] == pytest.approx(low, abs=0.06 * width)
    assert result.ci[1] == pytest.approx(high, abs=0.06 * width)

    columns = [np.array(c, dtype=float) for c in (*zip(*ref), *zip(*new))]

    def stat(ll_r, w_r, ll_n, w_n, axis=-1):
        return np.exp(-ll_n.sum(axis) / w_n.sum(axis)) - np.exp(-ll_r.sum(axis) / w_r.sum(axis))

    boot = sps.bootstrap(columns, stat, paired=True, vectorized=True, n_resamples=4000, method="percentile",
                         random_state=np.random.default_rng(11))
    assert result.sd_diff == pytest.approx(boot.standard_error * math.sqrt(len(ref)), rel=0.1)


def test_false_go_at_57_documents_holds_alpha():
    """A heavy-tailed corpus (calibration's): at drop = tolerance the basic bootstrap said GO about 0.11 of the
    time; the rule must stay within alpha + 2 Monte Carlo SE."""
    from benchmarks.calibration_grid.corpus import TOLERANCE, _paired_rate

    rate = _paired_rate(57, TOLERANCE, "go", 99, trials=400, seed=2)
    assert rate.value <= 0.05 + 2 * rate.se, rate


def test_the_calibration_corpus_drops_by_exactly_the_tolerance():
    """The GO cells' least favourable truth: the population's pooled perplexity (a ratio of expectations,
    exp(E[words x loss] / E[words])) is e^3 on the reference (loss independent of words, its clipping symmetric
    about 3) and e^(3 + delta) on the new build (every word's loss up by delta on average), so it rises by e^3
    (e^delta - 1) = the tolerance at every n. Two million documents estimate that drop with sd 0.0037 (the pooled
    drop's sd is 0.2347 x sqrt(500 / n), from the word counts' exact conditional moments); a truth set on the
    per-word loss (delta = tolerance / e^3) would rise by 1.025 and fail here; so would a change tied to the
    word counts."""
    from benchmarks.calibration_grid.corpus import PERPLEXITY, TOLERANCE, delta_for, documents

    n = 2_000_000
    within = 4 * 0.2347 * math.sqrt(500 / n)
    for seed, drop in ((8, TOLERANCE), (9, 0.0)):
        ref, new = documents(np.random.default_rng(seed), n, delta_for(drop))
        assert PERPLEXITY.compute(new) - PERPLEXITY.compute(ref) == pytest.approx(drop, abs=within)


def test_the_calibration_corpus_estimate_lies_above_its_truth_by_the_second_order_term():
    """exp is convex, so the drop measured on n documents lies above the population's by about
    E[w^2] / (2 n E[w]^2) x (e^(3 + delta) (s_loss^2 + s_change^2) - e^3 s_loss^2), E[w^2] / E[w]^2 = e for
    lognormal word counts of log-sd 1: 0.00197 at 500 documents (by hand); upwards, so a false GO only rarer."""
    from benchmarks.calibration_grid.corpus import TOLERANCE, delta_for, estimate_bias

    e3 = math.exp(3.0)
    by_hand = math.e / (2 * 500) * (e3 * math.exp(delta_for(TOLERANCE)) * (0.25 + 0.15**2) - e3 * 0.25)
    bias, sd = estimate_bias(500, TOLERANCE, draws=2000, seed=3)
    assert bias == pytest.approx(by_hand, rel=0.05)
    assert sd == pytest.approx(math.sqrt(math.e / 500 * (0.25 + (e3 + TOLERANCE) ** 2 * 0.15**2)), rel=0.05)


def test_unpaired_false_go_at_its_fewest_documents_holds_alpha():
    """Against a reference figure without items (calibration's corpus, recorded on other documents), at the fewest
    documents it claims on (129): TensorRT-LLM's normal threshold on the bootstrap spread said GO at drop = tolerance
    about 0.08 of the time at 100; the studentized rule must stay within alpha + 2 Monte Carlo SE."""
    from benchmarks.calibration_grid.corpus import TOLERANCE, UNPAIRED_LEAST, _unpaired_rate

    rate = _unpaired_rate(UNPAIRED_LEAST, TOLERANCE, "go", 99, trials=1200, seed=4)
    assert rate.value <= 0.05 + 2 * rate.se, rate


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
    ref = [(-(2.0 + 0.02 * i) * (30 + 5 * i), 30 + 5 * i) for i in range(12)]
    new = [(ll - 0.5 * w, w) for ll, w in ref]  # every document loses 0.5 nats per word
    reps = replicate(ref, new, pooled_perplexity, n_boot=999, seed=0)
    result = paired_corpus_test(reps, 0.05, 0.2, higher_is_better=False)
    # each resample's perplexity rises by the factor e^0.5 exactly, so D* / se* is that of the reference
    # perplexity (about e^2.1 / 0.03): no studentized replicate comes near the observed t of about 50
    assert np.allclose(reps.differences / [perplexity([ref[i] for i in r]) for r in resamples(12, 999, 0)],
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


@pytest.mark.parametrize("metric", [additive_perplexity, pooled_perplexity], ids=["delta", "jackknife"])
def test_identical_sides_show_nothing_at_any_n(metric):
    """No document changed: every resample is blind to a change, so neither claim can be made, however many
    documents there are (a pooled metric has no range that would bound a change no document showed); the interval
    is unbounded. Before: every replicate was 0 and GO came at p = 1/(B+1)."""
    ref, _ = corpus(7, n=400)
    reps = replicate(ref, list(ref), metric, n_boot=199, seed=1)
    assert reps.changed == 0
    go = paired_corpus_test(reps, 0.05, 0.2, higher_is_better=False, tolerance=1.0, gate="noninferiority")
    nogo = paired_corpus_test(reps, 0.05, 0.2, higher_is_better=False, tolerance=0.0, gate="regression")
    assert not go.passed and go.p_value == 1.0
    assert nogo.passed and nogo.p_value == 1.0
    assert go.ci == (-math.inf, math.inf)


def test_a_resample_without_a_changed_document_counts_against_both_claims():
    """Two of 60 documents changed (both better): about (1 - 2/60)^60 = 13% of resamples draw neither; each of
    them counts as extreme for GO and for NO-GO, so both p-values are at least that fraction."""
    ref, _ = corpus(8, n=60)
    new = list(ref)
    new[3] = (ref[3][0] + 5.0, ref[3][1])  # a better log-likelihood: lower perplexity
    new[40] = (ref[40][0] + 5.0, ref[40][1])
    reps = replicate(ref, new, additive_perplexity, n_boot=999, seed=2)
    blind = np.mean([3 not in r and 40 not in r for r in resamples(60, 999, 2)])
    assert reps.changed == 2 and 0.08 < blind < 0.2
    for tolerance, gate in ((0.0, "regression"), (0.0, "noninferiority")):
        p = paired_corpus_test(reps, 0.05, 0.2, higher_is_better=False, tolerance=tolerance, gate=gate).p_value
        assert p >= blind * 999 / 1000


@pytest.mark.parametrize("shift", [-0.1, -0.03, 0.0, 0.03])
def test_unpaired_verdict_threshold_and_claims_agree(shift):
    """The unpaired corpus rule's threshold, p-value, interval and claims come from one studentized test: the score
    is past the threshold exactly when no regression is shown, and each bound sits on the side its claim decided."""
    from runner.stats.rules.corpus import unpaired
    from runner.stats.data.hypothesis import HypothesisParams

    recorded, _ = corpus(9, n=60)
    _, new = corpus(10, n=60, shift=shift)
    params = HypothesisParams(0.05, 0.2, 1.0, 60, higher_is_better=False)
    notes: list[str] = []
    verdict, claims = unpaired(new, perplexity(new), perplexity(recorded), params, additive_perplexity, 499, 3, None,
                               0.0, 0.5, "word_perplexity", notes)
    diff = perplexity(new) - perplexity(recorded)
    assert verdict.passed == (not claims.regression) == (verdict.room >= 0) == (verdict.p_value >= 0.05)
    assert claims.regression == (claims.low > 0.0) and claims.within == (claims.high < 0.5)
    assert claims.low <= diff <= claims.high
    assert verdict.params.sigma > 0 and "studentized" in notes[0]


def test_unpaired_interval_is_the_two_sample_bootstrap_t_studentized_by_each_resample():
    """Against a reference figure without items, the statistic is (run - reference - truth) / the run's se, both
    sides' errors over the run's se. Its bootstrap-t replicates are (m*_b - r m*_b') / se*_b: the run's error of
    one resample less the reference's (another resample's, scaled by sqrt(n / n_ref)), over the first resample's
    own se, written here with the perplexity's analytic gradient and independent resamples. Before, the
    reference's part was divided by the observed se, not the resample's: with heavy-tailed document lengths that
    held the run's se fixed where it moves, and the interval was too narrow."""
    from runner.stats.numerics.corpus_bootstrap import side, unpaired_corpus_test

    rng = np.random.default_rng(23)
    n, n_ref = 60, 6  # a reference recorded on a tenth as many documents: its part weighs most
    words = np.maximum(5, np.round(rng.lognormal(math.log(150), 1.0, n)))
    rows = np.column_stack([-words * rng.normal(3.0, 0.5, n), words])
    reference = 21.0
    run = side([tuple(r) for r in rows], additive_perplexity, n_boot=10000, seed=0)
    low, high = unpaired_corpus_test(run, reference, 0.05, higher_is_better=False, tolerance=0.0,
                                     gate="regression", reference_n=n_ref)[1]

    def value_and_se(x):  # exp(L/W) of -log-likelihoods L over words W; each document's influence
        big_l, big_w = -x[..., 0].sum(-1), x[..., 1].sum(-1)
        p = np.exp(big_l / big_w)
        u = (p / big_w)[..., None] * -x[..., 0] - (p * big_l / big_w**2)[..., None] * x[..., 1]
        return p, np.sqrt(((u - u.mean(-1, keepdims=True)) ** 2).sum(-1))

    v, se = value_and_se(rows)
    draw = np.random.default_rng(5).integers(0, n, size=(2, 10000, n))
    (v_run, se_run), (v_ref, _) = value_and_se(rows[draw[0]]), value_and_se(rows[draw[1]])
    t = ((v_run - v) - math.sqrt(n / n_ref) * (v_ref - v)) / se_run
    d = v - reference
    equal = (d - se * np.quantile(t, 0.95), d - se * np.quantile(t, 0.05))
    symmetric = (d - se * np.quantile(np.abs(t), 0.90), d + se * np.quantile(np.abs(t), 0.90))
    expected = (min(equal[0], symmetric[0]), max(equal[1], symmetric[1]))
    width = expected[1] - expected[0]
    assert low == pytest.approx(expected[0], abs=0.03 * width)
    assert high == pytest.approx(expected[1], abs=0.03 * width)  # the old construction's: 7% of the width lower
