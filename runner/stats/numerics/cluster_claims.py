"""The claims a clustered design allows, shared by the per-sample rules: the unpaired test's sigma carrying the
design effect of the run's clusters, and no claim where too few clusters carry the variance."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping, Sequence

from runner.stats.data.claims import Claims
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics import cluster_variance as clustering


def unpaired_params(scored: Sequence[Any], labels: Mapping[str, str], key: str, params: HypothesisParams, stats: Any,
                    notes: list[str]) -> tuple[HypothesisParams, clustering.DesignEffect]:
    """The unpaired test's parameters with ``sigma sqrt(deff) t / z``, and the design effect of the run's scores.

    ``t / z`` (the ``1 - alpha`` quantiles of Student's t with the design effect's small-sample degrees of
    freedom and of the normal) makes the z-test's threshold, p < alpha and interval those of that t-test: the
    design effect is estimated from ``C`` cluster sums (with three clusters and ICC 0.1-0.3 the z quantile gives
    false claims at 0.11-0.17)."""
    deff = clustering.design_effect([s.score for s in scored], [labels[s.sample_id] for s in scored], key)
    if deff.trivial or deff.df is None:
        return params, deff
    few = clustering.critical(params.alpha, deff.df) / clustering.critical(params.alpha, None)
    sigma = params.sigma * math.sqrt(deff.applied) * few
    notes.append(f"unpaired test: sigma {params.sigma:g} x sqrt(design effect {deff.applied:.3f}) x t({deff.df:.2f})"
                 f"/z quantiles {few:.3f} = {sigma:.3f} ({deff.clusters} clusters by {key})")
    params = replace(params, sigma=sigma)
    if stats.sequential.enabled or stats.extensions:
        notes.append("sequential looks: the paired looks treat samples as independent; clustered errors reach only "
                     "the unpaired looks (through sigma)")
    return params, deff


def too_few(claims: Claims, deff: clustering.DesignEffect | None, stats: Any, notes: list[str],
            paired: bool = False) -> Claims:
    """No claim where fewer than ``stats.min_clusters`` clusters carry the variance: for paired differences the
    clusters of more than one sample with a non-zero difference (:func:`~runner.stats.numerics.cluster_variance.
    carrying_clusters`), for unpaired scores every cluster. The clustered variance then rests on too few cluster
    sums for any claim to hold its alpha (the interval is still printed, as a description)."""
    least = getattr(stats, "min_clusters", 10)
    if deff is None or deff.trivial or not (claims.regression or claims.within):
        return claims
    count = deff.carrying if paired and deff.carrying is not None else deff.clusters
    if count >= least:
        return claims
    what = (f"{count} of {deff.clusters} clusters by {deff.key} carry the variance (more than one sample, a "
            "difference that is not 0)") if paired else f"{deff.clusters} clusters by {deff.key}"
    notes.append(f"clustered errors: {what}, fewer than stats.min_clusters={least}: too few cluster sums for a claim "
                 "at alpha, so neither claim is made (INCONCLUSIVE); stats.cluster=off treats the samples as "
                 "independent")
    return replace(claims, regression=False, within=False,
                   method=f"{claims.method}; no claim: {count} clusters < stats.min_clusters={least}")
