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
clustering changes nothing where there is nothing to cluster.

Tests on ``V_cl`` use Student's t with the smaller of two Satterthwaite degrees of freedom
(:func:`degrees_of_freedom`, :func:`critical`), each approximating ``V_cl`` by a scaled chi-square:

* Imbens and Kolesar's (2016, "Robust standard errors in small samples", Rev. Econ. Stat.) version of
  Bell and McCaffrey's, under a random-effects working model whose intra-cluster correlation is
  estimated on the data (:func:`imbens_kolesar_df`, :func:`intra_cluster_correlation`). With ``C``
  equal clusters it is ``C - 1``; with unequal ones it is less (12 clusters of 4-18 samples: 9.1 at
  ICC 0, 7.1 at ICC 0.3), because a few large clusters carry most of ``V_cl``; ``t(C - 1)`` gave false
  claims at 0.057 there (continuous, ICC 0.3), these df 0.050;
* the plug-in one, ``(sum_c u_c)^2 / sum_c u_c^2`` with ``u_c = S_c^2 / (1 - n_c / n)`` each cluster's
  term of ``V_cl`` (:func:`plug_in_df`): Satterthwaite's df for independent cluster terms of unequal
  variances, each estimated by the term itself. When the changes bunch in a few clusters (0/100
  scores, 2-5% discordance, ICC 0.3) ``V_cl`` rests on those few terms whatever ``C`` is, and only this
  df sees it: with 57 unequal clusters the clustered test's false GO rate was 0.08-0.15 with either
  ``C - 1`` or Imbens-Kolesar df, 0.04-0.055 with this one. With homogeneous clusters it is about
  ``C / 3`` (its squares overstate ``sum sigma_c^4``), a conservative df: the price of the rule.

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
from collections.abc import Iterable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from runner.contract.errors import ConfigError
from runner.stats.numerics.normal import t_quantile, z

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


def critical(alpha: float, df: float | None) -> float:
    """The one-sided ``1 - alpha`` critical value of a test on a clustered variance: Student's t with ``df``
    degrees of freedom (:func:`degrees_of_freedom`; None: the normal's)."""

    if df is None:
        return z(1 - alpha)
    if not df > 0:
        raise ValueError(f"a clustered critical value needs positive degrees of freedom, got {df!r}")
    return t_quantile(1 - alpha, df)


def intra_cluster_correlation(groups: Sequence[Sequence[float]]) -> float:
    """The one-way ANOVA (method of moments) estimate of the intra-cluster correlation, clipped to [0, 1]:
    ``s_u^2 / (s_u^2 + MSW)`` with ``s_u^2 = (MSB - MSW) / n0`` and ``n0 = (n - sum n_c^2 / n) / (C - 1)``
    (0 with fewer than 2 clusters, when no cluster holds 2 samples, or when nothing varies)."""
    n, c = sum(len(g) for g in groups), len(groups)
    if c < 2 or n <= c:
        return 0.0
    mean = math.fsum(math.fsum(g) for g in groups) / n
    means = [math.fsum(g) / len(g) for g in groups]
    msb = math.fsum(len(g) * (m - mean) ** 2 for g, m in zip(groups, means)) / (c - 1)
    msw = math.fsum((x - m) ** 2 for g, m in zip(groups, means) for x in g) / (n - c)
    n0 = (n - math.fsum(len(g) ** 2 for g in groups) / n) / (c - 1)
    between = max(0.0, (msb - msw) / n0)
    return 0.0 if between + msw == 0.0 else min(1.0, between / (between + msw))


def plug_in_df(groups: Sequence[Sequence[float]]) -> float | None:
    """``(sum_c u_c)^2 / sum_c u_c^2`` with ``u_c = S_c^2 / (1 - n_c / n)`` (the CR2 terms; None when every
    ``S_c`` is 0): Satterthwaite's degrees of freedom of ``V_cl`` with each cluster term's variance estimated by
    the term itself, about the number of clusters that carry the variance."""
    n = sum(len(g) for g in groups)
    mean = math.fsum(math.fsum(g) for g in groups) / n
    terms = [math.fsum(x - mean for x in g) ** 2 / (1.0 - len(g) / n) for g in groups]
    total, square = math.fsum(terms), math.fsum(t * t for t in terms)
    return None if square == 0.0 else total * total / square


def degrees_of_freedom(groups: Sequence[Sequence[float]]) -> float:
    """The t reference's degrees of freedom for the CR2 variance of the mean of ``groups`` (the values of each
    cluster): the smaller of :func:`imbens_kolesar_df` at the estimated intra-cluster correlation and
    :func:`plug_in_df` (see the module docstring)."""
    ik = imbens_kolesar_df([len(g) for g in groups], intra_cluster_correlation(groups))
    plug = plug_in_df(groups)
    return ik if plug is None else min(ik, plug)


