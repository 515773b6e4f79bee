"""Clustered standard errors: the CR2 variance by hand (the CR1 one for equal clusters), the reduction to today's figures with one sample
per cluster (and with stats.cluster=off), the clustered unpaired, paired t and paired 0/100 tests, the
advice and the planned design effect.

Expected figures come from the formulas written out here with numpy and scipy, never from the code
under test: for equal clusters ``V_cl = C/(C-1) sum_c (sum_{i in c} (x_i - xbar))^2 / n^2`` (Miller 2024
appendix A with Inspect AI's C/(C-1) factor); for unequal ones Bell and McCaffrey's CR2 sandwich built
from matrices (``(I - H_cc)^{-1/2}`` by scipy.linalg); ``V_iid = s^2 / n``, ``deff = V_cl / V_iid``
floored at 1. Tests on ``V_cl`` use Student's t with Imbens and Kolesar's (2016) degrees of freedom, built
here from the n x n matrices of their definition (``C - 1`` for equal clusters).
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats as sps

from runner.contract.errors import ConfigError
from runner.contract.evaluator import ScoredSample
from runner.contract.spec import AccuracySpec
from runner.references import samples as reference_samples
from runner.references.samples import RunProvenance, pairing_problem
from runner.references.store import Reference
from runner.stats import advising
from runner.stats.numerics.cluster_variance import (
    clustered_variance_of_mean,
    design_effect,
    iid_variance_of_mean,
    imbens_kolesar_df,
    intra_cluster_correlation,
    plug_in_df,
)
from runner.stats.dispatch import decide_against
from runner.stats.planning.paired import paired_min_samples, paired_theta
from runner.stats.settings import StatsConfig, validate
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics.ztest import min_samples_for_theta
from runner.stats.data.tolerance import Tolerance

Z05 = 1.6448536269514722
TOL = Tolerance(3.0, "test")
RUN = RunProvenance(seed=0, dataset_source="packaged")


def by_hand(x, labels) -> tuple[float, float]:
    """(V_cl with C/(C-1), V_iid) written out with numpy, as Inspect AI's stderr(cluster=...) squares."""
    x = np.asarray(x, dtype=float)
    labels = np.asarray(labels)
    mean, n = x.mean(), x.size
    groups = np.unique(labels)
    total = sum(np.outer(x[labels == g] - mean, x[labels == g] - mean).sum() for g in groups)
    c = groups.size
    return total * c / (c - 1) / n ** 2, x.var(ddof=1) / n


def inv_sqrt(a):
    """``a^{-1/2}`` of a symmetric positive definite matrix, by its eigendecomposition (scipy.linalg.eigh)."""
    from scipy.linalg import eigh

    w, v = eigh(a)
    return v @ np.diag(w ** -0.5) @ v.T


def cr2_by_matrices(x, labels) -> float:
    """Bell and McCaffrey's CR2 variance of the OLS intercept (the mean), with the adjustment matrices built
    and inverted by scipy rather than reduced by hand."""
    x = np.asarray(x, dtype=float)
    labels = np.asarray(labels)
    n = x.size
    e = x - x.mean()
    total = 0.0
    for g in np.unique(labels):
        idx = labels == g
        m = int(idx.sum())
        h = np.full((m, m), 1.0 / n)  # X (X'X)^-1 X' restricted to the cluster, X = a column of ones
        a = inv_sqrt(np.eye(m) - h)
        total += (np.ones(m) @ a @ e[idx]) ** 2
    return total / n ** 2


