"""The reduced calibration grid: every rule family's claims hold their nominal rates (benchmarks.calibration_grid)."""

from __future__ import annotations

import pytest

from benchmarks import calibration_grid as calibration
from benchmarks.calibration_grid.cells import Cell, Rate
from benchmarks.calibration_grid.run import measure, table, worst
from runner.stats.data.claims import DeclaredRule

TRIALS = 1000


@pytest.mark.parametrize("family", calibration.FAMILIES)
def test_reduced_grid_holds(family: str) -> None:
    cells = calibration.cells(calibration.Grid(full=False), (family,))
    assert cells, f"family {family} declares no cells"
    measured = measure(cells, TRIALS, seed=11)
    failed = [m for m in measured if not m.cell.holds(m.rate, smoke=True)]  # a smoke test: alpha + 2 SE
    assert not failed, table(failed, markdown=False)


def test_a_cell_judges_each_kind() -> None:
    err = Cell("r", "c", "s", "error", 0.05, lambda t, s: Rate.enumerated(0.05))
    assert err.holds(Rate.enumerated(0.05)) and not err.holds(Rate.enumerated(0.0501))
    assert err.holds(Rate(0.06, 0.006), smoke=True) and not err.holds(Rate(0.07, 0.006), smoke=True)
    # the benchmark's rule: the upper 95% bound within alpha + 0.005 (0.046 + 1.645 x 0.005 = 0.0542 passes)
    assert err.holds(Rate(0.046, 0.005)) and not err.holds(Rate(0.05, 0.006)) and not err.holds(Rate(0.06, 0.006))
    assert not err.holds(Rate(0.056, 0.0001))  # a true excess fails at any number of trials
    cov = Cell("r", "c2", "s", "coverage", 0.9, lambda t, s: Rate.enumerated(0.9))
    assert cov.holds(Rate.enumerated(0.9)) and not cov.holds(Rate.enumerated(0.89))
    adv = Cell("r", "c", "s", "advice", 0.75, lambda t, s: Rate.enumerated(0.8), high=0.85)
    assert adv.holds(Rate.enumerated(0.8)) and not adv.holds(Rate.enumerated(0.9))
    rows = worst([m for m in measure([err, cov], 10)])
    assert [m.cell.kind for m in rows] == ["error", "coverage"]
    power = [Cell("r", "power: GO at drop 0", s, "power", 0.0, lambda t, s, v=v: Rate.enumerated(v))
             for s, v in (("a", 0.2), ("b", 0.9))]
    assert all(c.holds(Rate.enumerated(0.0)) for c in power)  # reported beside the error cells, never judged
    assert [m.cell.setting for m in worst(measure(power, 10))] == ["a", "b"]  # every power cell is its own row


@pytest.mark.parametrize("name", calibration.FAMILIES)
def test_every_declared_claim_of_a_rule_has_a_cell_and_every_cell_a_declared_rule(name: str) -> None:
    family = calibration.family(name)
    built = family.cells(calibration.Grid(full=True))
    covered = {(c.rule, c.claim) for c in built if c.kind != "power"}
    declared = {(r.name, claim) for r in family.rules for claim in r.claims}
    assert declared - covered == set(), f"{name}: claims without a calibration cell"
    assert covered - declared == set(), f"{name}: cells of rules or claims the family does not declare"
    powered = {c.rule for c in built if c.kind == "power"}
    assert powered and powered <= {r.name for r in family.rules}, f"{name}: power cells of undeclared rules, or none"


def test_every_rule_declared_where_it_lives_belongs_to_a_calibrated_family() -> None:
    """Each rule module of runner/stats/rules declares its rules and claims (data); every declaration is one a
    family of the grid calibrates, and every family's rules are declared in a rule module."""
    import importlib
    import pkgutil

    from runner.stats import rules

    declared = set()
    for module in pkgutil.iter_modules(rules.__path__):
        found = importlib.import_module(f"runner.stats.rules.{module.name}")
        for value in vars(found).values():
            if isinstance(value, tuple) and value and all(isinstance(r, DeclaredRule) for r in value):
                declared |= set(value)
    calibrated = {r for name in calibration.FAMILIES for r in calibration.family(name).rules}
    assert declared == calibrated


def test_the_benchmark_measures_only_the_cells_of_the_rules_asked(capsys: pytest.CaptureFixture[str]) -> None:
    """``--rule`` keeps the cells whose rule starts with the text: one rule's cell among several sharing a setting."""
    from benchmarks.calibration import main

    main(["--family", "corpus", "--reduced", "--rule", "corpus: unpaired", "--claim", "GO", "--trials", "3", "--all"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| corpus")]
    assert len(rows) == 1 and rows[0].startswith("| corpus: unpaired bootstrap-t | GO at drop = tolerance |")
