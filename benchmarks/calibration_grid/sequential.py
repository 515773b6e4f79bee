"""Calibration of sequential looks and extensions, and of the "to decide" advice.

Each trial runs the product's own look machinery (:class:`runner.stats.rules.extension.Extensions`,
:class:`runner.stats.rules.sequential.Monitor`) on the per-look decision fields they read (discordant
counts and margin for 0/100 scores, the difference for the unpaired test), drawn from the truth:

* extensions with planned sizes (every extension as large as look 1), extended while undecided: NO-GO
  at drop 0, GO at drop = tolerance; paired 0/100 scores (discordance d, the drop split between lost and
  won samples) and the unpaired test (sigma 50, reference of look 1's n; 20 draws per trial asked, see
  ``UNPAIRED_DRAWS``). A margin is refused with
  looks (:func:`runner.stats.settings.validate_extensions`): Tango's statistic at the margin, which the
  looks would use, measured 0.064 (SE 0.006) at n1=57, d=5%, margin 1 (``extension_binary``);
* planned sequential looks (``stats.sequential``), paired 0/100: NO-GO at drop 0;
* the advice: how often the test the advice names, at the n it names, reaches the claim when the
  observed difference is the truth (a fixed-look paired t job: band 0.75-0.85 around its 80%; an
  extendable run: the stated probability +- 0.05, its planned looks being discrete).

Monte Carlo throughout (the bounds follow each trial's observed information, so nothing enumerates).
"""

from __future__ import annotations

import math
from functools import partial
from types import SimpleNamespace

from runner.stats.numerics.advice import more_samples
from runner.stats.rules import extension, sequential
from runner.stats.rules.paired_continuous import ADVICE_CLAIMS
from benchmarks.calibration_grid.cells import Cell, Family, Grid, Rate
from runner.stats.rules.extension import Extensions
from runner.stats.rules.paired_continuous import paired_continuous
from runner.stats.numerics.group_sequential import SequentialConfig
from runner.stats.rules.sequential import Monitor

ALPHA = 0.05
SIGMA = 50.0
# The unpaired extension's looks are exactly canonical here (known sigma, normal means), so its bounds spend exactly
# alpha (tests/stats/test_extension.py checks them against the multivariate normal): its cells sit at alpha, where
# the acceptance rule needs ~40000 draws; a draw costs 0.1-0.2 ms, so each trial asked runs 20.
UNPAIRED_DRAWS = 20


def _binary(b: int, c: int, n: int, margin: float) -> SimpleNamespace:
    """What a look reads of a paired 0/100 decision: b lost, c won, the margin in points."""
    paired = SimpleNamespace(discordant=(b, c), mean_diff=100.0 * (c - b) / n, tolerance=margin, n=n)
    return SimpleNamespace(rule="paired", paired=paired, verdict=SimpleNamespace(params=SimpleNamespace(
        higher_is_better=True)))


def _unpaired(diff: float) -> SimpleNamespace:
    params = SimpleNamespace(higher_is_better=True, sigma=SIGMA)
    return SimpleNamespace(rule="unpaired", paired=None,
                           verdict=SimpleNamespace(params=params, difference=diff, tolerance=0.0))


def _cells_probs(d: float, drop: float) -> tuple[float, float]:
    """(q_b, q_c): discordance ``d`` with ``q_b - q_c = drop`` (proportions)."""
    return (d + drop) / 2, (d - drop) / 2


