"""A command's ``main(argv)`` called in the test's process, read back like a finished subprocess.

For tests about what a command prints and the status it returns, not about the process: the same entry point
``python -m MODULE ARGS`` calls, without the 1-2 s of CPU a new interpreter spends importing the project. An
exception the command lets escape (what a user would see as a traceback) propagates and fails the test."""

from __future__ import annotations

import contextlib
import io
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path


def call_main(main: Callable[[list[str]], int | None], args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess:
    """``main(list(args))`` from ``cwd`` with stdout and stderr captured: a CompletedProcess with its exit status (a
    ``SystemExit``'s code, as the interpreter would turn it into one: argparse's usage errors exit 2)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as stop:
            code = stop.code
            if isinstance(code, str):  # sys.exit("message"): printed on stderr, status 1
                print(code, file=err)
                code = 1
    return subprocess.CompletedProcess(list(args), code or 0, out.getvalue(), err.getvalue())
