"""Calibration of the unpaired rule (TensorRT-LLM's z-test) with a reference measured on another n.

The reference value is the mean of ``n_ref`` 0/100 scores and the run's of ``n``, each binomial with
success probability ``p`` (sigma configured at 50, the 0/100 worst case ``p = 0.5``). Every pair of
counts is enumerated (those with probability below 1e-15 are dropped: their total is below 1e-12), so
the rates are exact. The decision's parameters come from :func:`runner.stats.dispatch.decide_against`
on a reference entry that records ``num_samples = n_ref`` (the product reading the entry); each
outcome is then decided by :func:`runner.stats.numerics.ztest.decide` and :func:`runner.stats.numerics.ztest.unpaired_claims`,
the two functions that rule calls.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from runner.contract.evaluator import ScoredSample
from runner.stats.numerics.ztest import unpaired_claims
from runner.stats.rules import unpaired
from benchmarks.calibration_grid.cells import Cell, Family, Grid, Rate
from runner.stats.dispatch import decide_against
from runner.stats.data.entry import Entry
from runner.stats.settings import StatsConfig
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics.ztest import decide
from runner.stats.data.tolerance import Tolerance
from runner.stats.numerics import two_binomials

ALPHA = 0.05
SIGMA = 50.0
SIZES = [(57, 57), (500, 500), (57, 500), (500, 57), (4096, 57)]  # (the run's n, the reference's n)


def product_params(n: int, n_ref: int) -> Any:
    """The unpaired test's parameters as the job builds them for a run of ``n`` against an entry recorded on
    ``n_ref`` samples."""

    params = HypothesisParams(ALPHA, 0.2, SIGMA, n)
    reference = Entry(50.0, samples_measured=n_ref)
    scored = [ScoredSample(f"s{i}", "", "", "", 100.0 * (i % 2), {}) for i in range(n)]
    decision = decide_against(reference, scored, 50.0, params, StatsConfig(), None, "accuracy", None, None, (),
                              Tolerance(1.0, "calibration"))
    return decision.verdict.params


def _support(n: int, p: float) -> tuple[Any, Any]:
    import numpy as np
    from scipy import stats

    k = np.arange(n + 1)
    pmf = stats.binom.pmf(k, n, p)
    keep = pmf > 1e-15
    return k[keep], pmf[keep]


def _rate(trials: int, seed: int, *, n: int, n_ref: int, p: float, drop: float, tolerance: float, claim: str) -> Rate:
    params = product_params(n, n_ref)
    k_ref, w_ref = _support(n_ref, p)
    k_new, w_new = _support(n, p - drop / 100.0)
    total = 0.0
    for kr, wr in zip(k_ref, w_ref):
        reference = 100.0 * kr / n_ref
        for kn, wn in zip(k_new, w_new):
            verdict = decide(100.0 * kn / n, reference, params)
            made = (not verdict.passed if claim == "NO-GO"
                    else unpaired_claims(verdict, 0.0, tolerance).within)
            if made:
                total += wr * wn
    return Rate.enumerated(total)


EXACT = "unpaired exact unconditional (stats.unpaired_test=exact)"
WORST_Z = [(14, 14), (30, 30), (50, 50), (70, 70), (120, 120), (200, 200), (538, 538)]  # the scan's peaks


def _exact_rate(trials: int, seed: int, *, n: int, n_ref: int, delta: float, side: str) -> Rate:
    """The exact rule's largest rate of a false claim over the nuisance proportion on the boundary: its rejection
    region (two_binomials.critical, the p-value the product computes being below alpha exactly there) summed over
    a grid at least as fine as the test's own, refined at its peaks."""
    rate, _ = two_binomials.size(n, n_ref, delta / 100.0, side, ALPHA)
    return Rate.enumerated(rate)