def extension_binary(planned: int, n1: int, d: float, drop: float, margin: float, tolerance: float,
                     claim: str, trials: int, seed: int) -> Rate:
    """Extend by n1 while undecided, up to ``planned`` times; the rate of ``claim`` (regression | go)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    qb, qc = _cells_probs(d, drop / 100.0)
    hits = 0
    for _ in range(trials):
        ext = Extensions(planned, [n1 * (k + 1) for k in range(planned + 1)], ALPHA, "obf", tolerance, True)
        b = c = 0
        for k in range(planned + 1):
            db, dc, _ = rng.multinomial(n1, [qb, qc, 1 - qb - qc])
            b, c = b + int(db), c + int(dc)
            ext.observe(_binary(b, c, n1 * (k + 1), margin), n1 * (k + 1))
            if ext.stopped:
                break
        hits += ext.stopped == claim
    return Rate.monte_carlo(hits, trials)


def extension_unpaired(planned: int, n1: int, drop: float, tolerance: float, claim: str, trials: int,
                       seed: int) -> Rate:
    import numpy as np

    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        ext = Extensions(planned, [n1 * (k + 1) for k in range(planned + 1)], ALPHA, "obf", tolerance, True)
        ref = rng.normal(0, SIGMA / math.sqrt(n1))
        total = 0.0
        for k in range(planned + 1):
            total += rng.normal(-drop * n1, SIGMA * math.sqrt(n1))
            ext.observe(_unpaired(total / (n1 * (k + 1)) - ref), n1 * (k + 1))
            if ext.stopped:
                break
        hits += ext.stopped == claim
    return Rate.monte_carlo(hits, trials)


def sequential_binary(looks: int, n: int, d: float, drop: float, margin: float, trials: int, seed: int) -> Rate:
    """Planned sequential looks (``stats.sequential``), 0/100 scores: the rate of a regression stop."""
    import numpy as np

    rng = np.random.default_rng(seed)
    qb, qc = _cells_probs(d, drop / 100.0)
    hits = 0
    for _ in range(trials):
        mon = Monitor(SequentialConfig(enabled=True, looks=looks), n, ALPHA, 0.2)
        b = c = done = 0
        for size in mon.sizes:
            db, dc, _ = rng.multinomial(size - done, [qb, qc, 1 - qb - qc])
            b, c, done = b + int(db), c + int(dc), size
            mon.observe(_binary(b, c, size, margin), size)
            if mon.stopped:
                break
        hits += mon.stopped == "regression"
    return Rate.monte_carlo(hits, trials)


def fixed_advice_spread(n: int, sd: float, drop: float, margin: float, tolerance: float):  # noqa: ANN201
    return more_samples(drop, sd, n, margin, tolerance, ALPHA)


def advice_fixed_paired(n: int, sd: float, drop: float, margin: float, tolerance: float, trials: int,
                        seed: int) -> Rate:
    """A paired t job at n whose observed drop and sd are the truth: its advice's N, then a rerun at N."""
    import numpy as np

    advice = fixed_advice_spread(n, sd, drop, margin, tolerance)
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        ref = np.full(advice.n_total, 50.0)
        new = ref + rng.normal(-drop, sd, advice.n_total)
        if advice.target == "GO":
            hits += paired_continuous(ref, new, ALPHA, 0.2, tolerance=tolerance, gate="noninferiority").passed
        else:
            hits += not paired_continuous(ref, new, ALPHA, 0.2, tolerance=margin).passed
    return Rate.monte_carlo(hits, trials)


def extension_advice(planned: int, n1: int, drop: float, tolerance: float):  # noqa: ANN201
    """The advice of an unpaired extendable run whose first look observed ``drop`` (undecided)."""

    ext = Extensions(planned, [n1], ALPHA, "obf", tolerance, True)
    ext.observe(_unpaired(-drop), n1)
    return more_samples(drop, SIGMA, n1, 0.0, tolerance, ALPHA, n_ref=n1, looks=ext.result(True, None).next_looks())


def advice_extension_unpaired(planned: int, n1: int, drop: float, tolerance: float, trials: int,
                              seed: int) -> Rate:
    """Following an extendable run's advice when its observed drop is the truth: does the look it names reach
    the claim it names (the looks before it evaluated as planned)?"""
    import numpy as np

    advice = extension_advice(planned, n1, drop, tolerance)
    looks = advice.n_total // n1
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        ext = Extensions(planned, [n1 * (k + 1) for k in range(looks)], ALPHA, "obf", tolerance, True)
        ref = rng.normal(0, SIGMA / math.sqrt(n1))
        total = 0.0
        for k in range(looks):
            ext.stopped = None
            total += rng.normal(-drop * n1, SIGMA * math.sqrt(n1))
            ext.observe(_unpaired(total / (n1 * (k + 1)) - ref), n1 * (k + 1))
        hits += ext.stopped == ("go" if advice.target == "GO" else "regression")
    return Rate.monte_carlo(hits, trials)


