"""Calibration cells of the paired 0/100 (binary) rules, all by exact enumeration over the tables (b, c).

* McNemar exact (margin 0): NO-GO at a drop of exactly 0;
* Tango + exact unconditional: NO-GO at a drop of exactly the margin, GO at a drop of exactly the tolerance;
* the two printed one-sided bounds (GO bound, NO-GO bound): how often each covers the true difference, at
  true differences of -5, 0 and +5 points and at its own threshold, after the pinning to the deciding test
  (:func:`runner.stats.numerics.paired_binomial.claims.binary_claims`).

The nuisance is the total discordance ``d``: the grid's values at or above the drop, and ``d`` equal to the
drop itself (every discordant pair a loss), the least favourable point of the null. Each region is the
product's own test, reduced to a cut-off per number of discordant pairs
(:func:`runner.stats.numerics.paired_binomial.enumeration.go_cutoffs`, :func:`~runner.stats.numerics.paired_binomial.enumeration.mcnemar_cutoffs`).
A bound misses the true difference exactly where the test it inverts (same ordering, same nuisance grid as the
printed bound) rejects at the true difference: the bounds are Buehler bounds, monotone in ``delta``.
"""

from __future__ import annotations

from functools import partial

from runner.stats.numerics.paired_binomial import enumeration as en
from runner.stats.rules import paired_binary
from benchmarks.calibration_grid.cells import Cell, Family, Grid, Rate

ALPHA = 0.05
RULE_MCNEMAR = "binary: McNemar exact (margin 0)"
RULE_TANGO = "binary: Tango + exact unconditional"
RULE_GO_BOUND = "binary: GO bound (one-sided 95%)"
RULE_NO_GO_BOUND = "binary: NO-GO bound (one-sided 95%)"


def _discordances(grid_d: list[float], drop: float) -> list[float]:
    """The grid's discordances that the drop allows, and the drop itself (every discordant pair one way)."""
    out = sorted({d for d in grid_d if d >= abs(drop)} | ({abs(drop)} if drop else set()))
    return out


def _no_go_cutoffs(n: int, margin: float):  # noqa: ANN202 - numpy int array, on the wins
    return en.mcnemar_cutoffs(n, ALPHA) if margin == 0 else en.go_cutoffs(n, margin / 100.0, ALPHA)


def mcnemar_no_go(n: int, d: float, trials: int, seed: int) -> Rate:
    """False NO-GO of McNemar's exact test at a true drop of 0."""
    return Rate.enumerated(en.region_rate(en.mcnemar_cutoffs(n, ALPHA), n, d, 0.5))


def margin_no_go(n: int, margin: float, d: float, trials: int, seed: int) -> Rate:
    """False NO-GO of the margin test at a true drop of exactly the margin (wins share (d - m) / 2d)."""
    m = margin / 100.0
    return Rate.enumerated(en.region_rate(en.go_cutoffs(n, m, ALPHA), n, d, (d - m) / (2.0 * d)))


def tolerance_go(n: int, tolerance: float, d: float, trials: int, seed: int) -> Rate:
    """False GO at a true drop of exactly the tolerance (losses share (d + t) / 2d)."""
    t = tolerance / 100.0
    return Rate.enumerated(en.region_rate(en.go_cutoffs(n, -t, ALPHA), n, d, (d + t) / (2.0 * d)))


SCAN = tuple(round(0.01 * i, 2) for i in range(1, 100))  # discordances 1% .. 99%: where the worst case sits


def worst_over_discordance(rate, n: int, point: float, trials: int, seed: int) -> Rate:  # noqa: ANN001
    """The largest exact rate of ``rate(n, point, d, ...)`` over the discordances the truth allows (1% to 99%
    and the drop itself): the nuisance scanned where the rate peaks (the audit found the 0/100 worst case at
    d = 0.8-0.99, beyond the grid's 20%)."""
    return Rate.enumerated(max(rate(n, point, d, trials, seed).value
                               for d in _discordances(list(SCAN), point / 100.0)))


def _mcnemar_at(n: int, point: float, d: float, trials: int, seed: int) -> Rate:
    return mcnemar_no_go(n, d, trials, seed)


def go_bound_coverage(n: int, tolerance: float, truth: float, d: float, trials: int, seed: int) -> Rate:
    """Coverage of the printed GO bound L (new - reference > L) at a true difference ``truth`` (points).

    It misses exactly when the exact test on the grid of -t rejects at the truth (GO at -t included, the
    bound inverting it at every delta); the pinning to the GO test is kept (a no-op but at float ties)."""
    import numpy as np

    t, x = tolerance / 100.0, truth / 100.0
    k_go, k_x = en.go_cutoffs(n, -t, ALPHA), en.go_cutoffs(n, -t, ALPHA, x)
    k = np.maximum(k_go, k_x) if x < -t else np.minimum(k_go, k_x)
    return Rate.enumerated(1.0 - en.region_rate(k, n, d, (d - x) / (2.0 * d)))


