"""Paired tests on clustered samples: one test of the mean difference with a cluster-robust standard error.

When questions come in clusters (MMLU subjects, GPQA domains) the per-sample differences
``d_i = new_i - ref_i`` of a cluster are correlated, and the paired tests of :mod:`runner.stats.rules.paired_continuous`
understate the error of their mean. The mean difference is then tested with
``se = sqrt(max(V_cl, V_iid))`` (:mod:`runner.stats.numerics.cluster_variance`: the bias-reduced CR2 sandwich of
Bell and McCaffrey, floored at the independent variance), ``T = (sign * mean + tolerance) / se``
against Student's t with small-sample degrees of freedom (:func:`runner.stats.numerics.cluster_variance.degrees_of_freedom`,
at most ``C - 1``), for continuous and 0/100 scores alike: the variance is estimated from ``C`` cluster
sums, so with three GPQA domains it has about one degree of freedom, not hundreds (a normal reference,
the clustered Wald test, gives false GO rates of 0.65 at three clusters and ICC 0.3).

This test is one half of the clustered rule (:mod:`runner.stats.rules.clustered`): a claim also
needs the independent exact test on the same data, so clustering never makes a verdict more decisive.

The interval is ``mean +- q se`` with ``q`` that t's ``1 - alpha`` quantile, so its bad-side bound
crosses ``-tolerance`` exactly when the regression test rejects and its good side exactly when the
non-inferiority test does.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from runner.stats.numerics.cluster_variance import critical, design_effect
from runner.stats.data.paired_result import PairedResult
from runner.stats.numerics.power import power_constant


def _p(df: float, stat: float, regression: bool) -> float:
    """The gate's one-sided p-value of ``stat`` under Student's t with ``df`` degrees of freedom."""
    from scipy import stats

    return float(stats.t.cdf(stat, df) if regression else stats.t.sf(stat, df))


def clustered_paired(ref: Sequence[float], new: Sequence[float], labels: Sequence[Hashable], key: str,
                     alpha: float, beta: float, higher_is_better: bool = True, *, binary: bool,
                     tolerance: float = 0.0, gate: str = "regression") -> PairedResult:
    """One-sided test of the paired mean difference with a cluster-robust standard error.

    ``ref``, ``new``: per-sample scores in the same order as ``labels`` (their clusters); ``binary``:
    0/100 (or 0/1) scores (their discordant counts are reported too). Both kinds are tested against
    Student's t with the design effect's degrees of freedom (:func:`runner.stats.numerics.cluster_variance.degrees_of_freedom`).
    Differences and means are on the metric's scale (0/1 scores are read as fractions and reported on the 0-100 scale, as McNemar's test does). Regression gate, H0:
    ``sign * mean + tolerance >= 0``, rejected when ``p < alpha``; non-inferiority gate: the reverse.
    ``theta_paired = (|z(alpha)| + |z(beta)|) se``."""
    k = power_constant(alpha, beta)
    r = [float(v) for v in ref]
    w = [float(v) for v in new]
    if len(r) != len(w) or len(r) != len(labels):
        raise ValueError(f"paired scores and clusters need equal lengths, got {len(r)}, {len(w)} and {len(labels)}")
    unit = 100.0 if binary and set(r) | set(w) <= {0.0, 1.0} else 1.0
    diff = [unit * (b - a) for a, b in zip(r, w)]
    n = len(diff)
    deff = design_effect(diff, labels, key)
    if deff.clusters < 2:
        raise ValueError("a clustered paired test needs at least 2 clusters")
    mean_d = math.fsum(diff) / n
    sd = math.sqrt(math.fsum((d - mean_d) ** 2 for d in diff) / (n - 1))
    se = sd / math.sqrt(n) * math.sqrt(deff.applied)
    sign = 1.0 if higher_is_better else -1.0
    shifted = sign * mean_d + tolerance
    regression = gate == "regression"
    df = deff.df
    if df is None:
        raise ValueError("a clustered paired test needs clusters of more than one sample")
    q = critical(alpha, df)
    if se == 0.0:
        p = (0.0 if shifted < 0 else 1.0) if regression else (0.0 if shifted > 0 else 1.0)
    else:
        p = _p(df, shifted / se, regression)
    half = q * se
    fields: dict[str, object] = {}
    if binary:
        good = 100.0 if higher_is_better else 0.0
        b = sum(1 for a, x in zip(r, w) if unit * a == good and unit * x != good)
        c = sum(1 for a, x in zip(r, w) if unit * a != good and unit * x == good)
        fields = dict(discordant=(b, c), discordance_rate=(b + c) / n)
    method, ci_method = "clustered paired t", f"clustered paired t, CR2, {df:.2f} df"
    return PairedResult.gated(
        p, alpha, beta, higher_is_better, gate, tolerance,
        method=method, n=n, mean_diff=mean_d, theta_paired=k * se,
        reference_mean=unit * math.fsum(r) / n, new_mean=unit * math.fsum(w) / n,
        sd_diff=sd, ci=(mean_d - half, mean_d + half), ci_method=ci_method,
        design_effect=deff, **fields)