def _advice_band(planned: int, n1: int, drop: float, tolerance: float) -> tuple[float, float]:
    p = extension_advice(planned, n1, drop, tolerance).probability
    return p - 0.05, p + 0.05


def cells(grid: Grid) -> list[Cell]:
    out: list[Cell] = []
    ext = "extensions, planned sizes: McNemar (0/100)"
    for k, n1, d in grid.pick([(1, 57, 0.05), (3, 100, 0.05), (3, 500, 0.2)], [(1, 57, 0.05)]):
        out.append(Cell(ext, "NO-GO at drop 0", f"K={k} n1={n1} d={d:.0%}", "error", ALPHA,
                        partial(extension_binary, k, n1, d, 0.0, 0.0, 5.0, "regression")))
    for k, n1, d, t in grid.pick([(1, 100, 0.2, 5.0), (3, 500, 0.2, 5.0), (3, 500, 0.1, 2.75)], []):
        out.append(Cell(ext, "GO at drop = tolerance", f"K={k} n1={n1} d={d:.0%} t={t:g}", "error", ALPHA,
                        partial(extension_binary, k, n1, d, t, 0.0, t, "go")))
    unp = "extensions, planned sizes: unpaired z (sigma 50)"
    many = grid.pick(UNPAIRED_DRAWS, 1)
    for k, n1 in grid.pick([(3, 400), (1, 57)], [(3, 400)]):
        out.append(Cell(unp, "NO-GO at drop 0", f"K={k} n1={n1}", "error", ALPHA,
                        partial(extension_unpaired, k, n1, 0.0, 2.75, "regression"), draws=many))
        out.append(Cell(unp, "GO at drop = tolerance", f"K={k} n1={n1} t=2.75", "error", ALPHA,
                        partial(extension_unpaired, k, n1, 2.75, 2.75, "go"), draws=many))
    if grid.full:  # power beside the error cells: GO at a drop of 0, NO-GO at twice the tolerance
        out.append(Cell(ext, "power: GO at drop 0", "K=3 n1=500 d=20% t=5", "power", 0.0,
                        partial(extension_binary, 3, 500, 0.2, 0.0, 0.0, 5.0, "go")))
        out.append(Cell(ext, "power: NO-GO at drop 2t", "K=3 n1=500 d=20% drop 10", "power", 0.0,
                        partial(extension_binary, 3, 500, 0.2, 10.0, 0.0, 5.0, "regression")))
    seq = "sequential looks (stats.sequential): McNemar (0/100)"
    for looks, n, d in grid.pick([(4, 500, 0.2), (2, 200, 0.05)], []):
        out.append(Cell(seq, "NO-GO at drop 0", f"K={looks} n={n} d={d:.0%}", "error", ALPHA,
                        partial(sequential_binary, looks, n, d, 0.0, 0.0)))
    adv = "advice: fixed look (paired t rerun at N)"
    for n, sd, drop, m, t in grid.pick([(100, 10.0, 1.0, 0.0, 3.0), (200, 20.0, 3.5, 1.0, 5.0)],
                                       [(100, 10.0, 1.0, 0.0, 3.0)]):
        out.append(Cell(adv, "reaches its claim (80% stated)", f"n={n} sd={sd:g} drop={drop:g} m={m:g} t={t:g}",
                        "advice", 0.75, partial(advice_fixed_paired, n, sd, drop, m, t), high=0.85))
    ea = "advice: extendable unpaired run (planned looks)"
    for k, n1, drop in grid.pick([(3, 4000, 0.5), (1, 4000, 1.0), (3, 400, 0.0)], [(3, 4000, 0.5)]):
        low, high = _advice_band(k, n1, drop, 2.75)
        out.append(Cell(ea, "reaches its claim (stated +- 0.05)", f"K={k} n1={n1} drop={drop:g} t=2.75", "advice",
                        low, partial(advice_extension_unpaired, k, n1, drop, 2.75), high=high))
    return out


FAMILY = Family("sequential", extension.CLAIMS + sequential.CLAIMS + ADVICE_CLAIMS, cells)
