"""Calibration of every rule the product can choose: each claim's error rate, each interval's coverage and
the advice's hit rate, on a grid of the settings where the rules' assumptions are weakest.

Each rule family has a module here that declares its rules (what decides, the claims, the bounds) and the cells
that cover them (:class:`Family`); :func:`family` gathers them,
:mod:`benchmarks.calibration_grid.run` measures them. ``benchmarks/calibration.py`` prints the whole grid;
``tests/stats/test_calibration.py`` runs the reduced one and checks that every declared claim has a cell.
"""

from __future__ import annotations

import importlib

from benchmarks.calibration_grid.cells import Cell, Family, Grid, Rate

FAMILIES: tuple[str, ...] = ("binary", "continuous", "unbounded", "clustered", "unpaired", "corpus", "sequential",
                             "release", "noise")
"""The rule families: the modules ``benchmarks.calibration_grid.<name>``, each holding ``FAMILY``."""


def family(name: str) -> Family:
    """The declared rules and cells of one family."""
    if name not in FAMILIES:
        raise ValueError(f"unknown rule family {name!r}; known: {', '.join(FAMILIES)}")
    return importlib.import_module(f"benchmarks.calibration_grid.{name}").FAMILY


def cells(grid: Grid, families: tuple[str, ...] | None = None) -> list[Cell]:
    """Every cell of the chosen families (all by default), in family order."""
    out: list[Cell] = []
    for name in families or FAMILIES:
        out += family(name).cells(grid)
    return out


__all__ = ["Cell", "Family", "Grid", "Rate", "FAMILIES", "cells", "family"]
