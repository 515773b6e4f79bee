"""Where things live on disk. Environment variables only locate things; they change no result."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from runner.contract.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
"""Names that become file or directory names (task, model and quant option names)."""


def check_name(value: object, where: str) -> str:
    """``value`` if it is safe as one path component (no separators, no leading dot, <= 100 chars)."""

    text = str(value)
    if not NAME_PATTERN.fullmatch(text):
        raise ConfigError("this name becomes a file or directory name and must be a plain word",
                          where=where, given=text[:120] + ("..." if len(text) > 120 else ""),
                          allowed="1-100 characters: letters, digits, '.', '_', '-', not starting with '.', '_' or '-'",
                          fix=f"choose another {where}")
    return text


HUB_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")


def check_hub_id(value: object, where: str) -> str:
    """``value`` if it is shaped like a Hugging Face repo id (``org/name`` or ``name``): it keys references,
    names MLflow runs and reaches reports, so it is held to that shape like ``model.name``."""
    text = str(value)
    if not HUB_ID_PATTERN.fullmatch(text) or ".." in text or "--" in text:
        raise ConfigError("this must be a Hugging Face repo id", where=where,
                          given=text[:120] + ("..." if len(text) > 120 else ""),
                          allowed="ORG/NAME or NAME: letters, digits, '.', '_', '-' (no '..' or '--'), "
                                  "each part starting with a letter or digit, at most 96 characters",
                          fix=f"set {where} to the model's Hub id (a local copy goes in model.path)")
    return text


def cache_dir() -> Path:
    """Root of downloaded assets and converted checkpoints: $RUNNER_CACHE_DIR or ~/.cache/runner."""
    env = os.environ.get("RUNNER_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "runner"


def models_root() -> Path | None:
    """Optional directory holding local model copies as <root>/<hf org>/<name>: $RUNNER_MODELS_ROOT."""
    env = os.environ.get("RUNNER_MODELS_ROOT")
    return Path(env).expanduser() if env else None


def write_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` beside ``path`` and rename it into place, so a reader (another job, the next
    run after a crash) sees the old file or the new one, never half a file. ``mode``: the new file's
    permissions (default: mkstemp's 0o600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())  # the content is on disk before the name points at it (a crash or power cut)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
