"""Calibration of the corpus-metric rule on a pooled word perplexity (lm-eval's ``word_perplexity``).

Documents: word counts lognormal (median 150, log-sd 1: a few long documents carry much of the pool), per-word
loss normal around 3 nats (sd 0.5, kept within 1-5); the new build adds ``delta + e_i`` nats per word to each
document, ``e_i`` normal (sd 0.15). The population's pooled perplexity is a ratio of expectations,
exp(E[words x loss] / E[words]) = exp(E[loss]) since the loss is drawn independently of the word counts: e^3 on the
reference (the clipping at 1 and 5 is symmetric about 3, so E[loss] is 3 exactly) and e^(3 + delta) on the new
build, whatever the word counts' law and at every n; :func:`delta_for` makes the drop ``e^3 (e^delta - 1)`` exactly
the asked perplexity points. The estimate from n documents lies above it by O(1/n) (exp is convex: +0.0157,
+0.0093, +0.0019 points at 57, 100, 500 documents, 2.3%, 1.8%, 0.8% of its sd: :func:`estimate_bias`), which
makes a false GO slightly rarer at small n. Both claims are measured at their least
favourable truth (NO-GO at drop 0, GO at drop = tolerance) through the product's own functions: the paired rule by
:func:`runner.stats.numerics.corpus_bootstrap.replicate` and :func:`~runner.stats.numerics.corpus_bootstrap.paired_corpus_test` (as
``corpus_rules._paired`` calls them), the unpaired one by :func:`runner.stats.rules.corpus.unpaired` (as
``corpus_rules.decide_corpus`` calls it), the reference figure recorded on other documents of the same corpus.
"""

from __future__ import annotations

import math
from functools import partial

from runner.contract.evaluator import CorpusMetric
from runner.stats.rules import corpus
from benchmarks.calibration_grid.cells import Cell, Family, Grid, Rate
from runner.stats.numerics.corpus_bootstrap import paired_corpus_test, replicate
from runner.stats.rules.corpus import unpaired
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics.rare_share import min_samples
from runner.stats.settings import StatsConfig

ALPHA, BETA = 0.05, 0.2
LOSS, LOSS_SD, WORDS_LOG_SD, CHANGE_SD = 3.0, 0.5, 1.0, 0.15
TOLERANCE = 1.0  # perplexity points (about 5% of e^3)


def _perplexity(items):  # noqa: ANN001, ANN202 - (log-likelihood, words) rows
    import numpy as np

    rows = np.asarray(items, dtype=float)
    return float(np.exp(-rows[:, 0].sum() / rows[:, 1].sum()))


def _from_sums(sums):  # noqa: ANN001, ANN202
    import numpy as np

    sums = np.asarray(sums, dtype=float)
    return np.exp(-sums[..., 0] / sums[..., 1])


def _rows(items):  # noqa: ANN001, ANN202
    import numpy as np

    return np.asarray(items, dtype=float)


PERPLEXITY = CorpusMetric("word_perplexity", _perplexity, _rows, _from_sums)


def delta_for(drop: float) -> float:
    return math.log1p(drop / math.exp(LOSS))


