"""How a job's decision judges a corpus metric (the task's ``corpus_metric()``: corpus BLEU, pooled perplexity).

* **unpaired** (the reference kept no items): TensorRT-LLM's report with sigma the bootstrap spread of the corpus
  metric over this run's samples (:attr:`runner.stats.numerics.corpus_bootstrap.Side.sigma`), not the task's configured sigma; its
  threshold and both claims come from the studentized bootstrap of the run's side
  (:func:`runner.stats.numerics.corpus_bootstrap.unpaired_corpus_test`), since the normal threshold said GO 0.080 of the time at
  drop = tolerance on a heavy-tailed corpus of 100 documents.
* **paired**: the reference stored each sample's corpus item; the paired corpus bootstrap decides both claims
  (:func:`runner.stats.numerics.corpus_bootstrap.paired_corpus_test`), its interval inverting its p-values.

Clusters (a group's subtasks) are resampled whole in both. The reference entry's figure must be the same corpus
figure: a reference recorded by this runner is, since the task's metric is the corpus metric.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from runner.contract.evaluator import CORPUS_ITEM, CorpusMetric
from runner.stats.data.claims import DeclaredRule, paired_claims
from runner.stats.numerics.ztest import unpaired_claims
from runner.stats.numerics.corpus_bootstrap import paired_corpus_test, replicate, side, unpaired_corpus_test
from runner.stats.numerics.rare_share import min_samples
from runner.stats.data.entry import ReferenceEntry
from runner.stats.data.paired_result import PairedResult
from runner.stats.data.pairing import unpaired_because
from runner.stats.data.hypothesis import HypothesisParams, Verdict
from runner.stats.numerics.ztest import decide
from runner.stats.data.claims import Claims
from runner.stats.rules.base import EntryCase, Outcome, statistical
from runner.stats.numerics.advice import Advice, AdviceCase


class Corpus:
    """The corpus rule of the precedence table: it decides every entry whose task declares a corpus metric."""

    def applies(self, entry: EntryCase) -> str | None:
        return None if entry.corpus is not None else "the task's metric is the mean of its per-sample scores"

    def decide(self, entry: EntryCase) -> Outcome:
        e = statistical(entry)
        assert e.corpus is not None and e.tolerance is not None
        found = decide_corpus(e.reference, e.scored, e.score, e.params, e.stats, e.corpus, e.metric, e.rows,
                              e.pairing_problem, e.labels, e.margin, e.tolerance.points, e.notes)
        return Outcome("paired" if found.paired is not None else "unpaired", (found.paired or found.verdict).passed,
                       found.verdict, found.paired, found.claims,
                       randomness=f"stats.bootstrap_seed={e.stats.bootstrap_seed}: the corpus bootstrap's "
                                  f"{e.stats.corpus_bootstrap_iters} resamples", advisor=self)

    def advise(self, case: AdviceCase) -> Advice | None:
        """Sized from the per-document differences' sd (paired), else from sigma against the reference's n."""
        p = case.paired
        if p is not None:
            return case.more_samples((p.sd_diff or 0.0) * case.inflation, p.n)
        n = case.params.num_samples
        return case.more_samples(case.params.sigma, n, n_ref=case.n_ref or n)


@dataclass(frozen=True)
class CorpusDecision:
    """The parts of a corpus metric's decision: the unpaired verdict (always), the paired result when it decided."""

    verdict: Verdict
    paired: PairedResult | None
    claims: Claims


def items_of(scored: Sequence[Any]) -> dict[str, Any]:
    """Each scored sample's corpus item by sample id; a sample without one is a task error."""
    out = {}
    for s in scored:
        item = (s.meta or {}).get(CORPUS_ITEM)
        if item is None:
            raise ValueError(f"sample {s.sample_id!r} carries no {CORPUS_ITEM}: the task declares a corpus metric")
        out[s.sample_id] = item
    return out


