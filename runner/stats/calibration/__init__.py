"""Calibration of every rule the product can choose: each claim's error rate, each interval's coverage and
the advice's hit rate, on a grid of the settings where the rules' assumptions are weakest.

Each rule family declares its cells in a module of this package (``cells(grid) -> list[Cell]``);
:func:`cells` gathers them, :mod:`runner.stats.calibration.run` measures them. ``benchmarks/calibration.py``
prints the whole grid; ``tests/stats/test_calibration.py`` runs the reduced one.
"""

from __future__ import annotations

import importlib

from runner.stats.calibration.cells import Cell, Grid, Rate

FAMILIES: tuple[str, ...] = ("binary", "continuous", "clustered", "unpaired", "corpus", "sequential", "release")  # module names under runner.stats.calibration, one per rule family


def cells(grid: Grid, families: tuple[str, ...] | None = None) -> list[Cell]:
    """Every cell of the chosen families (all by default), in family order."""
    out: list[Cell] = []
    for name in families or FAMILIES:
        if name not in FAMILIES:
            raise ValueError(f"unknown rule family {name!r}; known: {', '.join(FAMILIES)}")
        out += importlib.import_module(f"runner.stats.calibration.{name}").cells(grid)
    return out


__all__ = ["Cell", "Grid", "Rate", "FAMILIES", "cells"]