def exact_power(trials: int, seed: int, *, n: int, drop: float, tolerance: float, claim: str) -> Rate:
    """The exact rule's rate of a true claim at equal n, p = 0.5 (its rejection region at the truth, exact): GO at
    ``drop`` (0) against the tolerance, NO-GO at ``drop`` against margin 0."""
    side, delta = ("below", tolerance / 100.0) if claim == "GO" else ("above", 0.0)
    z = two_binomials.critical(n, n, delta, side, ALPHA)
    counts = two_binomials.extreme_counts(n, n, delta, side, z)
    return Rate.enumerated(float(two_binomials.rate(counts, n, n, side, [0.5 - drop / 100.0], [0.5])[0]))


def power_cells() -> list[Cell]:
    """Power beside the error cells (exact, equal n, p = 0.5): GO at a drop of 0, NO-GO at twice the tolerance."""
    out: list[Cell] = []
    rule = "unpaired z-test: sigma sqrt(1/n + 1/n_ref)"
    for n, t in ((500, 5.0), (4096, 2.75)):
        out.append(Cell(rule, "power: GO at drop 0", f"n={n} n_ref={n} p=0.5 t={t:g}", "power", 0.0,
                        partial(_rate, n=n, n_ref=n, p=0.5, drop=0.0, tolerance=t, claim="GO")))
        out.append(Cell(rule, "power: NO-GO at drop 2t", f"n={n} n_ref={n} p=0.5 drop {2 * t:g}", "power", 0.0,
                        partial(_rate, n=n, n_ref=n, p=0.5, drop=2 * t, tolerance=t, claim="NO-GO")))
        out.append(Cell(EXACT, "power: GO at drop 0", f"n={n} n_ref={n} p=0.5 t={t:g}", "power", 0.0,
                        partial(exact_power, n=n, drop=0.0, tolerance=t, claim="GO")))
        out.append(Cell(EXACT, "power: NO-GO at drop 2t", f"n={n} n_ref={n} p=0.5 drop {2 * t:g}", "power", 0.0,
                        partial(exact_power, n=n, drop=2 * t, tolerance=t, claim="NO-GO")))
    return out


def cells(grid: Grid) -> list[Cell]:
    out: list[Cell] = []
    for n, n_ref in grid.pick([*SIZES, *WORST_Z], [(57, 57)]):
        where = f"n={n} n_ref={n_ref}, worst p"
        out.append(Cell(EXACT, "NO-GO at drop = margin (0)", where, "error", ALPHA,
                        partial(_exact_rate, n=n, n_ref=n_ref, delta=0.0, side="above")))
        for tol in grid.pick([1.0, 2.75, 5.0], [5.0]):
            out.append(Cell(EXACT, "GO at drop = tolerance", f"{where} t={tol:g}", "error", ALPHA,
                            partial(_exact_rate, n=n, n_ref=n_ref, delta=tol, side="below")))
    rule = "unpaired z-test: sigma sqrt(1/n + 1/n_ref)"
    for n, n_ref in grid.pick([*SIZES, *WORST_Z], [(500, 57), (57, 500)]):
        where = f"n={n} n_ref={n_ref} p=0.5"
        if min(n, n_ref) < 1000:
            where += " (upstream's normal approximation on a lattice of 0/100 counts, kept as the default)"
        out.append(Cell(rule, "NO-GO at drop = margin (0)", where, "error", ALPHA,
                        partial(_rate, n=n, n_ref=n_ref, p=0.5, drop=0.0, tolerance=0.0, claim="NO-GO")))
        for tol in grid.pick([1.0, 2.75, 5.0], [5.0]):
            out.append(Cell(rule, "GO at drop = tolerance", f"{where} t={tol:g}", "error", ALPHA,
                            partial(_rate, n=n, n_ref=n_ref, p=0.5, drop=tol, tolerance=tol, claim="GO")))
    return out + (power_cells() if grid.full else [])


FAMILY = Family("unpaired", unpaired.CLAIMS, cells)
