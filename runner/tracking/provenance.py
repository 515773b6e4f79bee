"""Facts recorded with every run: the project's git commit and the flattened config."""

from __future__ import annotations

import functools
import subprocess
from typing import Any

from runner.files.paths import PROJECT_ROOT


@functools.lru_cache(maxsize=1)
def project_commit() -> str:
    """Commit of the runner's own checkout, with ``-dirty`` when it has uncommitted changes."""
    if not (PROJECT_ROOT / ".git").exists():
        return "unknown"
    try:
        head = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(PROJECT_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (head or "unknown") + ("-dirty" if dirty else "")


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists are kept as their string form."""
    out: dict[str, Any] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            out |= flatten(value, f"{prefix}{key}.")
        return out
    out[prefix[:-1]] = tree
    return out