def ik_df_by_matrices(sizes, rho: float) -> float:
    """Imbens and Kolesar's (2016) degrees of freedom for the OLS intercept with CR2, from their definition:
    ``G_c = M (A_c X_c (X'X)^-1 placed in cluster c)``, ``B = G' Omega G`` with the random-effects working
    variance ``Omega = (1 - rho) I + rho (same cluster)``, df ``tr(B)^2 / tr(B^2)``."""
    g = np.repeat(np.arange(len(sizes)), sizes)
    n = g.size
    x = np.ones((n, 1))
    hat = x @ np.linalg.inv(x.T @ x) @ x.T
    resid = np.eye(n) - hat
    cols = []
    for c in range(len(sizes)):
        idx = g == c
        a = inv_sqrt(np.eye(idx.sum()) - hat[np.ix_(idx, idx)])
        u = np.zeros(n)
        u[idx] = (a @ x[idx] @ np.linalg.inv(x.T @ x))[:, 0]
        cols.append(resid @ u)
    big = np.array(cols).T
    omega = (1 - rho) * np.eye(n) + rho * (g[:, None] == g[None, :])
    b = big.T @ omega @ big
    return float(np.trace(b) ** 2 / np.sum(b * b))


def anova_icc(x, g) -> float:
    """The one-way ANOVA estimate of the intra-cluster correlation, with numpy, clipped to [0, 1]."""
    x, g = np.asarray(x, float), np.asarray(g)
    groups = [x[g == c] for c in np.unique(g)]
    n, k = x.size, len(groups)
    msb = sum(len(v) * (v.mean() - x.mean()) ** 2 for v in groups) / (k - 1)
    msw = sum(((v - v.mean()) ** 2).sum() for v in groups) / (n - k)
    n0 = (n - sum(len(v) ** 2 for v in groups) / n) / (k - 1)
    s2u = max(0.0, (msb - msw) / n0)
    return s2u / (s2u + msw)


@pytest.mark.parametrize("sizes", [(18, 16, 14, 13, 11, 10, 9, 8, 7, 6, 4, 4), (40, 25, 9, 3, 1), (86, 93, 19)])
@pytest.mark.parametrize("rho", [0.0, 0.1, 0.3, 1.0])
def test_imbens_kolesar_df_by_matrices(sizes, rho):
    assert imbens_kolesar_df(sizes, rho) == pytest.approx(ik_df_by_matrices(sizes, rho), rel=1e-9)


def test_bell_mccaffrey_df_closed_form_and_equal_clusters():
    # rho = 0: 1 / (sum h^2 (1 - 2h) / (1 - h)^2 + (sum h^2 / (1 - h))^2), written out for sizes (3, 1): h = 3/4, 1/4
    # -> sum h^2 (1 - 2h) / (1 - h)^2 = (9/16)(-1/2)(16) + (1/16)(1/2)(16/9) = -4.5 + 1/18;
    # sum h^2 / (1 - h) = (9/16)(4) + (1/16)(4/3) = 9/4 + 1/12 = 7/3 -> df = 1 / (-4.5 + 1/18 + 49/9) = 1
    assert imbens_kolesar_df((3, 1)) == pytest.approx(1.0, rel=1e-12)
    for c, m in ((2, 5), (12, 10), (57, 3)):
        for rho in (0.0, 0.3):
            assert imbens_kolesar_df((m,) * c, rho) == pytest.approx(c - 1, rel=1e-12)
    assert imbens_kolesar_df((18, 16, 14, 13, 11, 10, 9, 8, 7, 6, 4, 4)) < 11 - 1.5  # unequal clusters: fewer df


def plug_in_by_numpy(x, g) -> float:
    """``(sum u)^2 / sum u^2`` of the CR2 terms ``u_c = S_c^2 / (1 - n_c / n)``, with numpy."""
    x, g = np.asarray(x, float), np.asarray(g)
    u = np.array([(x[g == c] - x.mean()).sum() ** 2 / (1 - (g == c).sum() / x.size) for c in np.unique(g)])
    return float(u.sum() ** 2 / (u ** 2).sum())


def small_sample_df(x, g) -> float:
    """The clustered test's df: the smaller of Imbens-Kolesar's (matrices, ANOVA ICC) and the plug-in one."""
    sizes = np.unique(np.asarray(g), return_counts=True)[1]
    return min(ik_df_by_matrices(sizes, anova_icc(x, g)), plug_in_by_numpy(x, g))


