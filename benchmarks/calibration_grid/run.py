"""Measure calibration cells and summarise them per rule x claim (the worst cell of each)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.calibration_grid.cells import Cell, Rate
from concurrent.futures import ProcessPoolExecutor


@dataclass(frozen=True)
class Measured:
    cell: Cell
    rate: Rate

    @property
    def holds(self) -> bool:
        return self.cell.holds(self.rate)


def _measure(args: tuple[Cell, int, int]) -> Measured:
    cell, trials, seed = args
    return Measured(cell, cell.run(trials, seed))


def measure(cells: Sequence[Cell], trials: int, seed: int = 0, jobs: int = 1) -> list[Measured]:
    """Each cell measured with ``trials`` Monte Carlo draws (ignored by exact cells), seeded per cell."""
    work = [(c, trials, seed + 7919 * i) for i, c in enumerate(cells)]
    if jobs <= 1:
        return [_measure(w) for w in work]

    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(_measure, work, chunksize=1))


def worst(measured: Sequence[Measured]) -> list[Measured]:
    """One row per (rule, claim): the cell furthest from its nominal, in first-seen order; every power cell (each is
    its own setting)."""
    out: dict[tuple[str, ...], Measured] = {}
    for m in measured:
        key = (m.cell.rule, m.cell.claim) + ((m.cell.setting,) if m.cell.kind == "power" else ())
        if key not in out or m.cell.excess(m.rate) > out[key].cell.excess(out[key].rate):
            out[key] = m
    return list(out.values())


def _rate(m: Measured) -> str:
    return f"{m.rate.value:.4f}"


def _se(m: Measured) -> str:
    return "exact" if m.rate.exact else f"{m.rate.se:.4f}"


def _trials(m: Measured) -> str:
    return "-" if m.rate.exact else str(m.rate.trials)


def _nominal(m: Measured) -> str:
    c = m.cell
    if c.kind == "error":
        return f"<= {c.nominal:g}"
    if c.kind == "coverage":
        return f">= {c.nominal:g}"
    if c.kind == "power":
        return "(power)"
    return f"{c.nominal:g}-{c.high:g}"


def table(rows: Sequence[Measured], markdown: bool = True) -> str:
    """The rule x claim table (worst cell, rate, SE, Monte Carlo draws, nominal, holds)."""
    head = ("rule", "claim", "worst cell", "rate", "SE", "trials", "nominal", "holds")
    body = [(m.cell.rule, m.cell.claim, m.cell.setting, _rate(m), _se(m), _trials(m), _nominal(m),
             "-" if m.cell.kind == "power" else "yes" if m.holds else "NO")
            for m in rows]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])
    widths = [max(len(str(r[i])) for r in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r, widths)) for r in [head, *body])
