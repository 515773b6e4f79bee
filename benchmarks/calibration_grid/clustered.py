"""Calibration of the clustered rules (``stats.cluster=auto`` with a task ``cluster_key``).

Each trial draws a whole run with clustered questions and decides it with the job's own
:func:`runner.stats.dispatch.decide_against`:

* **paired 0/100**: each cluster draws its probabilities of (a loss, a win, a tie) from a Dirichlet with
  mean ``(pi_b, pi_c, 1 - pi)`` and concentration ``(1 - icc) / icc`` (the multinomial form of the
  beta-binomial: each category's intra-cluster correlation is ``icc``; ``icc = 0``: independent samples);
  the true drop is ``100 (pi_b - pi_c)`` for a discordance ``pi = pi_b + pi_c``;
* **paired continuous**: ``d_i = -drop + u_c + e_i`` with ``u_c`` normal of variance ``icc sd^2`` and
  ``e_i`` of ``(1 - icc) sd^2`` (a random-intercept model);
* **unpaired**: the run's 0/100 scores and the reference's (``n_ref = n``) are beta-binomial per
  cluster with mean ``p`` and intra-cluster correlation ``icc``; the reference value is its mean and
  sigma is configured at 50.

Clusters: 57 unequal ones (MMLU's subject count; sizes from 2 to 17, 500 samples) and GPQA diamond's
three domains (86, 93 and 19 questions), where no claim is made (``stats.min_clusters``); the reduced
grid uses 12 unequal clusters of 120 samples. Error cells are at the least favourable truth: NO-GO at
drop = margin (0), GO at drop = tolerance.

0/100 runs of 500 samples cost the exact tests about a second each (the GO interval's inversion), so a
0/100 trial first runs the clustered t-test alone (:func:`runner.stats.numerics.clustered_paired.clustered_paired`,
the product's) and decides the whole run only when that test shows the claim: a clustered claim needs
both tests (tests/stats/test_clustering.py checks it), so a run it does not show cannot make the claim.
"""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace
from typing import Any

from runner.contract.evaluator import ScoredSample
from runner.stats.rules import clustered
from benchmarks.calibration_grid.cells import Cell, Family, Grid, Rate
from runner.stats.numerics.clustered_paired import clustered_paired
from runner.stats.dispatch import decide_against
from runner.stats.data.entry import Entry
from runner.stats.settings import StatsConfig
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.tolerance import Tolerance

ALPHA = 0.05
GPQA = (86, 93, 19)


def mmlu_like() -> tuple[int, ...]:
    """57 unequal clusters of 500 samples: sizes falling evenly from 17 to 2 (deterministic)."""
    raw = [2 + 13.5 * (56 - i) / 56 for i in range(57)]
    sizes = [round(x) for x in raw]
    sizes[0] += 500 - sum(sizes)
    return tuple(sizes)


def twelve() -> tuple[int, ...]:
    """12 unequal clusters of 120 samples (the reduced grid's, just above stats.min_clusters)."""
    return (18, 16, 14, 13, 11, 10, 9, 8, 7, 6, 4, 4)


def padded() -> dict[str, tuple[int, ...]]:
    """Layouts where single samples pad the cluster count (the audit's): 3 of 150 and 9 single samples; 10 and 20
    clusters falling geometrically to a single sample."""
    geometric = lambda top, count: tuple(int(round(top ** (1 - i / (count - 1)))) for i in range(count))  # noqa: E731
    return {"3x150 + 9 single": (150, 150, 150) + (1,) * 9, "10: 200..1": geometric(200, 10),
            "20: 100..1": geometric(100, 20)}


SHAPES = {"57 unequal": mmlu_like(), "3 (GPQA)": GPQA, "12 unequal": twelve(), **padded()}


def _labels(sizes: tuple[int, ...]) -> list[str]:
    return [f"c{j}" for j, m in enumerate(sizes) for _ in range(m)]


