"""How a job's decision judges a corpus metric (the task's ``corpus_metric()``: corpus BLEU, pooled perplexity).

* **unpaired** (TensorRT-LLM's z-test): sigma is the bootstrap spread of the corpus metric over this run's
  samples (:func:`runner.stats.corpus.bootstrap_sigma`), not the task's configured sigma, so theta, the
  threshold and the interval speak of the corpus figure.
* **paired**: the reference stored each sample's corpus item; the paired corpus bootstrap decides both claims
  (:func:`runner.stats.corpus.paired_corpus_test`), its interval inverting its p-values.

Clusters (a group's subtasks) are resampled whole in both. The reference entry's figure must be the same corpus
figure: a reference recorded by this runner is, since the task's metric is the corpus metric.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from runner.contract.evaluator import CORPUS_ITEM, CorpusMetric
from runner.stats import claims as claim_rules
from runner.stats.corpus import bootstrap_sigma, paired_corpus_test, replicate
from runner.stats.paired_result import PairedResult
from runner.stats.pairing import unpaired_because
from runner.stats.unpaired import HypothesisParams, Verdict, decide
from runner.stats.verdicts import Claims


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


def decide_corpus(reference: Any, scored: Sequence[Any], score: float, params: HypothesisParams, stats: Any,
                  corpus: CorpusMetric, metric: str, rows: Mapping[str, Any] | None, problem: str | None,
                  labels: Mapping[str, str] | None, margin: float, tolerance: float, notes: list[str]) -> CorpusDecision:
    """Both claims for a corpus metric; ``rows``: the reference's per-sample rows (each with ``item``) or None."""
    items = items_of(scored)
    ids = list(items)
    n_boot, seed = stats.corpus_bootstrap_iters, stats.bootstrap_seed
    if len(ids) >= 2:
        clusters = [labels[i] for i in ids] if labels else None
        sigma = bootstrap_sigma([items[i] for i in ids], corpus, n_boot, seed, clusters)
        notes.append(f"corpus metric {metric}: sigma {sigma:.3f} = bootstrap standard error x sqrt(n) over this run's "
                     f"{len(ids)} samples ({n_boot} resamples of the {'clusters' if clusters else 'documents'}; "
                     f"configured {params.sigma:g})")
        params = replace(params, sigma=sigma)
    verdict = decide(score, reference.value, params, None, metric=metric, tolerance=margin)
    paired = _paired(reference, items, params, stats, corpus, rows, problem, labels, margin, tolerance, notes)
    if paired is None:
        return CorpusDecision(verdict, None, claim_rules.unpaired(verdict, margin, tolerance))
    result, within = paired
    return CorpusDecision(verdict, result, claim_rules.continuous(result, within))


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