def decide_corpus(reference: ReferenceEntry, scored: Sequence[Any], score: float, params: HypothesisParams, stats: Any,
                  corpus: CorpusMetric, metric: str, rows: Mapping[str, Any] | None, problem: str | None,
                  labels: Mapping[str, str] | None, margin: float, tolerance: float, notes: list[str]) -> CorpusDecision:
    """Both claims for a corpus metric; ``rows``: the reference's per-sample rows (each with ``item``) or None."""
    items = items_of(scored)
    ids = list(items)
    n_boot, seed = stats.corpus_bootstrap_iters, stats.bootstrap_seed
    if len(ids) >= 2:
        clusters = [labels[i] for i in ids] if labels else None
        least = min_samples(params.alpha, stats.corpus_rare_share)
        verdict, claims = unpaired([items[i] for i in ids], score, reference.value, params, corpus, n_boot, seed,
                                   clusters, margin, tolerance, metric, notes, reference.samples_measured, least)
    else:
        verdict = decide(score, reference.value, params, None, metric=metric, tolerance=margin)
        claims = unpaired_claims(verdict, margin, tolerance)
    paired = _paired(reference, items, params, stats, corpus, rows, problem, labels, margin, tolerance, notes)
    if paired is None:
        return CorpusDecision(verdict, None, claims)
    result, within = paired
    claims = paired_claims(result, within)
    changed = changed_documents(rows, items)
    least = getattr(stats, "corpus_min_changed", 30)
    if changed < least and (claims.regression or claims.within):
        notes.append(f"corpus bootstrap: {changed} document(s) changed between the runs, fewer than "
                     f"stats.corpus_min_changed={least}: with few changed documents the bootstrap-t's tails are too "
                     "thin for a claim at alpha (false GO 0.065 at n=500 with 2% or 5% changed), so neither claim is "
                     "made (INCONCLUSIVE)")
        claims = replace(claims, regression=False, within=False,
                         method=f"{claims.method}; no claim: {changed} changed documents < {least}")
        result = replace(result, passed=True)
    return CorpusDecision(verdict, result, claims)


def changed_documents(rows: Mapping[str, Any], items: Mapping[str, Any]) -> int:
    """How many documents both runs scored whose corpus items differ (what a paired corpus change rests on)."""
    import numpy as np

    return sum(1 for i in set(rows) & set(items)
               if np.asarray(rows[i].item).tolist() != np.asarray(items[i]).tolist())


def unpaired(items: Sequence[Any], score: float, reference: float, params: HypothesisParams, corpus: CorpusMetric,
             n_boot: int, seed: int, clusters: Sequence[str] | None, margin: float, tolerance: float, metric: str,
             notes: list[str], reference_n: int | None = None, least: int = 0) -> tuple[Verdict, Claims]:
    """The run's corpus figure against a reference figure without items: TensorRT-LLM's report with sigma = the
    bootstrap standard error x sqrt(n), its threshold and both claims from the studentized bootstrap
    (:func:`runner.stats.numerics.corpus_bootstrap.unpaired_corpus_test`), so verdict, claims and interval agree.
    ``reference_n``: the documents the reference figure pooled (None: as many as the run's). ``least``: the fewest
    resampled units (documents, or clusters) on which a claim is made (``stats.corpus_rare_share``): the reference's
    error is imputed from the run's, which misses the longest documents too often below it."""
    run = side(items, corpus, n_boot, seed, clusters)
    params = replace(params, sigma=run.sigma)
    notes.append(f"corpus metric {metric}: sigma {run.sigma:.3f} = bootstrap standard error x sqrt(n) over this run's "
                 f"{run.n} samples ({n_boot} resamples of the {run.resampled}); the threshold and claims are the "
                 f"studentized bootstrap's (se by the {run.studentized_by}), not the normal z(alpha)")
    z_test = decide(score, reference, params, None, metric=metric, tolerance=margin)
    hib = params.higher_is_better
    p_regression, ci = unpaired_corpus_test(run, reference, params.alpha, hib, margin, "regression", reference_n)
    p_within, _ = unpaired_corpus_test(run, reference, params.alpha, hib, tolerance, "noninferiority", reference_n)
    regression, within = p_regression < params.alpha, p_within < params.alpha
    units = len(set(clusters)) if clusters is not None else run.n
    withheld = units < least and (regression or within)
    if withheld:
        notes.append(too_few_note(units, least, run.resampled, params.alpha))
        regression = within = False
    sign = 1.0 if hib else -1.0
    gain_high = max(sign * ci[0], sign * ci[1])  # the NO-GO bound: a regression is shown when it is below -margin
    threshold = reference + sign * (sign * (run.value - reference) - gain_high - margin)
    verdict = replace(z_test, threshold=threshold, room=sign * (score - threshold), passed=not regression,
                      p_value=p_regression)
    claims = Claims(regression=regression, within=within, low=ci[0], high=ci[1],
                    method=f"bootstrap-t, run's resamples for both sides' errors, equal-tailed and symmetric "
                           f"(the wider), se by the {run.studentized_by} (inverts its p-values) (both sides)"
                           + (f"; no claim: {units} {run.resampled} < {least} (stats.corpus_rare_share)" if withheld
                              else ""),
                    p_within=p_within, least_n=least if withheld else 0)
    return verdict, (claims if withheld else claims.agreeing(margin, tolerance, hib))


