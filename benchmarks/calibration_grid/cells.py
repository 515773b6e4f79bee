"""One calibration cell: a claim of a rule, a setting where it is weakest, and how its rate is measured.

A cell's ``measure(trials, seed)`` returns a :class:`Rate`: an exact figure (full enumeration over the
outcomes the rule can see, ``se = 0``) or a Monte Carlo one with its standard error. Three kinds:

* ``error``: the rate a false claim is made (a false NO-GO at drop = margin, a false GO at drop =
  tolerance); it holds when the exact rate is at or below the nominal alpha, or when the Monte Carlo upper 95%
  bound (rate + 1.645 SE) is at most alpha + 0.005;
* ``coverage``: how often a printed interval or bound covers the truth; it holds when the exact rate, or the
  Monte Carlo lower 95% bound, is at least the level (less 0.005 for Monte Carlo);
* ``advice``: how often following "about N more samples" reaches the claim; it holds when the rate, or its
  90% Monte Carlo interval, meets ``[low, high]`` (widened by 0.005 for Monte Carlo);
* ``power``: how often a true claim is made (GO at a drop of 0, NO-GO at twice the tolerance), printed beside the
  error cells with its standard error; it has no nominal and always holds.

This acceptance rule can fail: a true rate of 0.052 needs about 6000 trials to pass, 0.056 never does; the
benchmark runs the worst cells with enough trials (``benchmarks/calibration.py --confirm``). The reduced grid
the test suite runs is a smoke test: it keeps the looser rate <= alpha + 2 SE at its 1000 trials (``smoke``).
A rule built to spend exactly alpha sits at the nominal rate, where 10000 draws fail it about one time in four
(the bound's mean is 0.0536); such a cell, when cheap, declares ``draws`` > 1 and runs that many draws per trial.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from runner.stats.data.claims import DeclaredRule

KINDS = ("error", "coverage", "advice", "power")
SLACK = 1e-9  # float noise in an exact rate
MC_ALLOWANCE = 0.005  # how far a Monte Carlo bound may pass the nominal rate
Z95 = 1.6448536269514722  # one-sided 95% normal quantile


@dataclass(frozen=True)
class Rate:
    """A measured rate; ``se`` 0 and ``exact`` True for an enumeration."""

    value: float
    se: float = 0.0
    exact: bool = False
    trials: int = 0

    @classmethod
    def monte_carlo(cls, hits: int, trials: int) -> "Rate":
        p = hits / trials
        return cls(p, math.sqrt(max(p * (1 - p), 1.0 / trials) / trials), False, trials)

    @classmethod
    def enumerated(cls, value: float) -> "Rate":
        return cls(float(value), 0.0, True, 0)


@dataclass(frozen=True)
class Cell:
    """A claim of a rule in one setting of the grid.

    ``rule``: the family and rule ("binary: McNemar / Tango"); ``claim``: what is measured
    ("NO-GO at drop = margin", "GO at drop = tolerance", "90% CI coverage", "advice reaches GO");
    ``setting``: the grid point in words ("n=57 d=2% m=5"); ``nominal``: alpha (error), the level
    (coverage) or the lower end of the advice band; ``high``: the upper end of the advice band."""

    rule: str
    claim: str
    setting: str
    kind: str
    nominal: float
    measure: Callable[[int, int], Rate]
    high: float = 1.0
    draws: int = 1  # Monte Carlo draws per trial asked: more for a cheap cell whose rate sits at alpha by design

    def run(self, trials: int, seed: int) -> Rate:
        """The rate at ``trials`` x ``draws`` Monte Carlo draws (exact cells ignore both)."""
        return self.measure(trials * self.draws, seed)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")

    def holds(self, rate: Rate, smoke: bool = False) -> bool:
        """Whether the rate meets its claim (module docstring); ``smoke``: the reduced grid's looser check."""
        if self.kind == "power":
            return True
        if smoke:
            slack = SLACK + (0.0 if rate.exact else 2.0 * rate.se)
            reach = 0.0
        else:
            slack = SLACK + (0.0 if rate.exact else MC_ALLOWANCE)
            reach = 0.0 if rate.exact else Z95 * rate.se
        if self.kind == "error":
            return rate.value + reach <= self.nominal + slack
        if self.kind == "coverage":
            return rate.value - reach >= self.nominal - slack
        return rate.value + reach >= self.nominal - slack and rate.value - reach <= self.high + slack

    def excess(self, rate: Rate) -> float:
        """How far the cell is from failing (larger: worse); orders the cells of one rule x claim (power: the
        lowest)."""
        if self.kind == "power":
            return -rate.value
        if self.kind == "error":
            return rate.value - self.nominal
        if self.kind == "coverage":
            return self.nominal - rate.value
        return max(self.nominal - rate.value, rate.value - self.high)


@dataclass(frozen=True)
class Grid:
    """Which settings to build: ``full`` (benchmarks/calibration.py) or the reduced one the tests run."""

    full: bool = True

    def pick(self, full: list, reduced: list) -> list:  # noqa: D102 - the values for this grid
        return full if self.full else reduced


@dataclass(frozen=True)
class Family:
    """A family of rules (declared in runner/stats/rules) and the cells that calibrate them on a grid."""

    name: str
    rules: tuple[DeclaredRule, ...]
    cells: Callable[[Grid], list[Cell]]