def imbens_kolesar_df(sizes: Sequence[int], icc: float = 0.0) -> float:
    """Imbens and Kolesar's (2016) degrees of freedom of the CR2 variance of a mean over clusters of ``sizes``,
    under a working model of intra-cluster correlation ``icc`` (0: Bell and McCaffrey's 2002 original).

    ``V_cl = sum_c (lambda_c' e)^2`` with ``lambda_c = (1 - h_c)^{-1/2} (1_c - h_c 1) / n``, ``h_c = n_c / n``
    and ``e`` the errors; with ``Var e = (1 - icc) I + icc (same cluster)`` the ``C x C`` matrix
    ``B = Lambda' Var(e) Lambda`` has Satterthwaite's df ``tr(B)^2 / tr(B^2)``. For the mean ``B`` is a diagonal
    plus a rank-2 matrix, ``B = diag(e) + U M U'`` with ``U = [v, v h]``, ``v_c = h_c / sqrt(1 - h_c)``,
    ``e_c = (1 - icc) h_c / (1 - h_c) / n + icc v_c^2`` and ``M = [[icc q - (1 - icc) / n, -icc], [-icc, 0]]``,
    ``q = sum h_c^2``, so both traces are sums over clusters (at ``icc = 0``:
    ``1 / (sum h_c^2 (1 - 2 h_c) / (1 - h_c)^2 + (sum h_c^2 / (1 - h_c))^2)``; ``C - 1`` for equal clusters)."""
    n, c = sum(sizes), len(sizes)
    if c < 2 or any(m < 1 for m in sizes):
        raise ValueError(f"clustered degrees of freedom need at least 2 non-empty clusters, got sizes {list(sizes)!r}")
    if not 0.0 <= icc <= 1.0:
        raise ValueError(f"an intra-cluster correlation is in [0, 1], got {icc!r}")
    h = [m / n for m in sizes]
    v = [x / math.sqrt(1.0 - x) for x in h]
    w = [a * x for a, x in zip(v, h)]
    diag = [(1.0 - icc) * x / (1.0 - x) / n + icc * a * a for x, a in zip(h, v)]
    q = math.fsum(x * x for x in h)
    m = ((icc * q - (1.0 - icc) / n, -icc), (-icc, 0.0))
    cols = (v, w)
    gram = [[math.fsum(a * b for a, b in zip(cols[i], cols[j])) for j in range(2)] for i in range(2)]
    weighted = [[math.fsum(a * d * b for a, d, b in zip(cols[i], diag, cols[j])) for j in range(2)] for i in range(2)]
    mg = [[sum(m[i][k] * gram[k][j] for k in range(2)) for j in range(2)] for i in range(2)]
    trace = math.fsum(diag) + mg[0][0] + mg[1][1]
    square = (math.fsum(d * d for d in diag)
              + 2.0 * sum(m[i][k] * weighted[k][i] for i in range(2) for k in range(2))
              + sum(mg[i][k] * mg[k][i] for i in range(2) for k in range(2)))
    return trace * trace / square


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
    when every cluster holds one sample or nothing could be estimated. ``df``: the degrees of freedom of
    the t reference (:func:`degrees_of_freedom`; ``icc`` the intra-cluster correlation estimated for it; None
    with fewer than 2 clusters or one sample per cluster, where no clustered test is made)."""

    key: str  # the task's cluster_key (a field of each sample's meta)
    n: int
    clusters: int
    estimated: float | None
    applied: float
    df: float | None = None
    icc: float = 0.0
    carrying: int | None = None  # clusters of more than one sample with a non-zero value (None: not counted)

    @property
    def trivial(self) -> bool:
        """Every cluster holds one sample: the independent figures, exactly."""
        return self.clusters == self.n

    def to_dict(self) -> dict[str, object]:
        return {"cluster_key": self.key, "clusters": self.clusters, "clustered_n": self.n,
                "design_effect": self.applied, "design_effect_estimated": self.estimated, "cluster_df": self.df,
                "clusters_carrying": self.carrying}

    def describe(self) -> str:
        """One line for the report."""
        if self.trivial:
            return (f"{self.clusters} clusters by {self.key} for {self.n} samples: one sample each, "
                    "design effect 1 (independent samples)")
        est = "not estimable" if self.estimated is None else f"{self.estimated:.3f}"
        if self.df is None:
            return f"{self.clusters} cluster by {self.key} for {self.n} samples: no clustered variance"
        floor = ("" if self.estimated is None or self.estimated >= 1
                 else "; floored at 1: a test is never made less conservative than the independent one")
        return (f"{self.clusters} clusters by {self.key} for {self.n} samples, design effect {self.applied:.3f} "
                f"(estimated {est}{floor}); cluster-robust (CR2) standard errors, t with {self.df:.2f} df "
                f"(the smaller of Imbens-Kolesar's at ICC {self.icc:.3f} and the plug-in Satterthwaite)")


def design_effect(values: Sequence[float], labels: Sequence[Hashable], key: str) -> DesignEffect:
    """The design effect of ``values`` clustered by ``labels`` (see the module docstring)."""
    groups = _grouped(values, labels)
    n, c = len(values), len(groups)
    carrying = carrying_clusters(groups.values())
    if c == n:
        return DesignEffect(key, n, c, 1.0, 1.0, carrying=carrying)
    if c < 2:
        return DesignEffect(key, n, c, None, 1.0, carrying=carrying)
    icc = intra_cluster_correlation(list(groups.values()))
    df = degrees_of_freedom(list(groups.values()))
    v_iid = iid_variance_of_mean(values)
    if v_iid == 0.0:
        return DesignEffect(key, n, c, None, 1.0, df, icc, carrying)
    est = clustered_variance_of_mean(values, labels) / v_iid
    return DesignEffect(key, n, c, est, max(1.0, est), df, icc, carrying)


def carrying_clusters(groups: Iterable[Sequence[float]]) -> int:
    """Clusters that carry the variance of a paired difference: more than one sample, and a non-zero difference
    among them. A single sample or a cluster where nothing changed adds a cluster to the count but nothing to the
    cluster sums the variance rests on: 3 clusters of 150 and 9 single samples counted 12, and said GO 0.39 of the
    time at the tolerance (0/100, 5% discordance, ICC 0.3; benchmarks/cluster_layouts.py)."""
    return sum(1 for g in groups if len(g) > 1 and any(float(v) != 0.0 for v in g))


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