def no_go_bound_coverage(n: int, margin: float, truth: float, d: float, trials: int, seed: int) -> Rate:
    """Coverage of the printed NO-GO bound U (new - reference < U) at a true difference ``truth`` (points).

    Pinned to the deciding NO-GO test at -m (McNemar's at m = 0; for m > 0 the bound inverts that test and
    the pinning is a no-op): above -m it misses when NO-GO was shown or the bound's own test at the truth
    rejects, at or below -m only when both hold."""
    import numpy as np

    m, x = margin / 100.0, truth / 100.0
    k_no, k_x = _no_go_cutoffs(n, margin), en.go_cutoffs(n, m, ALPHA, -x)
    k = np.maximum(k_no, k_x) if x > -m else np.minimum(k_no, k_x)
    return Rate.enumerated(1.0 - en.region_rate(k, n, d, (d + x) / (2.0 * d)))


def go_power(n: int, tolerance: float, d: float, trials: int, seed: int) -> Rate:
    """How often Tango's test with its exact check shows GO (a drop below the tolerance) when nothing dropped."""
    return Rate.enumerated(en.region_rate(en.go_cutoffs(n, -tolerance / 100.0, ALPHA), n, d, 0.5))


def mcnemar_power(n: int, drop: float, d: float, trials: int, seed: int) -> Rate:
    """How often McNemar's exact test shows NO-GO at a true drop of ``drop`` points (wins share (d - drop) / 2d)."""
    x = drop / 100.0
    return Rate.enumerated(en.region_rate(en.mcnemar_cutoffs(n, ALPHA), n, d, (d - x) / (2.0 * d)))


def power_cells() -> list[Cell]:
    """Power beside the error cells: GO at a drop of 0, NO-GO at twice the tolerance (exact)."""
    out = [Cell(RULE_TANGO, "power: GO at drop 0", f"n={n} t=2.75 d={d:.0%}", "power", 0.0,
                partial(go_power, n, 2.75, d)) for n in (100, 500) for d in (0.05, 0.2)]
    out += [Cell(RULE_MCNEMAR, "power: NO-GO at drop 2t", f"n={n} drop 5.5 d=20%", "power", 0.0,
                 partial(mcnemar_power, n, 5.5, 0.2)) for n in (100, 500)]
    return out


def cells(grid: Grid) -> list[Cell]:
    ns = grid.pick([57, 100, 500, 4096], [57, 100])
    ds = grid.pick([0.02, 0.05, 0.20], [0.02, 0.05, 0.20])
    points = grid.pick([1.0, 2.75, 5.0], [2.75, 5.0])
    truths = [-5.0, 0.0, 5.0]
    out: list[Cell] = []
    for n in ns:
        for d in ds:
            out.append(Cell(RULE_MCNEMAR, "NO-GO at drop 0", f"n={n} d={d:.0%}", "error", ALPHA,
                            partial(mcnemar_no_go, n, d)))
        for p in points:
            for d in _discordances(ds, p / 100.0):
                setting = f"n={n} d={d:.4g} m={p:g}"
                out.append(Cell(RULE_TANGO, "NO-GO at drop = margin", setting, "error", ALPHA,
                                partial(margin_no_go, n, p, d)))
                out.append(Cell(RULE_TANGO, "GO at drop = tolerance", setting.replace("m=", "t="), "error", ALPHA,
                                partial(tolerance_go, n, p, d)))
        if grid.full:
            out.append(Cell(RULE_MCNEMAR, "NO-GO at drop 0", f"n={n}, worst d in 1-99%", "error", ALPHA,
                            partial(worst_over_discordance, _mcnemar_at, n, 0.0)))
            for p in points:
                out.append(Cell(RULE_TANGO, "NO-GO at drop = margin", f"n={n} m={p:g}, worst d in {p:g}-99%",
                                "error", ALPHA, partial(worst_over_discordance, margin_no_go, n, p)))
                out.append(Cell(RULE_TANGO, "GO at drop = tolerance", f"n={n} t={p:g}, worst d in {p:g}-99%",
                                "error", ALPHA, partial(worst_over_discordance, tolerance_go, n, p)))
        for p in points:
            for x in sorted({*truths, -p}):
                for d in _discordances(ds, x / 100.0):
                    out.append(Cell(RULE_GO_BOUND, "coverage", f"n={n} t={p:g} true diff {x:+g} d={d:.4g}",
                                    "coverage", 1 - ALPHA, partial(go_bound_coverage, n, p, x, d)))
        for p in [0.0, *points]:
            for x in sorted({*truths, -p}):
                for d in _discordances(ds, x / 100.0):
                    out.append(Cell(RULE_NO_GO_BOUND, "coverage" + (" (McNemar-pinned)" if p == 0 else ""),
                                    f"n={n} m={p:g} true diff {x:+g} d={d:.4g}", "coverage", 1 - ALPHA,
                                    partial(no_go_bound_coverage, n, p, x, d)))
    return out + (power_cells() if grid.full else [])


FAMILY = Family("binary", paired_binary.CLAIMS, cells)