def _decide(ref: Any, new: Any, labels: list[str], tolerance: float, paired: bool, stats: Any = None) -> Any:
    """The job's decision on one simulated run: ``ref`` per-sample scores (paired) or None (unpaired, with the
    reference value ``ref`` as a number)."""

    n = len(labels)
    ids = [f"s{i:05d}" for i in range(n)]
    params = HypothesisParams(ALPHA, 0.2, 50.0, n)
    scored = [ScoredSample(i, "", "", "", float(v), {"cluster": c}) for i, v, c in zip(ids, new, labels)]
    value = float(sum(ref) / n) if paired else float(ref)
    reference = Entry(value)
    rows = {i: SimpleNamespace(score=float(v)) for i, v in zip(ids, ref)} if paired else None
    return decide_against(reference, scored, float(sum(new) / n), params, stats or StatsConfig(), None, "accuracy", rows,
                          None, (), Tolerance(tolerance, "calibration"), cluster_key="cluster")


def _claim(decision: Any, claim: str) -> bool:
    assert decision.claims is not None
    return decision.claims.regression if claim == "NO-GO" else decision.claims.within


def _binary_run(rng: Any, sizes: tuple[int, ...], pi: float, drop: float, icc: float) -> tuple[list, list]:
    import numpy as np

    pb, pc = (pi + drop / 100) / 2, (pi - drop / 100) / 2
    mean = np.array([pb, pc, 1 - pi])
    ref, new = [], []
    for m in sizes:
        probs = mean if icc == 0 else rng.dirichlet(mean * (1 - icc) / icc)
        kind = rng.choice(3, size=m, p=probs / probs.sum())
        base = np.where(rng.random(m) < 0.6, 100.0, 0.0)  # the reference's score where the two agree
        r = np.where(kind == 0, 100.0, np.where(kind == 1, 0.0, base))
        w = np.where(kind == 0, 0.0, np.where(kind == 1, 100.0, base))
        ref += r.tolist()
        new += w.tolist()
    return ref, new


def _continuous_run(rng: Any, sizes: tuple[int, ...], sd: float, drop: float, icc: float) -> tuple[list, list]:
    import numpy as np

    n = sum(sizes)
    u = np.repeat(rng.normal(0, sd * icc ** 0.5, len(sizes)), sizes)
    d = -drop + u + rng.normal(0, sd * (1 - icc) ** 0.5, n)
    ref = rng.normal(60, 10, n)
    return ref.tolist(), (ref + d).tolist()


def _unpaired_scores(rng: Any, sizes: tuple[int, ...], p: float, icc: float) -> list:
    import numpy as np

    out = []
    for m in sizes:
        q = p if icc == 0 else rng.beta(p * (1 - icc) / icc, (1 - p) * (1 - icc) / icc)
        out += np.where(rng.random(m) < q, 100.0, 0.0).tolist()
    return out


def _paired_rate(trials: int, seed: int, *, kind: str, shape: str, icc: float, drop: float, tolerance: float,
                 claim: str, spread: float) -> Rate:
    import numpy as np

    rng = np.random.default_rng(seed)
    sizes = SHAPES[shape]
    labels = _labels(sizes)

    draw = _binary_run if kind == "0/100" else _continuous_run
    # the continuous runs' scores are unbounded: auto makes no claim on them, so their cells measure the t-test
    stats = StatsConfig(paired_test="t") if kind == "continuous" else None
    gate, at = ("regression", 0.0) if claim == "NO-GO" else ("noninferiority", tolerance)
    hits = 0
    for _ in range(trials):
        ref, new = draw(rng, sizes, spread, drop, icc)
        if kind == "0/100":
            alone = clustered_paired(ref, new, labels, "cluster", ALPHA, 0.2, binary=True, tolerance=at, gate=gate)
            if alone.passed == (gate == "regression"):
                continue  # the clustered half does not show the claim: neither does the rule
        hits += _claim(_decide(ref, new, labels, tolerance, paired=True, stats=stats), claim)
    return Rate.monte_carlo(hits, trials)