def estimate_bias(n: int, drop: float, draws: int = 4000, seed: int = 0) -> tuple[float, float]:
    """How far the pooled perplexity's drop measured on ``n`` documents lies above ``drop`` on average, and its sd.

    Given the word counts both are exact: the pooled loss's deviation is ``sum_i s_i x_i`` (``s_i`` a document's
    share of the words, ``x_i`` its loss less 3, clipped normal, and ``e_i`` on the new build), so its exponential's
    moments are products of the clipped normal's and the normal's moment generating functions at ``k s_i``; only the
    word counts are drawn (``draws`` corpora), hence no bootstrap and next to no Monte Carlo noise."""
    import numpy as np
    from scipy.stats import norm

    def mgf(k: float, shares):  # noqa: ANN001, ANN202 - E[exp(k sum_i s_i x_i)], x clipped to +-2 nats
        t = k * shares
        inside = np.exp(t * t * LOSS_SD**2 / 2) * (norm.cdf((2 - t * LOSS_SD**2) / LOSS_SD)
                                                    - norm.cdf((-2 - t * LOSS_SD**2) / LOSS_SD))
        tails = np.exp(2 * t) * norm.sf(2 / LOSS_SD) + np.exp(-2 * t) * norm.cdf(-2 / LOSS_SD)
        return np.exp(np.log(inside + tails).sum(axis=1))

    rng = np.random.default_rng(seed)
    words = np.maximum(5.0, np.round(rng.lognormal(math.log(150), WORDS_LOG_SD, (draws, n))))
    shares = words / words.sum(axis=1, keepdims=True)
    q = (shares * shares).sum(axis=1)
    ref, new = math.exp(LOSS), math.exp(LOSS + delta_for(drop))
    one, two = mgf(1, shares), mgf(2, shares)
    moved, moved2 = np.exp(CHANGE_SD**2 * q / 2), np.exp(4 * CHANGE_SD**2 * q / 2)
    mean = new * one * moved - ref * one
    square = new * new * two * moved2 - 2 * new * ref * two * moved + ref * ref * two
    return float(mean.mean() - drop), float(math.sqrt(square.mean() - mean.mean() ** 2))


def documents(rng, n: int, delta: float, changed: float = 1.0):  # noqa: ANN001, ANN201 - (ref, new) rows out
    """``n`` documents' (log-likelihood, words) on the reference and the new build; with ``changed`` < 1 only that
    fraction of documents changes (by ``delta / changed`` nats per word, so the pooled loss still rises by
    ``delta``), the others are identical in both runs."""
    import numpy as np

    words = np.maximum(5.0, np.round(rng.lognormal(math.log(150), WORDS_LOG_SD, n)))
    loss = np.clip(rng.normal(LOSS, LOSS_SD, n), LOSS - 2, LOSS + 2)
    change = delta / changed + rng.normal(0.0, CHANGE_SD, n)
    if changed < 1.0:
        change = np.where(rng.random(n) < changed, change, 0.0)
    return np.column_stack([-words * loss, words]), np.column_stack([-words * (loss + change), words])


def _paired_rate(n: int, drop: float, claim: str, n_boot: int, trials: int, seed: int, changed: float = 1.0) -> Rate:
    """How often the paired rule makes ``claim`` (go, nogo) or its 90% interval covers ``drop`` (cover); ``changed``:
    the fraction of documents that change."""
    import numpy as np

    rng = np.random.default_rng(seed)
    least = StatsConfig().corpus_min_changed  # the product's floor on changed documents (rules/corpus.py)
    hits = 0
    for t in range(trials):
        ref, new = documents(rng, n, delta_for(drop), changed)
        reps = replicate(ref, new, PERPLEXITY, n_boot, seed + t)
        if claim != "cover" and int(np.sum(np.any(ref != new, axis=1))) < least:
            continue  # no claim: too few changed documents
        if claim == "cover":
            low, high = paired_corpus_test(reps, ALPHA, BETA, False, 0.0, "regression").ci
            hits += low <= drop <= high
        elif claim == "nogo":
            hits += not paired_corpus_test(reps, ALPHA, BETA, False, 0.0, "regression").passed
        else:
            hits += paired_corpus_test(reps, ALPHA, BETA, False, TOLERANCE, "noninferiority").passed
    return Rate.monte_carlo(hits, trials)


UNPAIRED_LEAST = min_samples(ALPHA, StatsConfig().corpus_rare_share)  # the product's fewest documents (129)


