"""Clustered questions: the cluster-robust variance of a mean and the design effect it implies.

Questions that share a subject, a domain or a source question are not independent, so the plain
standard error of a mean score understates its sampling error (Miller 2024, "Adding Error Bars to
Evals", arXiv:2411.00640, appendix A). With ``n`` scores ``x_i`` in ``C`` clusters of ``n_c`` and
``S_c = sum_{i in c} (x_i - xbar)``, the cluster-robust variance of the mean is Bell and McCaffrey's
(2002) bias-reduced CR2 sandwich, which for a mean reads::

    V_cl = sum_c S_c^2 / (1 - n_c / n) / n^2

With equal clusters it is the CR1 sandwich ``C / (C - 1) sum_c S_c^2 / n^2`` (Inspect AI's
``stderr(cluster=...)``); with unequal ones it corrects each cluster for its leverage ``n_c / n``,
which CR1 does not (CR1 understates the variance when a few large clusters dominate). With one sample
per cluster ``V_cl`` is *exactly* the plain variance of the mean ``s^2 / n`` (``ddof=1``), so
clustering changes nothing where there is nothing to cluster. Tests on ``V_cl`` use Student's t with
``C - 1`` degrees of freedom (:func:`critical`): the variance is estimated from ``C`` cluster sums.

The **design effect** is ``deff = V_cl / V_iid`` with ``V_iid = s^2 / n``: how many times more
samples clustered questions need for the precision of independent ones. The decision applies
``max(1, deff)`` (:attr:`DesignEffect.applied`): a deff below 1 would need questions of a subject to
be negatively correlated, which evals do not show; with tens of clusters the estimate is noisy, so an
estimate below 1 is read as noise and the test is never made less conservative than the independent
one. A design effect is 1 by definition (not by arithmetic) when every cluster holds one sample, so
the figures of the decision are then bit-for-bit today's.

Pure Python (``math.fsum``): no numpy, so it imports in milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from runner.contract.errors import ConfigError

CLUSTER_MODES = ("auto", "off")
"""``stats.cluster``: ``auto`` uses the task's ``cluster_key`` when it declares one; ``off`` treats every
sample as independent (the figures before clustered errors)."""


def _grouped(values: Sequence[float], labels: Sequence[Hashable]) -> dict[Hashable, list[float]]:
    if len(values) != len(labels):
        raise ValueError(f"one cluster label per value is needed, got {len(values)} values and {len(labels)} labels")
    if not values:
        raise ValueError("a clustered variance needs at least one value")
    groups: dict[Hashable, list[float]] = {}
    for v, c in zip(values, labels):
        groups.setdefault(c, []).append(float(v))
    return groups


def clustered_variance_of_mean(values: Sequence[float], labels: Sequence[Hashable]) -> float:
    """``sum_c S_c^2 / (1 - n_c / n) / n^2`` (CR2); needs at least 2 clusters."""
    groups = _grouped(values, labels)
    n, c = len(values), len(groups)
    if c < 2:
        raise ValueError("a cluster-robust variance needs at least 2 clusters")
    mean = math.fsum(float(v) for v in values) / n
    terms = [math.fsum(x - mean for x in g) ** 2 / (1.0 - len(g) / n) for g in groups.values()]
    return math.fsum(terms) / (n * n)


def critical(alpha: float, clusters: int | None) -> float:
    """The one-sided ``1 - alpha`` critical value of a test on a clustered variance: Student's t with
    ``clusters - 1`` degrees of freedom (None, or one sample per cluster: the normal's)."""
    from statistics import NormalDist

    if clusters is None:
        return NormalDist().inv_cdf(1 - alpha)
    if clusters < 2:
        raise ValueError("a clustered critical value needs at least 2 clusters")
    from scipy import stats

    return float(stats.t.ppf(1 - alpha, clusters - 1))


def iid_variance_of_mean(values: Sequence[float]) -> float:
    """``s^2 / n`` with ``s`` the sample standard deviation (``ddof=1``); needs at least 2 values."""
    n = len(values)
    if n < 2:
        raise ValueError("a variance of the mean needs at least 2 values")
    mean = math.fsum(float(v) for v in values) / n
    return math.fsum((float(v) - mean) ** 2 for v in values) / (n - 1) / n


@dataclass(frozen=True)
class DesignEffect:
    """The clusters of the samples a test used, and the design effect estimated on their scores.

    ``estimated`` is ``V_cl / V_iid`` (None when it cannot be estimated: fewer than 2 clusters, or
    scores that do not vary); ``applied`` is what the test uses: ``max(1, estimated)``, and exactly 1
    when every cluster holds one sample or nothing could be estimated."""

    key: str  # the task's cluster_key (a field of each sample's meta)
    n: int
    clusters: int
    estimated: float | None
    applied: float

    @property
    def trivial(self) -> bool:
        """Every cluster holds one sample: the independent figures, exactly."""
        return self.clusters == self.n

    def to_dict(self) -> dict[str, object]:
        return {"cluster_key": self.key, "clusters": self.clusters, "clustered_n": self.n,
                "design_effect": self.applied, "design_effect_estimated": self.estimated}

    def describe(self) -> str:
        """One line for the report."""
        if self.trivial:
            return (f"{self.clusters} clusters by {self.key} for {self.n} samples: one sample each, "
                    "design effect 1 (independent samples)")
        est = "not estimable" if self.estimated is None else f"{self.estimated:.3f}"
        floor = ("" if self.estimated is None or self.estimated >= 1
                 else "; floored at 1: a test is never made less conservative than the independent one")
        return (f"{self.clusters} clusters by {self.key} for {self.n} samples, design effect {self.applied:.3f} "
                f"(estimated {est}{floor}); cluster-robust (CR2) standard errors, t with {self.clusters - 1} df")


def design_effect(values: Sequence[float], labels: Sequence[Hashable], key: str) -> DesignEffect:
    """The design effect of ``values`` clustered by ``labels`` (see the module docstring)."""
    groups = _grouped(values, labels)
    n, c = len(values), len(groups)
    if c == n:
        return DesignEffect(key, n, c, 1.0, 1.0)
    if c < 2 or n < 2:
        return DesignEffect(key, n, c, None, 1.0)
    v_iid = iid_variance_of_mean(values)
    if v_iid == 0.0:
        return DesignEffect(key, n, c, None, 1.0)
    est = clustered_variance_of_mean(values, labels) / v_iid
    return DesignEffect(key, n, c, est, max(1.0, est))


def check_design_effect(deff: float) -> float:
    """A planned design effect: a finite number >= 1 (1: independent samples)."""
    if isinstance(deff, bool) or not isinstance(deff, (int, float)) or not math.isfinite(deff) or deff < 1:
        raise ValueError(f"a design effect is a finite number >= 1 (1: independent samples), got {deff!r}")
    return float(deff)


def effective_sigma(sigma: float, deff: float) -> float:
    """``sigma sqrt(deff)``: the per-sample spread that gives independent-sample formulas a clustered variance
    (theta and the threshold grow by ``sqrt(deff)``, the samples needed for a theta by ``deff``)."""
    return sigma * math.sqrt(check_design_effect(deff)) if deff != 1 else sigma


def labels_of(scored: Sequence[Any], key: str) -> dict[str, str]:
    """Each scored sample's cluster by sample id: the value of ``meta[key]``.

    A sample without it stops the decision with a :class:`ConfigError`: the task declares a cluster key
    its samples do not carry."""
    out: dict[str, str] = {}
    for s in scored:
        meta = getattr(s, "meta", None) or {}
        if key not in meta or meta[key] is None:
            raise ConfigError("a scored sample does not carry the task's cluster key",
                              where=f"task.cluster_key={key}", given=f"sample '{s.sample_id}' meta keys: "
                              f"{', '.join(sorted(meta)) or 'none'}",
                              fix="set task.cluster_key to a field every sample's meta has, or stats.cluster=off")
        out[s.sample_id] = str(meta[key])
    return out
