"""How a job's decision uses clustered samples (``stats.cluster=auto`` and a task ``cluster_key``).

* **unpaired** (TensorRT-LLM's z-test, sigma from the task): the design effect of the run's own scores
  (CR2, floored at 1, :mod:`runner.stats.numerics.cluster_variance`) and the few-cluster factor ``t(df) / z`` inflate
  sigma, ``sigma_eff = sigma sqrt(deff) t / z``, so the threshold, theta, interval and p-value all
  follow (the z-test on ``sigma_eff`` rejects exactly when a t-test with ``df`` would; ``df`` from
  :func:`runner.stats.numerics.cluster_variance.degrees_of_freedom`, at most ``C - 1``), and the advice's sample counts grow with it.
* **paired**: each claim holds only when both the clustered t-test of the mean difference
  (:mod:`runner.stats.numerics.clustered_paired`: CR2, small-sample df) and the independent test on the same
  pairs (McNemar's exact and Tango's tests for 0/100 scores, the paired continuous test otherwise)
  show it, so clustering never makes a verdict more decisive than the unclustered exact test. Where
  nothing is clustered (one sample per cluster, one cluster, differences that do not vary) the
  independent tests alone decide.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from runner.stats.data.claims import DeclaredRule, paired_claims
from runner.stats.data import pairing
from runner.stats.numerics import cluster_variance as clustering
from runner.stats.numerics.clustered_paired import clustered_paired
from runner.stats.data.paired_result import PairedResult
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.rules.base import AUTO, Case, Found, Rule
from runner.stats.data.claims import Claims
from runner.stats.numerics.advice import Advice, AdviceCase


def paired(pairs: Any, params: HypothesisParams, stats: Any, margin: float, tolerance: float, key: str,
           labels: list[str], notes: list[str], independent: tuple[PairedResult, Claims]
           ) -> tuple[PairedResult, Claims]:
    """Both claims on clustered pairs: each holds only when the clustered t-test (CR2, small-sample df) and the
    independent test (``independent``: its result and claims on the same pairs) both show it.

    The design effect is attached to the result in every case; the independent tests alone decide where
    nothing is clustered (one sample per cluster, one cluster, or differences that do not vary)."""
    ind_result, ind_claims = independent
    binary = stats.paired_test in (*AUTO, "mcnemar") and pairing.is_binary(pairs)
    diffs = [b - a for a, b in zip(pairs.reference, pairs.new)]
    deff = clustering.design_effect(diffs, labels, key)
    alone = (replace(ind_result, design_effect=deff), ind_claims)
    if deff.trivial or stats.paired_test == "mcnemar" and not binary:
        return alone  # the independent tests decide (McNemar's says why it needs 0/100 scores)
    if deff.clusters < 2:
        notes.append(f"clustered errors: every sample is in one cluster ({key}), so no clustered variance exists and "
                     "the independent tests decide")
        return alone
    if len(set(diffs)) < 2:
        notes.append("clustered errors: the paired differences do not vary, so no clustered variance exists and "
                     "the independent tests decide")
        return alone
    args = (pairs.reference, pairs.new, labels, key, params.alpha, params.beta, params.higher_is_better)
    result = clustered_paired(*args, binary=binary, tolerance=margin, gate="regression")
    within = clustered_paired(*args, binary=binary, tolerance=tolerance, gate="noninferiority")
    clustered = paired_claims(result, within)
    claims = both(clustered, ind_claims, f"{result.design_effect.df:.2f} df")
    decided = replace(result, p_value=max(result.p_value, ind_result.p_value),
                      passed=result.passed or ind_result.passed, ci=claims.ci,
                      method=f"{result.method} and {ind_result.method}",
                      ci_method=f"{result.ci_method}; {ind_result.ci_method}")
    return decided, claims



class Clustered:
    """A paired rule on clustered pairs: the inner rule decides on the pairs as independent, and each claim holds
    only when the clustered t-test (CR2, small-sample df) shows it too (:func:`paired`)."""

    def __init__(self, inner: Rule) -> None:
        self.inner = inner

    def applies(self, case: Case) -> str | None:
        return self.inner.applies(case)

    def decide(self, case: Case) -> Found:
        assert case.clusters is not None, "a clustered rule needs the pairs' clusters"
        independent = self.inner.decide(case)
        key, labels = case.clusters
        result, claims = paired(case.pairs, case.params, case.stats, case.margin, case.tolerance, key, labels,
                                case.notes, (independent.result, independent.claims))
        return Found(result, claims)

    def advise(self, case: AdviceCase) -> Advice | None:
        """The inner rule's advice (each inflates its spread by the paired result's design effect)."""
        return self.inner.advise(case)


def both(clustered: Claims, independent: Claims, df: str) -> Claims:
    """The claims that hold only when the clustered test and the independent one both show them.

    Each claim is an intersection-union test, so its p-value is the larger of the two, and the interval
    that inverts it is the hull of the two intervals: its bad-side bound is the less decisive one, and so
    is its good side."""
    assert clustered.ci is not None and independent.ci is not None
    p_within = None
    if clustered.p_within is not None and independent.p_within is not None:
        p_within = max(clustered.p_within, independent.p_within)
    return Claims(regression=clustered.regression and independent.regression,
                  within=clustered.within and independent.within,
                  low=min(clustered.low, independent.low), high=max(clustered.high, independent.high),
                  method=f"the less decisive of clustered paired t (CR2, {df}) and {independent.method}",
                  p_within=p_within, moved_go=max(clustered.moved_go, independent.moved_go),
                  moved_no_go=max(clustered.moved_no_go, independent.moved_no_go))


CLAIMS = (
    DeclaredRule("clustered paired 0/100: CR2 t(small-sample df) and the independent test",
         "paired 0/100 scores with stats.cluster=auto and clusters of more than one sample",
         ("NO-GO at drop = margin (0)", "GO at drop = tolerance"),
         "the outer of the CR2 t bound and the exact unconditional bound (a claim needs both)"),
    DeclaredRule("clustered paired continuous: CR2 t(small-sample df) and the independent test",
         "paired continuous scores with stats.cluster=auto", ("NO-GO at drop = margin (0)", "GO at drop = tolerance"),
         "the outer of the CR2 t bound and the unclustered test's bound"),
    DeclaredRule("clustered unpaired z-test: sigma sqrt(deff) t(small-sample df)/z",
         "the unpaired test with stats.cluster=auto", ("NO-GO at drop = margin (0)", "GO at drop = tolerance"),
         "the Wald bound with the inflated sigma"),
)
"""The rules of this module and their claims, as the calibration grid measures them."""