def _unpaired_rate(trials: int, seed: int, *, shape: str, icc: float, drop: float, tolerance: float,
                   claim: str) -> Rate:
    import numpy as np

    rng = np.random.default_rng(seed)
    sizes = SHAPES[shape]
    labels = _labels(sizes)
    hits = 0
    for _ in range(trials):
        ref = float(np.mean(_unpaired_scores(rng, sizes, 0.6, icc)))
        new = _unpaired_scores(rng, sizes, 0.6 - drop / 100, icc)
        hits += _claim(_decide(ref, new, labels, tolerance, paired=False), claim)
    return Rate.monte_carlo(hits, trials)


def cells(grid: Grid) -> list[Cell]:
    out: list[Cell] = []
    iccs = grid.pick([0.0, 0.1, 0.3], [0.3])
    shapes = grid.pick(["57 unequal", "3 (GPQA)"], ["12 unequal"])
    for shape in grid.pick(list(padded()), []):  # padded layouts: 0/100 at 2-20% discordance, ICC 0.3
        for spread, tol in ((0.2, 5.0), (0.05, 2.75), (0.02, 1.0)):
            rule = "clustered paired 0/100: CR2 t(small-sample df) and the independent test"
            common = dict(kind="0/100", shape=shape, icc=0.3, tolerance=tol, spread=spread)
            where = f"{shape} clusters, ICC 0.3, discordance {spread:.0%}"
            out.append(Cell(rule, "NO-GO at drop = margin (0)", where, "error", ALPHA,
                            partial(_paired_rate, drop=0.0, claim="NO-GO", **common)))
            out.append(Cell(rule, "GO at drop = tolerance", f"{where}, t={tol:g}", "error", ALPHA,
                            partial(_paired_rate, drop=tol, claim="GO", **common)))
    for shape in shapes:
        for icc in iccs:
            where = f"{shape} clusters, ICC {icc:g}"
            for kind, spread, tol in grid.pick([("0/100", 0.2, 5.0), ("0/100", 0.05, 2.75), ("0/100", 0.02, 1.0),
                                                ("continuous", 10.0, 2.0)],
                                               [("continuous", 10.0, 2.0)]):
                what = f"discordance {spread:.0%}" if kind == "0/100" else f"sd {spread:g}"
                rule = f"clustered paired {kind}: CR2 t(small-sample df) and the independent test"
                common = dict(kind=kind, shape=shape, icc=icc, tolerance=tol, spread=spread)
                out.append(Cell(rule, "NO-GO at drop = margin (0)", f"{where}, {what}", "error", ALPHA,
                                partial(_paired_rate, drop=0.0, claim="NO-GO", **common)))
                out.append(Cell(rule, "GO at drop = tolerance", f"{where}, {what}, t={tol:g}", "error", ALPHA,
                                partial(_paired_rate, drop=tol, claim="GO", **common)))
            if not grid.full:
                continue
            rule = "clustered unpaired z-test: sigma sqrt(deff) t(small-sample df)/z"
            out.append(Cell(rule, "NO-GO at drop = margin (0)", f"{where}, p=0.6", "error", ALPHA,
                            partial(_unpaired_rate, shape=shape, icc=icc, drop=0.0, tolerance=5.0, claim="NO-GO")))
            out.append(Cell(rule, "GO at drop = tolerance", f"{where}, p=0.6, t=5", "error", ALPHA,
                            partial(_unpaired_rate, shape=shape, icc=icc, drop=5.0, tolerance=5.0, claim="GO")))
    if grid.full:  # power beside the error cells: GO at a drop of 0, NO-GO at twice the tolerance
        rule = "clustered paired continuous: CR2 t(small-sample df) and the independent test"
        common = dict(kind="continuous", shape="57 unequal", icc=0.1, tolerance=2.0, spread=10.0)
        out.append(Cell(rule, "power: GO at drop 0", "57 unequal clusters, ICC 0.1, sd 10, t=2", "power", 0.0,
                        partial(_paired_rate, drop=0.0, claim="GO", **common)))
        out.append(Cell(rule, "power: NO-GO at drop 2t", "57 unequal clusters, ICC 0.1, sd 10, drop 4", "power", 0.0,
                        partial(_paired_rate, drop=4.0, claim="NO-GO", **common)))
    return out


FAMILY = Family("clustered", clustered.CLAIMS, cells)
