"""Facts recorded with every run: the project's git commit and the flattened config."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""The ``runner`` package's directory; the checkout is the git work tree holding it."""


@functools.lru_cache(maxsize=1)
def project_commit() -> str:
    """Commit of the checkout the runner's package is in, with ``-dirty`` when it has uncommitted changes; git
    finds the checkout from the package's directory (a worktree's ``.git`` file too), and a package installed
    outside a checkout of this project says ``unknown``."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(PACKAGE_DIR), *args], capture_output=True, text=True,
                              timeout=5).stdout.strip()

    try:
        top = git("rev-parse", "--show-toplevel")
        if not top or Path(top).resolve() / "runner" != PACKAGE_DIR:
            return "unknown"
        head, dirty = git("rev-parse", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
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