def test_plug_in_df_sees_changes_bunched_in_few_clusters():
    # 0/100 differences: 20 clusters of 10, every loss in two clusters. Imbens-Kolesar's df is 19 (equal clusters),
    # but V_cl rests on the two clusters' terms: the plug-in df is about 2
    x = np.zeros(200)
    x[[3, 5, 7, 14, 16]] = -100.0
    g = np.repeat(np.arange(20), 10)
    groups = [x[g == c].tolist() for c in range(20)]
    assert plug_in_df(groups) == pytest.approx(plug_in_by_numpy(x, g), rel=1e-12)
    assert plug_in_df(groups) < 3
    assert imbens_kolesar_df([10] * 20, intra_cluster_correlation(groups)) == pytest.approx(19)
    d = design_effect(x.tolist(), g.tolist(), "k")
    assert d.df == pytest.approx(plug_in_by_numpy(x, g), rel=1e-12)
    assert plug_in_df([[1.0, 1.0], [1.0]]) is None  # no cluster term: the plug-in df does not exist


def test_icc_estimate_by_numpy():
    rng = np.random.default_rng(8)
    sizes = [12, 7, 3, 9, 2, 15]
    g = np.repeat(np.arange(len(sizes)), sizes)
    x = rng.normal(size=g.size) + 1.5 * rng.normal(size=len(sizes))[g]
    groups = [x[g == c].tolist() for c in range(len(sizes))]
    assert intra_cluster_correlation(groups) == pytest.approx(anova_icc(x, g), rel=1e-12)
    assert intra_cluster_correlation([[1.0, -1.0], [1.0, -1.0]]) == 0.0  # no between-cluster variance
    assert intra_cluster_correlation([[1.0, 1.0], [2.0, 2.0]]) == 1.0


def test_cr2_variance_of_unequal_clusters_by_matrices():
    rng = np.random.default_rng(5)
    sizes = [40, 25, 9, 3, 1]
    g = np.repeat(np.arange(len(sizes)), sizes)
    x = rng.normal(size=g.size) + rng.normal(size=len(sizes))[g]
    assert clustered_variance_of_mean(x.tolist(), g.tolist()) == pytest.approx(cr2_by_matrices(x, g), rel=1e-10)
    # with unequal clusters CR2 is not CR1
    assert abs(cr2_by_matrices(x, g) - by_hand(x, g)[0]) > 1e-3 * by_hand(x, g)[0]


def test_cr1_variance_by_hand():
    # mean 0.5; cluster sums of deviations a: 0, b: +1, c: -1 -> sum S^2 = 2; C = 3: V = 3/2 * 2 / 36 = 1/12
    x, g = [1, 0, 1, 1, 0, 0], ["a", "a", "b", "b", "c", "c"]
    assert clustered_variance_of_mean(x, g) == pytest.approx(1 / 12, rel=1e-15)
    assert iid_variance_of_mean(x) == pytest.approx(6 * 0.25 / 5 / 6, rel=1e-15)  # s^2 = 0.3, / n
    d = design_effect(x, g, "k")
    assert d.estimated == pytest.approx((1 / 12) / 0.05) and d.applied == d.estimated and d.clusters == 3
    rng = np.random.default_rng(3)
    x = rng.normal(size=300) + np.repeat(rng.normal(size=30), 10)
    g = np.repeat(np.arange(30), 10).tolist()
    v_cl, v_iid = by_hand(x, g)
    assert clustered_variance_of_mean(x.tolist(), g) == pytest.approx(v_cl, rel=1e-12)
    assert design_effect(x.tolist(), g, "k").estimated == pytest.approx(v_cl / v_iid, rel=1e-12)


def test_one_sample_per_cluster_is_the_iid_variance():
    x = np.random.default_rng(0).normal(size=50).tolist()
    assert clustered_variance_of_mean(x, list(range(50))) == pytest.approx(np.var(x, ddof=1) / 50, rel=1e-12)
    d = design_effect(x, list(range(50)), "k")
    assert d.trivial and d.applied == 1.0 and d.estimated == 1.0