def too_few_note(units: int, least: int, resampled: str, alpha: float) -> str:
    """Why an unpaired corpus claim is withheld on fewer than ``least`` units, and what decides instead."""
    return (f"corpus bootstrap: no claim against a reference without items on {units} {resampled}; it needs "
            f"{least} at alpha {alpha:g} (stats.corpus_rare_share): the reference's error is not measured but imputed "
            "from this run's documents, and a pooled metric's spread is carried by its few longest documents, which a "
            f"run of {units} misses too often, so the imputed error is too small (false GO 0.056 at 57 documents on "
            f"the calibration grid); run at least {least} {resampled}, or record the reference with its per-document "
            "items (the paired rule)")


def _paired(reference: Any, items: dict[str, Any], params: HypothesisParams, stats: Any, corpus: CorpusMetric,
            rows: Mapping[str, Any] | None, problem: str | None, labels: Mapping[str, str] | None, margin: float,
            tolerance: float, notes: list[str]) -> tuple[PairedResult, PairedResult] | None:
    """The regression and non-inferiority results of the paired corpus bootstrap, or None (with the reason in
    ``notes``, or a ConfigError under ``stats.method=paired``) when the reference's rows cannot pair."""
    if rows is None:
        return None
    common = sorted(set(rows) & set(items))
    if problem is None and any(getattr(rows[i], "item", None) is None for i in common):
        problem = "the reference's per-sample file stores no corpus items (recorded by an older runner)"
    if problem is None and len(common) < 2:
        problem = f"{len(common)} sample(s) in common with the reference (the paired bootstrap needs 2)"
    if problem is None and len(common) < len(items) and stats.method != "paired":
        problem = (f"only {len(common)} of {len(items)} samples have reference items (another subset); "
                   "stats.method=paired uses the matched ones")
    if problem is not None:
        unpaired_because(problem, stats.method, reference, "per-sample items", notes)
        return None
    if len(common) < len(items):
        notes.append(f"paired corpus bootstrap on the {len(common)} of {len(items)} samples the reference also scored")
    ref, new = [rows[i].item for i in common], [items[i] for i in common]
    clusters = [labels[i] for i in common] if labels else None
    reps = replicate(ref, new, corpus, stats.corpus_bootstrap_iters, stats.bootstrap_seed, clusters)
    return (paired_corpus_test(reps, params.alpha, params.beta, params.higher_is_better, margin, "regression"),
            paired_corpus_test(reps, params.alpha, params.beta, params.higher_is_better, tolerance, "noninferiority"))


CLAIMS = (
    DeclaredRule("corpus: paired bootstrap-t", "a corpus metric with an additive form, per-document items on both sides",
         ("NO-GO at drop = margin", "GO at drop = tolerance", "90% CI coverage"),
         "the more cautious of the equal-tailed and symmetric bootstrap-t bounds"),
    DeclaredRule("corpus: paired bootstrap-t, jackknife se", "a corpus metric without an additive form",
         ("NO-GO at drop = margin", "GO at drop = tolerance"), "as above, the standard error from jackknife influence"),
    DeclaredRule("corpus: unpaired bootstrap-t", "a corpus metric whose reference kept no per-document items",
         ("NO-GO at drop = margin", "GO at drop = tolerance"), "the run's side bootstrapped, the reference's scaled"),
)
"""The rules of this module and their claims, as the calibration grid measures them."""