def _unpaired_rate(n: int, drop: float, claim: str, n_boot: int, trials: int, seed: int,
                   least: int = UNPAIRED_LEAST) -> Rate:
    """How often the unpaired rule (:func:`runner.stats.rules.corpus.unpaired`, the reference a figure recorded
    on other documents) makes ``claim`` (go, nogo); ``least``: its fewest documents (0: the bootstrap-t alone)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    hits = 0
    for t in range(trials):
        recorded, _ = documents(rng, n, 0.0)
        _, new = documents(rng, n, delta_for(drop))
        params = HypothesisParams(ALPHA, BETA, 1.0, n, higher_is_better=False)
        _, said = unpaired(new, _perplexity(new), _perplexity(recorded), params, PERPLEXITY, n_boot, seed + t, None,
                           0.0, TOLERANCE, "word_perplexity", [], least=least)
        hits += said.regression if claim == "nogo" else said.within
    return Rate.monte_carlo(hits, trials)


POSITIVE, ACCURATE, FIXED = 0.68, 0.8, 0.05  # gold positive rate (MRPC-like), reference accuracy, wrong -> right rate
F1_TOLERANCE = 2.0  # F1 points


def _f1(items):  # noqa: ANN001, ANN202 - (gold, prediction) rows; sklearn's binary F1 x 100, as lm-eval's ``f1``
    import numpy as np

    rows = np.asarray(items, dtype=float)
    tp = float((rows[:, 0] * rows[:, 1]).sum())
    wrong = float((rows[:, 0] != rows[:, 1]).sum())
    return 100.0 * 2 * tp / (2 * tp + wrong) if tp + wrong else 0.0


F1 = CorpusMetric("f1", _f1)  # no additive form: the jackknife path, as lm-eval's f1 and matthews_corrcoef take


def _f1_of(breaks: float) -> float:
    """The population F1 (points) when a right prediction turns wrong with probability ``breaks``."""
    tp = POSITIVE * (ACCURATE * (1 - breaks) + (1 - ACCURATE) * FIXED)
    fn = POSITIVE - tp
    fp = (1 - POSITIVE) * ((1 - ACCURATE) * (1 - FIXED) + ACCURATE * breaks)
    return 100.0 * 2 * tp / (2 * tp + fp + fn)


def breaks_for(drop: float) -> float:
    """The rate at which right predictions turn wrong so that the population F1 drops by ``drop`` points."""
    from scipy.optimize import brentq

    start = 100.0 * 2 * POSITIVE * ACCURATE / (2 * POSITIVE * ACCURATE + 1 - ACCURATE)  # the reference's F1
    return brentq(lambda b: start - _f1_of(b) - drop, 0.0, 0.9, xtol=1e-12)


def labelled(rng, n: int, breaks: float):  # noqa: ANN001, ANN201 - numpy generator in, (ref, new) rows out
    """``n`` documents' (gold, prediction) on the reference and the new build."""
    import numpy as np

    gold = (rng.random(n) < POSITIVE).astype(float)
    right = rng.random(n) < ACCURATE
    now = np.where(right, rng.random(n) >= breaks, rng.random(n) < FIXED)
    ref_pred, new_pred = np.where(right, gold, 1 - gold), np.where(now, gold, 1 - gold)
    return np.column_stack([gold, ref_pred]), np.column_stack([gold, new_pred])


