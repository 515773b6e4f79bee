"""Every documented command works as printed (issue 31): each ``bash`` block of README.md and docs/ that follows a
``<!-- runnable -->`` line is run, one command at a time, offline, at small n.

A runnable block holds only ``python -m MODULE ARGS`` lines (``.venv/bin/python`` too; ``\\`` continues a line, ``#``
starts a comment). Each runs in this process as ``python -m`` would run it (:func:`runpy.run_module` with that
``sys.argv``: Hydra's command line, its multirun and the sweep callback included), from a fresh temporary directory,
where its outputs and ``multirun/`` land. Other modules run exactly as printed; a ``python -m runner`` line gets the
overrides of :data:`SIZE` (a value the line sets itself is replaced), and a job that would load a model gets
``backend=fake`` too: the test checks the command (its overrides, the task's data, the reference it is judged
against, the sweep, the reports), not the embedded model's answers, which cost 80 s of CPU for two GSM8K problems
and which tests/job/test_e2e.py covers. A dry run and ``--help`` load no model and run with the printed backend.
A verdict (GO, NO-GO, INCONCLUSIVE: exit 0, 3, 4) is a command that worked; an error (1) or a traceback is not.
Blocks without the marker (a GPU, a server, a checkpoint of your own) are skipped; a new page's marked block is
picked up without touching this file.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import runpy
import shlex
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig

if __name__ == "__main__":  # run as the script of :func:`outcomes`: the project root first on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.conftest import ROOT, SESSION_GENERATION_CACHE  # noqa: E402

MARKER = "<!-- runnable -->"
PYTHONS = ("python", "python3", ".venv/bin/python")
WORKED = (0, 3, 4)  # GO (or no verdict asked), NO-GO, INCONCLUSIVE: each an answer, not a failure
# Added to every `python -m runner` line (a value the line sets itself is replaced): small n, the test session's
# generation cache, and no MLflow store (creating one costs 7 s of CPU; tests/tracking/ covers the logging).
SIZE = {"task.num_samples": "2", "cache.path": str(SESSION_GENERATION_CACHE), "tracking": "none"}
NO_MODEL = {"backend": "fake"}  # added where the job would load a model (not a dry run, not --help or --cfg)


@dataclass(frozen=True)
class Command:
    where: str  # file:line of the command's first line
    module: str
    args: tuple[str, ...]


def documented_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def runnable_commands(path: Path, root: Path = ROOT) -> list[Command]:
    """The commands of the marked ``bash`` blocks of ``path``; a marker not followed by a bash block, or a line
    that is not ``python -m MODULE ...``, is an error of the page (the test says where)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    name = path.relative_to(root).as_posix()
    commands: list[Command] = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```bash":
            raise AssertionError(f"{name}:{i + 1}: {MARKER} must be followed by a ```bash block")
        start, text = None, ""
        for j in range(i + 2, len(lines)):
            if lines[j].strip() == "```":
                break
            start = j if not text else start
            text += lines[j]
            if text.endswith("\\"):
                text = text[:-1] + " "
                continue
            words = shlex.split(text, comments=True)
            text = ""
            if not words:
                continue
            if len(words) < 3 or words[0] not in PYTHONS or words[1] != "-m":
                raise AssertionError(f"{name}:{start + 1}: a runnable block holds only `python -m MODULE ...` lines; "
                                     f"got {' '.join(words)!r} (move it to a block without {MARKER})")
            commands.append(Command(f"{name}:{start + 1}", words[2], tuple(words[3:])))
    return commands


def sized(command: Command) -> list[str]:
    """The command's arguments with :data:`SIZE` for ``python -m runner`` (before an option such as ``--help``
    ends Hydra's overrides), as printed otherwise."""
    if command.module != "runner":
        return list(command.args)
    loads_model = "dry_run=true" not in command.args and not any(a.startswith("-") and a != "-m" for a in command.args)
    added = SIZE | (NO_MODEL if loads_model else {})
    args = [a for a in command.args if not any(a.startswith(f"{key}=") for key in added)]
    first_option = next((i for i, a in enumerate(args) if a.startswith("--")), len(args))
    return [*args[:first_option], *(f"{k}={v}" for k, v in added.items()), *args[first_option:]]


