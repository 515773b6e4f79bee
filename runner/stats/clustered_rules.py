"""How a job's decision uses clustered samples (``stats.cluster=auto`` and a task ``cluster_key``).

* **unpaired** (TensorRT-LLM's z-test, sigma from the task): the design effect of the run's own scores
  inflates sigma, ``sigma_eff = sigma sqrt(deff)`` (deff floored at 1, :mod:`runner.stats.clustering`),
  so the threshold, theta, interval and p-value all follow, and the advice's sample counts are
  multiplied by deff.
* **paired**: a clustered test of the mean difference (:mod:`runner.stats.paired_clustered`) decides
  both claims, unless every cluster holds one sample (then the independent tests decide: the same
  figures) or 0/100 differences do not vary (no clustered variance exists; McNemar's exact and
  Tango's tests decide).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

from runner.stats import claims as claim_rules, clustering, pairing
from runner.stats.paired_clustered import clustered_paired
from runner.stats.unpaired import HypothesisParams
from runner.stats.verdicts import Claims


def unpaired_params(scored: Sequence[Any], labels: dict[str, str], key: str, params: HypothesisParams, stats: Any,
                    notes: list[str]) -> tuple[HypothesisParams, clustering.DesignEffect]:
    """The unpaired test's parameters with ``sigma sqrt(deff)``, and the design effect of the run's scores."""
    deff = clustering.design_effect([s.score for s in scored], [labels[s.sample_id] for s in scored], key)
    if deff.applied != 1.0:
        sigma = params.sigma * math.sqrt(deff.applied)
        notes.append(f"unpaired test: sigma {params.sigma:g} x sqrt(design effect {deff.applied:.3f}) = {sigma:.3f} "
                     f"({deff.clusters} clusters by {key})")
        params = replace(params, sigma=sigma)
    if not deff.trivial and (stats.sequential.enabled or stats.extensions):
        notes.append("sequential looks: the paired looks treat samples as independent; clustered errors reach only "
                     "the unpaired looks (through sigma)")
    return params, deff


def paired(pairs: Any, params: HypothesisParams, stats: Any, margin: float, tolerance: float, key: str,
           labels: list[str], notes: list[str]) -> tuple[clustering.DesignEffect, tuple[Any, Claims] | None]:
    """The design effect of the paired differences, and the clustered test with both claims (None where the
    independent tests decide; the caller runs them and attaches the design effect)."""
    binary = stats.paired_test in ("auto", "mcnemar") and pairing.is_binary(pairs)
    diffs = [b - a for a, b in zip(pairs.reference, pairs.new)]
    deff = clustering.design_effect(diffs, labels, key)
    if deff.trivial or stats.paired_test == "mcnemar" and not binary:
        return deff, None  # the independent tests decide (McNemar's says why it needs 0/100 scores)
    if deff.clusters < 2:
        notes.append(f"clustered errors: every sample is in one cluster ({key}), so no clustered variance exists and "
                     "the independent tests decide")
        return deff, None
    if binary and len(set(diffs)) < 2:
        notes.append("clustered errors: the paired differences do not vary, so no clustered variance exists and "
                     "McNemar's exact test decides")
        return deff, None
    if stats.paired_test in ("mcnemar", "bootstrap"):
        notes.append(f"stats.paired_test={stats.paired_test} treats samples as independent; with {deff.clusters} "
                     f"clusters by {key} the clustered {'Wald' if binary else 't'} test decides")
    args = (pairs.reference, pairs.new, labels, key, params.alpha, params.beta, params.higher_is_better)
    result = clustered_paired(*args, binary=binary, tolerance=margin, gate="regression")
    within = clustered_paired(*args, binary=binary, tolerance=tolerance, gate="noninferiority")
    return deff, (result, claim_rules.continuous(result, within))