def _f1_rate(n: int, drop: float, claim: str, n_boot: int, trials: int, seed: int) -> Rate:
    """How often the paired rule on F1 (no additive form: se by the jackknife influence) makes ``claim``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    hits = 0
    for t in range(trials):
        ref, new = labelled(rng, n, breaks_for(drop))
        reps = replicate(list(ref), list(new), F1, n_boot, seed + t)
        if claim == "nogo":
            hits += not paired_corpus_test(reps, ALPHA, BETA, True, 0.0, "regression").passed
        else:
            hits += paired_corpus_test(reps, ALPHA, BETA, True, F1_TOLERANCE, "noninferiority").passed
    return Rate.monte_carlo(hits, trials)


def _claims(rule: str, rate, n: int, n_boot: int, power: bool = False) -> list[Cell]:  # noqa: ANN001 - a rate
    """A rule's two error cells on the pooled perplexity at ``n`` (NO-GO at drop 0, GO at drop = tolerance), or its
    two power cells (GO at drop 0, NO-GO at twice the tolerance)."""
    where = f"n={n} pooled word perplexity, {n_boot} resamples"
    if power:
        return [Cell(rule, "power: GO at drop 0", f"{where}, tolerance {TOLERANCE:g}", "power", 0.0,
                     partial(rate, n, 0.0, "go", n_boot)),
                Cell(rule, "power: NO-GO at drop 2t", f"{where}, drop {2 * TOLERANCE:g}, margin 0", "power", 0.0,
                     partial(rate, n, 2 * TOLERANCE, "nogo", n_boot))]
    return [Cell(rule, "NO-GO at drop = margin", f"{where}, margin 0", "error", ALPHA,
                 partial(rate, n, 0.0, "nogo", n_boot)),
            Cell(rule, "GO at drop = tolerance", f"{where}, tolerance {TOLERANCE:g}", "error", ALPHA,
                 partial(rate, n, TOLERANCE, "go", n_boot))]


def cells(grid: Grid) -> list[Cell]:
    """The full grid: n in {57, 100, 500}, 999 resamples: both rules' claims on the pooled perplexity (the unpaired
    rule's also at its fewest documents, 129, and at 200), the paired interval's coverage, GO when only 2% of
    documents change, and the paired rule on F1 (the jackknife path, n 57 and 100); the reduced one: the paired
    rule's two claims at n=57 and the unpaired rule's at its fewest documents, 99 resamples (the test suite's
    budget)."""
    out: list[Cell] = []
    n_boot = 999 if grid.full else 99
    paired, unpaired = "corpus: paired bootstrap-t", "corpus: unpaired bootstrap-t"
    jackknife = "corpus: paired bootstrap-t, jackknife se"
    for n in grid.pick(sorted({57, 100, UNPAIRED_LEAST, 200, 500}), [UNPAIRED_LEAST]):
        out += _claims(unpaired, _unpaired_rate, n, n_boot)
    for n in grid.pick([57, 100, 500], [57]):
        where = f"n={n} pooled word perplexity, {n_boot} resamples"
        out += _claims(paired, _paired_rate, n, n_boot)
        if grid.full:
            out += [
                Cell(paired, "90% CI coverage", f"{where}, drop {TOLERANCE:g}", "coverage", 1 - 2 * ALPHA,
                     partial(_paired_rate, n, TOLERANCE, "cover", n_boot)),
                *(Cell(paired, "GO at drop = tolerance",
                       f"{where}, {share:.0%} of documents changed, tolerance {TOLERANCE:g}", "error", ALPHA,
                       partial(_paired_rate, n, TOLERANCE, "go", n_boot, changed=share)) for share in (0.02, 0.05)),
            ]
    if grid.full:  # power beside the error cells: GO at a drop of 0, NO-GO at twice the tolerance
        out += _claims(paired, _paired_rate, 100, n_boot, power=True)
        for n in (UNPAIRED_LEAST, 500):
            out += _claims(unpaired, _unpaired_rate, n, n_boot, power=True)
    for n in grid.pick([57, 100], []):
        where = f"n={n} F1 (MRPC-like labels), {n_boot} resamples"
        out += [
            Cell(jackknife, "NO-GO at drop = margin", f"{where}, margin 0", "error", ALPHA,
                 partial(_f1_rate, n, 0.0, "nogo", n_boot)),
            Cell(jackknife, "GO at drop = tolerance", f"{where}, tolerance {F1_TOLERANCE:g}", "error", ALPHA,
                 partial(_f1_rate, n, F1_TOLERANCE, "go", n_boot)),
        ]
    return out


FAMILY = Family("corpus", corpus.CLAIMS, cells)