def test_negative_correlation_is_floored_at_one():
    x = [100.0, 0.0] * 10  # every cluster sums to its mean: V_cl = 0
    d = design_effect(x, [i // 2 for i in range(20)], "k")
    assert d.estimated == pytest.approx(0.0, abs=1e-15) and d.applied == 1.0


# ------------------------------------------------------------------ the decision


def st(**kw) -> SimpleNamespace:
    return SimpleNamespace(**(vars(StatsConfig()) | kw))


def run(tmp_path, new: dict[str, float], clusters: dict[str, str], ref: dict[str, float] | None = None,
        value: float | None = None, key: str | None = "subject", params=None, tolerance=TOL, **stats_kw):
    recorded = None
    if ref is not None:
        rel, sha = reference_samples.store(tmp_path, "mmlu", ((k, v, f"prompt {k}") for k, v in ref.items()))
        recorded = {"samples": rel, "samples_sha256": sha, "seed": 0, "dataset_source": "packaged"}
    params = params or HypothesisParams(0.05, 0.2, 50.0, len(new))
    value = value if value is not None else float(np.mean(list((ref or new).values())))
    reference = Reference("mmlu", "m", AccuracySpec(), value, params, None, None, tmp_path / "mmlu.yaml", 0, recorded)
    scored = [ScoredSample(k, f"prompt {k}", "", "", v, {"subject": clusters[k]}) for k, v in new.items()]
    s = st(**stats_kw)
    rows = problem = None
    if recorded is not None and s.method != "unpaired":
        rows = reference_samples.load_rows(tmp_path, rel, sha)
        problem = pairing_problem(recorded, rows, scored, RUN)
    return decide_against(reference, scored, float(np.mean(list(new.values()))), params, s, None, "accuracy", rows,
                          problem, (), tolerance, cluster_key=key)


def figures(d) -> dict:
    """Every figure of a decision but the cluster descriptors."""
    out = {k: v for k, v in d.to_dict().items()
           if k not in ("stats_cluster", "cluster_key", "clusters", "clustered_n", "design_effect",
                        "design_effect_estimated", "clusters_carrying")}
    if d.paired is not None:
        out["paired"] = {k: v for k, v in d.paired.to_dict().items() if k not in ("clusters", "design_effect")}
    return out


def data(n=120, size=6, seed=1, continuous=False):
    rng = np.random.default_rng(seed)
    ids = [f"s/{i:04d}" for i in range(n)]
    level = np.repeat(rng.uniform(0.2, 0.9, n // size), size)
    if continuous:
        ref = rng.normal(50 + 30 * level, 5)
        new = ref - 1.0 + rng.normal(0, 3, n) + np.repeat(rng.normal(0, 3, n // size), size)
    else:
        ref = np.where(rng.random(n) < level, 100.0, 0.0)
        flip = rng.random(n) < np.repeat(rng.uniform(0, 0.3, n // size), size)
        new = np.where(flip, 100.0 - ref, ref)
    clusters = {i: f"c{j // size}" for j, i in enumerate(ids)}
    return dict(zip(ids, ref.tolist())), dict(zip(ids, new.tolist())), clusters, ids


@pytest.mark.parametrize("kind", ["unpaired", "binary", "continuous"])
def test_singletons_and_off_give_todays_figures_exactly(tmp_path, kind):
    ref, new, clusters, ids = data(continuous=kind == "continuous")
    rows = None if kind == "unpaired" else ref
    base = run(tmp_path, new, clusters, rows, key=None)
    alone = run(tmp_path, new, {i: i for i in ids}, rows)
    off = run(tmp_path, new, clusters, rows, cluster="off")
    assert base.rule == ("unpaired" if kind == "unpaired" else "paired")
    assert figures(alone) == figures(base) and figures(off) == figures(base)
    assert alone.clustering.trivial and alone.clustering.applied == 1.0 and off.clustering is None
    assert off.to_dict()["stats_cluster"] == "off" and alone.to_dict()["design_effect"] == 1.0


def test_unpaired_sigma_is_inflated_by_the_design_effect(tmp_path):
    _, new, clusters, ids = data()
    d = run(tmp_path, new, clusters, value=55.0)
    v_cl, v_iid = by_hand([new[i] for i in ids], [clusters[i] for i in ids])
    deff = max(1.0, v_cl / v_iid)
    assert deff > 1.2
    scale = math.sqrt(2 * 50.0 ** 2 * deff / len(ids))
    # 20 equal clusters: the threshold and interval of a t-test with the smaller of 19 (Imbens-Kolesar's df for equal
    # clusters) and the plug-in df
    df = small_sample_df([new[i] for i in ids], [clusters[i] for i in ids])
    assert df < 19
    t19 = sps.t.ppf(0.95, df)
    diff = float(np.mean(list(new.values()))) - 55.0
    assert d.rule == "unpaired" and d.clustering.applied == pytest.approx(deff, rel=1e-12)
    assert d.verdict.threshold == pytest.approx(55.0 - t19 * scale, rel=1e-12)
    assert d.p_value == pytest.approx(sps.norm.cdf(Z05 * diff / (t19 * scale)), rel=1e-10)
    assert d.ci == pytest.approx((diff - t19 * scale, diff + t19 * scale), rel=1e-10)
    assert d.theta == pytest.approx((Z05 + 0.8416212335729143) * scale * t19 / Z05, rel=1e-9)
    m, text = d.metrics(), d.render()
    assert m["design_effect"] == pytest.approx(deff) and m["clusters"] == 20.0
    assert "20 clusters by subject" in text and f"design effect {deff:.3f}" in text


def check_both_tests(d, alone, diff, labels, df=None) -> None:
    """A clustered paired decision ``d``: each claim needs the clustered t-test (CR2, t with ``df``, by default
    :func:`small_sample_df`) and the independent test (``alone``: the same data without clusters); p-values
    are the larger, the interval the hull of both intervals."""
    v_cl = cr2_by_matrices(diff, labels)
    v_iid = np.var(diff, ddof=1) / len(diff)
    se, df = math.sqrt(max(v_cl, v_iid)), (small_sample_df(diff, labels) if df is None else df)
    half = sps.t.ppf(0.95, df) * se
    cl_ci = (diff.mean() - half, diff.mean() + half)
    assert d.p_value == pytest.approx(max(sps.t.cdf(diff.mean() / se, df), alone.p_value), rel=1e-9)
    assert d.p_within == pytest.approx(max(sps.t.sf((diff.mean() + 3.0) / se, df), alone.p_within), rel=1e-9)
    assert d.ci == pytest.approx((min(cl_ci[0], alone.ci[0]), max(cl_ci[1], alone.ci[1])), rel=1e-9)
    assert d.claims.regression == (cl_ci[1] < 0 and alone.claims.regression)
    assert d.claims.within == (cl_ci[0] > -3.0 and alone.claims.within)
    # the interval inverts both claims
    assert d.claims.regression == (d.ci[1] < 0) and d.claims.within == (d.ci[0] > -3.0)


def test_clustered_paired_t_by_hand(tmp_path):
    ref, new, clusters, ids = data(continuous=True)
    d = run(tmp_path, new, clusters, ref)
    alone = run(tmp_path, new, clusters, ref, key=None)
    diff = np.array([new[i] - ref[i] for i in ids])
    v_cl, v_iid = by_hand(diff, [clusters[i] for i in ids])
    assert v_cl > v_iid and d.paired.method.startswith("clustered paired t and ")
    check_both_tests(d, alone, diff, [clusters[i] for i in ids])


def test_unequal_clusters_use_imbens_kolesar_df(tmp_path):
    # 12 unequal clusters with a random cluster effect: the clustered test's t has the smaller of Imbens and Kolesar's
    # df at the ANOVA-estimated ICC and the plug-in df, not C - 1 = 11 (which ran at 0.057 > alpha there)
    rng = np.random.default_rng(4)
    sizes = (18, 16, 14, 13, 11, 10, 9, 8, 7, 6, 4, 4)
    g = np.repeat(np.arange(len(sizes)), sizes)
    ids = [f"s/{i:04d}" for i in range(g.size)]
    ref = dict(zip(ids, rng.normal(60, 10, g.size).tolist()))
    diff = -1.0 + 6 * rng.normal(size=len(sizes))[g] + 8 * rng.normal(size=g.size)
    new = {k: ref[k] + float(x) for k, x in zip(ids, diff)}
    clusters = {k: f"c{c}" for k, c in zip(ids, g)}
    labels = [clusters[i] for i in ids]
    diff = np.array([new[i] - ref[i] for i in ids])
    df = small_sample_df(diff, labels)
    assert 2 < df < 10
    d = run(tmp_path, new, clusters, ref)
    alone = run(tmp_path, new, clusters, ref, key=None)
    assert d.paired.design_effect.df == pytest.approx(df, rel=1e-9)
    check_both_tests(d, alone, diff, labels, df)
    _, scores, unpaired_clusters, _ = data()
    unequal = {k: f"c{min(j // 3, 30 + j % 5)}" for j, k in enumerate(sorted(scores))}  # 30 of 3, 5 larger
    u = run(tmp_path, scores, unequal, value=55.0)
    values = [scores[k] for k in sorted(scores)]
    uf = small_sample_df(values, [unequal[k] for k in sorted(scores)])
    assert u.clustering.df == pytest.approx(uf, rel=1e-9)
    assert any(f"t({uf:.2f})" in note for note in u.notes)


def test_clustered_binary_scores_need_both_tests(tmp_path):
    ref, new, clusters, ids = data(n=240, size=8, seed=9)
    d = run(tmp_path, new, clusters, ref)
    alone = run(tmp_path, new, clusters, ref, key=None)
    diff = np.array([new[i] - ref[i] for i in ids])
    v_cl, v_iid = by_hand(diff, [clusters[i] for i in ids])
    assert v_cl > 1.5 * v_iid
    assert d.paired.method == "clustered paired t and McNemar exact" and d.paired.discordant is not None
    check_both_tests(d, alone, diff, [clusters[i] for i in ids])
    assert d.paired.design_effect.applied == pytest.approx(max(1.0, v_cl / v_iid))
    assert "design effect" in d.paired.render()


def test_clusters_never_make_a_verdict_more_decisive(tmp_path):
    # the audit's case: 57 right answers against 56 and one loss, tolerance 5, clusters of 2. The clustered
    # Wald test said GO (the one loss sits in a cluster whose other difference is 0); McNemar's exact and
    # Tango's tests on the same data cannot show a drop < 5 points with one discordant pair of 57
    ids = [f"s/{i:03d}" for i in range(57)]
    ref = {k: 100.0 for k in ids}
    new = {k: (0.0 if j == 0 else 100.0) for j, k in enumerate(ids)}
    clusters = {k: f"c{j // 2}" for j, k in enumerate(ids)}
    tol = Tolerance(5.0, "test")
    alone = run(tmp_path, new, clusters, ref, key=None, tolerance=tol)
    d = run(tmp_path, new, clusters, ref, tolerance=tol)
    assert alone.outcome == "INCONCLUSIVE"
    assert d.outcome == "INCONCLUSIVE" and not d.claims.within and d.ci[0] <= -5.0


def test_binary_without_disagreement_keeps_the_exact_tests(tmp_path):
    ref, _, clusters, _ = data()
    d = run(tmp_path, ref, clusters, ref)
    assert d.paired.method == "McNemar exact" and d.p_value == 1.0
    assert any("do not vary" in n for n in d.notes)


def test_paired_advice_is_multiplied_by_the_design_effect(tmp_path):
    rng = np.random.default_rng(2)
    diffs = np.repeat(rng.normal(0, 6, 10), 6) + rng.normal(0, 6, 60) - 1.0
    ids = [f"s/{i:03d}" for i in range(60)]
    ref = dict(zip(ids, (50 + rng.normal(0, 5, 60)).tolist()))
    new = {k: ref[k] + float(x) for k, x in zip(ids, diffs)}
    clusters = {k: f"c{j // 6}" for j, k in enumerate(ids)}
    assert advising.for_decision(run(tmp_path, new, clusters, ref), None) is None  # auto: no claim, so no n helps
    d = run(tmp_path, new, clusters, ref, paired_test="t")
    assert d.outcome == "INCONCLUSIVE"
    diff = np.array([new[i] - ref[i] for i in ids])
    v_cl, v_iid = by_hand(diff, [clusters[i] for i in ids])
    deff, sd, drop = max(1.0, v_cl / v_iid), diff.std(ddof=1), -diff.mean()
    k = sps.norm.ppf(0.95) + sps.norm.ppf(0.8)
    gaps = [g for g in (drop - 0.0, 3.0 - drop) if g > 0]
    need = min((k * sd / g) ** 2 for g in gaps)
    assert deff > 3 and advising.for_decision(d, None).n_total == max(61, math.ceil(deff * need))


def test_missing_cluster_and_bad_setting_are_config_errors(tmp_path):
    _, new, clusters, _ = data()
    with pytest.raises(ConfigError, match="cluster key"):
        run(tmp_path, new, clusters, key="domain")
    with pytest.raises(ConfigError, match="stats.cluster"):
        validate(st(cluster="on"))


def test_planned_design_effect_scales_n_and_theta():
    assert min_samples_for_theta(3.0, 50 * math.sqrt(1.8), 0.05, 0.2) == pytest.approx(
        1.8 * min_samples_for_theta(3.0, 50.0, 0.05, 0.2), rel=1e-3)
    assert paired_theta(4096, 0.95, 0.05, 0.2, design_effect=2.0) == paired_theta(2048, 0.95, 0.05, 0.2)
    assert paired_min_samples(3.0, 0.95, 0.05, 0.2, design_effect=2.0) == 2 * paired_min_samples(3.0, 0.95, 0.05, 0.2)


def test_plan_command_takes_a_design_effect(capsys):
    from runner.commands.plan import main

    assert main(["--sigma", "50", "--num-samples-total", "4096", "--target-theta", "3", "--design-effect", "1.8",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    k = Z05 + 0.8416212335729143
    assert out["design_effect"] == 1.8
    assert out["rows"][-1]["theta"] == pytest.approx(k * math.sqrt(2 * 2500 * 1.8 / 4096), rel=1e-9)
    # smallest n with k sqrt(2 * 2500 * 1.8 / n) <= 3
    assert out["min_num_samples"] == math.ceil(2 * 2500 * 1.8 * k ** 2 / 9)
    with pytest.raises(SystemExit):
        main(["--design-effect", "0.5"])


def test_few_clusters_make_no_claim():
    # GPQA diamond's three domains, ICC 0.3, a true drop of exactly the tolerance (5 points): the unpaired test with
    # sigma sqrt(deff) and a normal quantile showed GO in about 15% of runs; with fewer clusters than
    # stats.min_clusters no claim is made
    from benchmarks.calibration_grid.clustered import _unpaired_rate

    rate = _unpaired_rate(300, 4, shape="3 (GPQA)", icc=0.3, drop=5.0, tolerance=5.0, claim="GO")
    assert rate.value <= 0.05


def test_min_clusters_is_checked(tmp_path):
    with pytest.raises(ConfigError, match="min_clusters"):
        validate(st(min_clusters=1))
    _, new, clusters, ids = data()
    d = run(tmp_path, new, clusters, value=40.0, min_clusters=30)  # 20 clusters: no claim
    assert not d.claims.regression and not d.claims.within and d.outcome == "INCONCLUSIVE" and d.passed
    assert any("stats.min_clusters=30" in n for n in d.notes)
    assert run(tmp_path, new, clusters, value=40.0).outcome == "GO"  # 20 clusters >= the default 10
