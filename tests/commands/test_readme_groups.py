"""The README's config-group table lists every option each group ships (issue 40: it omitted ones it used)."""

from __future__ import annotations

import itertools
import re

import pytest

from tests.conftest import ROOT

GROUPS = ("model", "quant", "task", "backend", "tracking", "cache", "experiment", "gate")


def _expand(token: str) -> list[str]:
    """``a_{x,y}`` -> ``a_x``, ``a_y`` (the README's brace shorthand)."""
    parts = re.split(r"\{([^}]*)\}", token)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def _listed(group: str) -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    row = re.search(rf"^\| `{group}` \|(.*)\|$", text, re.M)
    assert row, f"the README's table has no row for {group}"
    return {name for token in re.findall(r"`([^`]+)`", row.group(1)) for name in _expand(token)}


@pytest.mark.parametrize("group", GROUPS)
def test_every_option_of_a_group_is_in_the_readme(group: str) -> None:
    shipped = {p.stem for p in (ROOT / "conf" / group).glob("*.yaml")}
    assert shipped - _listed(group) == set()
