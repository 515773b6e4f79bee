"""The extension recipe of docs/statistics.md#extending-a-run works as printed (issue 40): its commands run in their
order on the fake backend, each ``outputs/<date>/<time>`` the directory the previous job printed. And a reference
that does not cover an extension is refused before any request, with a record command that works when followed
and leaves look 1 where it was."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SESSION_GENERATION_CACHE, compose

FAKE = ["backend=fake", "tracking=none", f"cache.path={SESSION_GENERATION_CACHE}"]
ENV = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}


def recipe() -> list[list[str]]:
    """The commands of the section's bash block, as argument lists (comments dropped)."""
    text = (ROOT / "docs" / "statistics.md").read_text(encoding="utf-8")
    section = text[text.index("## Extending a run"):]
    block = section[section.index("```bash\n") + 8:]
    block = block[:block.index("```")]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def python(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)


def job(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, Path]:
    proc = python(["-m", "runner", *args, *FAKE], cwd)
    found = re.search(r"^outputs: (\S+)", proc.stdout, re.M)
    assert found, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc, Path(found.group(1))


def report(run: Path) -> dict:
    return json.loads((run / "report.json").read_text())


def ids(run: Path) -> list[str]:
    return [json.loads(line)["sample_id"] for line in (run / "samples.jsonl").read_text().splitlines()]


def test_the_documented_extension_recipe_runs_in_order(tmp_path):
    commands = recipe()
    assert [c[:3] for c in commands] == [["python", "-m", "runner"]] * 2 + [["python", "-m", "runner.extend"]] * 2
    record, first, *extensions = commands

    proc, _ = job(record[3:], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc, look1 = job(first[3:], tmp_path)
    assert proc.returncode in (0, 3, 4), proc.stderr[-3000:]
    entry = report(look1)["reference_entry"]
    assert entry["num_samples"] == 228 and entry["samples"]
    assert [lk["n"] for lk in report(look1)["decision"]["sequential"]["looks"]] == [57]

    for k, command in enumerate(extensions, 1):
        assert command[3].startswith("outputs/<date>/<time>")  # look 1's directory, as its outputs: line printed
        args = [str(look1) + command[3].removeprefix("outputs/<date>/<time>"), *command[4:]]
        assert args[0] == (str(look1) if k == 1 else f"{look1}-extend{k - 1}")  # each extends the one before
        proc = python(["-m", "runner.extend", *args], tmp_path)
        assert proc.returncode in (0, 3, 4), proc.stdout[-2000:] + proc.stderr[-3000:]
        run = Path(f"{look1}-extend{k}")
        looks = report(run)["decision"]["sequential"]["looks"]
        assert [lk["n"] for lk in looks] == [57 * j for j in range(1, k + 2)]
        assert "task.num_samples=57 stats.method=paired" in proc.stdout  # look 1's n and rule, pinned
        assert ids(run)[:57] == ids(look1)
        notes = report(run)["notes"]
        assert any(n.startswith("looks: look 1 n=57") and "paired with the reference's scores" in n for n in notes)


def inprocess(args: list[str], out: Path) -> None:
    """``python -m runner ARGS`` in this process (the first test runs the printed commands as processes), with the
    overrides list Hydra's command line saves beside a job (what runner.extend replays)."""
    from runner.job.flow import run

    asked = [*[a for a in args if not a.startswith(("hydra.run.dir=", "cache.path=", "output_dir="))], *FAKE]
    run(compose([*asked, f"output_dir={out}"]))
    (out / ".hydra").mkdir(exist_ok=True)
    (out / ".hydra" / "overrides.yaml").write_text("".join(f"- {json.dumps(a)}\n" for a in asked))


def test_a_reference_on_fewer_samples_is_refused_before_any_request_and_the_printed_fix_works(tmp_path):
    from runner.commands.extend import overrides_for
    from runner.contract.errors import UserError

    refs = tmp_path / "refs"
    inprocess(["task=mmlu_0shot", "reference.mode=record", f"reference.dir={refs}"], tmp_path / "record")
    look1 = tmp_path / "look1"
    inprocess(["quant=w4a16", "task=mmlu_0shot", f"reference.dir={refs}", "reference.against=baseline",
               "stats.extensions=3"], look1)
    assert report(look1)["decision"]["rule"] == "paired"

    with pytest.raises(UserError) as refused:  # before any request: nothing is loaded, nothing is written
        overrides_for(look1, None)
    said = refused.value.render()
    assert "do not cover look 2" in said and "the reference scored 57" in said
    assert not Path(f"{look1}-extend1").exists()
    fix = re.search(r"(python -m runner .*?task\.num_samples=228);", said)
    assert fix and "quant=" not in fix.group(1), said  # the unquantized baseline is recorded

    inprocess(shlex.split(fix.group(1))[3:], tmp_path / "rerecord")
    second = Path(f"{look1}-extend1")
    inprocess(overrides_for(look1, None), second)
    assert [lk["n"] for lk in report(second)["decision"]["sequential"]["looks"]] == [57, 114]
    assert ids(second)[:57] == ids(look1)  # look 1 did not move to the new entry's 228
    assert report(second)["decision"]["rule"] == "paired"
