"""Reading a file someone else may have left: only a regular file, opened without waiting.

A FIFO named like a run directory's ``config.yaml`` blocks ``open`` until a writer appears, and a device
or ``/dev/zero`` never ends; a run directory handed over by someone else may hold either. The file is opened
non-blocking and checked on the open descriptor (no window between a check and the open), and read up to
a size limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from runner.contract.errors import DataError

MAX_BYTES = 256 << 20


def read_regular_bytes(path: Path, max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of ``path`` if it is a regular file (a symlink to one is followed) of at most ``max_bytes``;
    a :class:`DataError` otherwise; ``OSError`` when it cannot be opened (missing, unreadable)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DataError("this is not a regular file, and it is not read", where=str(path),
                            given=_kind(info.st_mode), allowed="a regular file",
                            fix="give a directory whose files a job wrote")
        if info.st_size > max_bytes:
            raise DataError("this file is larger than the runner reads", where=str(path),
                            given=f"{info.st_size} bytes", allowed=f"at most {max_bytes} bytes")
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            return handle.read(max_bytes + 1)[:max_bytes]
    finally:
        if fd >= 0:
            os.close(fd)


def read_regular_text(path: Path, max_bytes: int = MAX_BYTES) -> str:
    """:func:`read_regular_bytes` decoded as UTF-8 (``UnicodeDecodeError``, a ``ValueError``, when it is not)."""
    return read_regular_bytes(path, max_bytes).decode("utf-8")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"