def run_as_printed(command: Command, cwd: Path) -> tuple[int, str]:
    """``python -m MODULE ARGS`` in this process, from ``cwd``: (exit status, stdout and stderr)."""
    argv, out = [command.module, *sized(command)], io.StringIO()
    root = logging.getLogger()
    saved = (sys.argv, root.handlers[:], root.level, signal.getsignal(signal.SIGTERM), dict(os.environ),
             signal.getsignal(signal.SIGINT))
    hydra_config = HydraConfig.instance().cfg  # a later in-process job must not believe it runs in this sweep
    code: int | str | None = 0
    try:
        sys.argv = argv
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                runpy.run_module(command.module, run_name="__main__", alter_sys=True)
            except SystemExit as stop:
                code = stop.code
    finally:
        sys.argv, root.handlers[:], _, sigterm, environ, sigint = saved
        root.setLevel(saved[2])
        signal.signal(signal.SIGTERM, sigterm)
        signal.signal(signal.SIGINT, sigint)
        os.environ.clear()
        os.environ.update(environ)
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = hydra_config
    return (code if isinstance(code, int) else 1 if code else 0), out.getvalue()


COMMANDS = [c for page in documented_pages() for c in runnable_commands(page)]


def test_the_quickstart_is_marked_runnable():
    readme = [c for c in COMMANDS if c.where.startswith("README.md")]
    assert any(c.module == "runner" and "task=arc_easy" in c.args for c in readme), readme


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[int, str]]:
    """Every command's (exit status, output), run by this file as a script in one fresh interpreter: a command
    runs as ``python -m`` would, and what a job leaves in its process (handlers, signals, Hydra's state) can reach
    neither the test worker nor the tests after it."""
    out = tmp_path_factory.mktemp("documented") / "outcomes.json"
    env = dict(os.environ) | {"PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, __file__, str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {where: (code, output) for where, code, output in json.loads(out.read_text())}


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_a_documented_command_works_as_printed(command, outcomes):
    code, output = outcomes[command.where]
    printed = " ".join(["python -m", command.module, *command.args])
    assert code in WORKED, f"{command.where}: `{printed}` exited {code}:\n{output[-4000:]}"
    assert "Traceback (most recent call last)" not in output, f"{command.where}: `{printed}`:\n{output[-4000:]}"


def test_a_marked_block_takes_only_python_module_lines(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"{MARKER}\n```bash\n.venv/bin/python -m runner a=1 \\\n    b=2   # note\n\nmlflow ui\n```\n")
    with pytest.raises(AssertionError, match=r"page.md:6: a runnable block holds only"):
        runnable_commands(page, tmp_path)
    page.write_text(f"{MARKER}\n```bash\npython -m runner.plan task=mmlu  # one\npython3 -m runner --help\n```\n"
                    "```bash\npython -m runner not=marked\n```\n")
    assert runnable_commands(page, tmp_path) == [Command("page.md:3", "runner.plan", ("task=mmlu",)),
                                                    Command("page.md:4", "runner", ("--help",))]
    size = ["task.num_samples=2", f"cache.path={SESSION_GENERATION_CACHE}", "tracking=none"]
    assert sized(Command("x", "runner", ("task=gsm8k", "task.num_samples=16", "--help"))) == ["task=gsm8k", *size, "--help"]
    assert sized(Command("x", "runner", ("-m", "quant=a,b", "dry_run=true"))) == ["-m", "quant=a,b", "dry_run=true", *size]
    assert sized(Command("x", "runner", ("backend=hf", "task=gsm8k"))) == ["task=gsm8k", *size, "backend=fake"]
    assert sized(Command("x", "runner.plan", ("task=mmlu",))) == ["task=mmlu"]


def test_every_marker_is_on_its_own_line_before_a_bash_fence():
    for page in documented_pages():
        text = page.read_text(encoding="utf-8")
        assert len(re.findall(rf"^{re.escape(MARKER)}$", text, re.M)) == len(re.findall(rf"^{re.escape(MARKER)}\n```bash$", text, re.M)), page


if __name__ == "__main__":
    results = []
    for documented in COMMANDS:
        with tempfile.TemporaryDirectory() as scratch:
            results.append((documented.where, *run_as_printed(documented, Path(scratch))))
    Path(sys.argv[1]).write_text(json.dumps(results))
