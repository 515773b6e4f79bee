"""Config checks the tasks share, raising the project's typed, person-readable errors."""

from __future__ import annotations

from typing import Any, Sequence

from runner.contract.errors import ConfigError


def check_choice(value: Any, choices: Sequence[str], what: str, where: str, note: str = "") -> None:
    """``unknown <what>`` (a ConfigError listing ``choices``, then ``note``) unless ``value`` is one of them."""
    if value not in choices:
        raise ConfigError(f"unknown {what}", where=where, given=value, allowed=", ".join(choices) + note)
