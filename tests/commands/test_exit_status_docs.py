"""The exit statuses are stated once, in the same words, everywhere a user reads them."""

from __future__ import annotations

import re
from pathlib import Path

from runner.commands.compare import EPILOG
from runner.contract import errors

ROOT = Path(__file__).resolve().parents[2]
STATUSES = {errors.EXIT_OK: "GO", errors.EXIT_REGRESSION: "NO-GO", errors.EXIT_INCONCLUSIVE: "INCONCLUSIVE",
            errors.EXIT_ERROR: "error", errors.EXIT_INTERRUPTED: "stopped by SIGINT",
            errors.EXIT_TERMINATED: "stopped by SIGTERM"}


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", ""))


def _statement(text: str) -> str:
    found = re.search(r"Exit status: (.*?SIGTERM)", _flat(text))
    assert found, "no 'Exit status: ...' statement"
    return found.group(1)


def test_one_statement_in_help_readme_and_docs() -> None:
    statements = {path: _statement((ROOT / path).read_text()) for path in
                  ("conf/config.yaml", "README.md", "docs/index.md", "docs/ci-reports.md")}
    assert len(set(statements.values())) == 1, statements
    only = next(iter(statements.values()))
    for status, word in STATUSES.items():
        assert f"{status} {word}" in only


def test_compare_states_the_same_statuses() -> None:
    flat = _flat(EPILOG)
    for status, word in STATUSES.items():
        assert f"{status} {word}" in flat
