"""Checks, before any work, that the files a command will write at its end can be written there.

A report written after a job (``report.junit``, ``report.markdown``, ``runner.compare --output-dir``) that
fails on a directory or an unwritable path would otherwise end a finished job with a traceback; the probe
creates what is missing, writes a temporary file, and removes what it created.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from runner.contract.errors import ConfigError


PROBE_BYTES = 1 << 20
"""What the probe writes: room for Hydra's saved configs and the job's first files (a full disk is found here, not
in Hydra's own write of ``.hydra/``, which ends in its traceback)."""


def probe_dir(path: Path) -> None:
    """Create ``path`` (and the missing parents), write :data:`PROBE_BYTES` in a file there, then remove what the
    probe created."""
    created = []
    try:
        for part in [*reversed(path.parents), path]:
            if not part.exists():
                os.mkdir(part)
                created.append(part)
        if not path.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(path))
        with tempfile.TemporaryFile(dir=path) as handle:
            handle.write(bytes(PROBE_BYTES))
            handle.flush()
    finally:
        for part in reversed(created):
            os.rmdir(part)


def check_output_dir(value: str | Path, where: str, what: str = "the output directory",
                     fix: str = "choose a writable place") -> None:
    """A directory that can be created and written; a :class:`ConfigError` naming ``where`` otherwise."""
    path = Path(value).expanduser().absolute()
    try:
        probe_dir(path)
    except OSError as err:
        raise ConfigError(f"{what} cannot be created or written", where=where, given=f"{value} ({err.strerror or err})",
                          allowed="a directory on a writable file system that this user may write", fix=fix) from None


def check_output_file(value: str | Path, where: str) -> None:
    """A file path whose directory can be written and that is not itself a directory."""
    path = Path(value).expanduser().absolute()
    if path.is_dir():
        raise ConfigError("the report file is a directory", where=where, given=str(value),
                          allowed="a file path (the file is created or replaced)",
                          fix=f"name a file inside it, e.g. {Path(value) / 'report.xml'}")
    try:
        probe_dir(path.parent)
    except OSError as err:
        raise ConfigError("the report file cannot be written there", where=where,
                          given=f"{value} ({err.strerror or err})",
                          allowed="a path in a directory this user may write",
                          fix="choose a writable place") from None
