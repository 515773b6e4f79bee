"""Calibration of the release verdict (:func:`runner.stats.rules.release.decide_release`) under several tiers.

The release combines its tasks' claims: each task's regression p-value and its GO claim. Taking each
job's tests as valid (a p-value uniform at the boundary of its null, a GO claim shown with probability
alpha at drop = tolerance), the release's own rates are exact integrals over independent tasks:

* false NO-GO, nothing regressed: every p-value uniform, no GO claim shown (GO claims shown only
  help: they turn INCONCLUSIVE into GO, never into NO-GO). The verdict is constant on the cells of the
  grid cut at ``alpha / j`` (j = 1..m, the only values Holm or no correction compares a p-value
  with), so the integral is a finite sum;
* false GO, one critical task at its tolerance: its GO claim shown with probability alpha, the other
  tasks at drop 0 showing GO, every p-value uniform; the same grid, times alpha.
"""

from __future__ import annotations

import itertools
import math
from functools import partial

from runner.stats.rules import release
from benchmarks.calibration_grid.cells import Cell, Family, Grid, Rate
from runner.stats.rules.release import Claim, TaskEvidence, decide_release

ALPHA = 0.05


def _cells(m: int) -> list[tuple[float, float]]:
    cuts = sorted({0.0, 1.0, *(ALPHA / j for j in range(1, m + 1))})
    return list(zip(cuts, cuts[1:]))


def _rate(tiers: tuple[str, ...], k: int, verdict: str, within: tuple[bool, ...], correction: str) -> float:
    """P(release ``verdict``) over independent uniform p-values, GO claims fixed at ``within``."""

    total = 0.0
    for box in itertools.product(_cells(len(tiers)), repeat=len(tiers)):
        evidence = [TaskEvidence(f"t{i}", tier, (Claim((lo + hi) / 2, ALPHA, (lo + hi) / 2 < ALPHA),), w)
                    for i, (tier, (lo, hi), w) in enumerate(zip(tiers, box, within))]
        if decide_release(evidence, k, correction).verdict == verdict:
            total += math.prod(hi - lo for lo, hi in box)
    return total


def false_no_go(tiers: tuple[str, ...], k: int, correction: str, trials: int, seed: int) -> Rate:
    return Rate.enumerated(_rate(tiers, k, "NO-GO", (False,) * len(tiers), correction))


def false_go(tiers: tuple[str, ...], k: int, correction: str, trials: int, seed: int) -> Rate:
    """The first task (critical) sits at its tolerance: its GO claim shown with probability alpha."""
    within = (True,) * len(tiers)
    return Rate.enumerated(ALPHA * _rate(tiers, k, "GO", within, correction))


GRAPH_RULE = "release: the tiers' graph (Bretz et al. 2009), critical share 0.8"


def graph_rates(tiers: tuple[str, ...], k: int, verdict: str, trials: int, seed: int) -> Rate:
    """Monte Carlo over independent uniform p-values (the graph's thresholds move as it rejects, so the Holm cells'
    finite grid does not apply): false NO-GO with nothing regressed, or false GO with the first (critical) task at
    its tolerance (its GO claim shown with probability alpha, the others showing GO)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    hits = 0
    for row in rng.uniform(size=(trials, len(tiers))):
        go_first = verdict != "GO" or rng.uniform() < ALPHA
        within = (go_first,) + (True,) * (len(tiers) - 1) if verdict == "GO" else (False,) * len(tiers)
        evidence = [TaskEvidence(f"t{i}", tier, (Claim(float(p), ALPHA, float(p) < ALPHA),), w)
                    for i, (tier, p, w) in enumerate(zip(tiers, row, within))]
        hits += decide_release(evidence, k, "graph", 0.8).verdict == verdict
    return Rate.monte_carlo(hits, trials)


def caught(tiers: tuple[str, ...], k: int, correction: str, trials: int, seed: int) -> Rate:
    """Power: how often the release is NO-GO when its first (critical) task regressed by its theta (the task's own
    test catches it 0.80 of the time alone: ``p = Phi(-Z)``, ``Z ~ N(z(0.95) + z(0.8), 1)``) and the others did not
    (uniform p-values)."""
    import numpy as np

    from runner.stats.numerics.normal import phi, z

    rng = np.random.default_rng(seed)
    shift = z(1 - ALPHA) + z(0.8)
    hits = 0
    for row in rng.uniform(size=(trials, len(tiers))):
        row[0] = 1.0 - phi(float(rng.normal(shift, 1.0)))
        evidence = [TaskEvidence(f"t{i}", tier, (Claim(float(p), ALPHA, float(p) < ALPHA),), False)
                    for i, (tier, p) in enumerate(zip(tiers, row))]
        verdict = (decide_release(evidence, k, "graph", 0.8) if correction == "graph"
                   else decide_release(evidence, k, correction)).verdict
        hits += verdict == "NO-GO"
    return Rate.monte_carlo(hits, trials)


def cells(grid: Grid) -> list[Cell]:
    c, s, a = "critical", "supporting", "advisory"
    policies = grid.pick([((c, s), 0), ((c, c, s, s), 0), ((c, s, s, s), 1), ((c, c, c), 0), ((c, s, a), 0),
                          ((c, s, s), 2)],
                         [((c, s), 0), ((c, c, s, s), 0)])
    out = []
    for tiers, k in policies:
        setting = f"{'+'.join(t[0].upper() for t in tiers)} K={k}"
        out.append(Cell("release: Holm across the tiers", "NO-GO of the release, nothing regressed", setting,
                        "error", ALPHA, partial(false_no_go, tiers, k, "holm")))
        out.append(Cell("release: Holm across the tiers", "GO of the release, a critical task at tolerance",
                        setting, "error", ALPHA, partial(false_go, tiers, k, "holm")))
        out.append(Cell(GRAPH_RULE, "NO-GO of the release, nothing regressed", setting, "error", ALPHA,
                        partial(graph_rates, tiers, k, "NO-GO")))
        out.append(Cell(GRAPH_RULE, "GO of the release, a critical task at tolerance", setting, "error", ALPHA,
                        partial(graph_rates, tiers, k, "GO")))
    if grid.full:  # power beside the error cells: a critical task regressed by its theta, caught
        for tiers in ((c,), (c, s, s, s), (c,) + (s,) * 8):
            setting = f"{'+'.join(t[0].upper() for t in tiers)} K=0, the critical task at its theta"
            out.append(Cell("release: Holm across the tiers", "power: NO-GO, a critical task regressed", setting,
                            "power", 0.0, partial(caught, tiers, 0, "holm")))
            if len(tiers) > 1:
                out.append(Cell(GRAPH_RULE, "power: NO-GO, a critical task regressed", setting, "power", 0.0,
                                partial(caught, tiers, 0, "graph")))
    return out


FAMILY = Family("release", release.CLAIMS, cells)
