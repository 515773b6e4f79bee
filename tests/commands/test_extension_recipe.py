"""The extension recipe of docs/statistics.md#extending-a-run works as printed (issue 40): its commands, composed as
their command lines would be, run in their order on the fake backend in this process (runner.extend's overrides
from the look before, as the command builds them). And a reference
that does not cover an extension is refused before any request, with a record command that works when followed
and leaves look 1 where it was."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import ROOT, SESSION_GENERATION_CACHE, compose

FAKE = ["backend=fake", "tracking=none", f"cache.path={SESSION_GENERATION_CACHE}"]


def recipe() -> list[list[str]]:
    """The commands of the section's bash block, as argument lists (comments dropped)."""
    text = (ROOT / "docs" / "statistics.md").read_text(encoding="utf-8")
    section = text[text.index("## Extending a run"):]
    block = section[section.index("```bash\n") + 8:]
    block = block[:block.index("```")]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def report(run: Path) -> dict:
    return json.loads((run / "report.json").read_text())


def ids(run: Path) -> list[str]:
    return [json.loads(line)["sample_id"] for line in (run / "samples.jsonl").read_text().splitlines()]


def test_the_documented_extension_recipe_runs_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the recipe's relative paths (reference.dir=my-references) land here
    commands = recipe()
    assert [c[:3] for c in commands] == [["python", "-m", "runner"]] * 2 + [["python", "-m", "runner.extend"]] * 2
    record, first, *extensions = commands

    inprocess(record[3:], tmp_path / "record")
    look1 = tmp_path / "outputs" / "look1"
    inprocess(first[3:], look1)
    entry = report(look1)["reference_entry"]
    assert entry["num_samples"] == 228 and entry["samples"]
    assert [lk["n"] for lk in report(look1)["decision"]["sequential"]["looks"]] == [57]

    from runner.commands.extend import overrides_for

    for k, command in enumerate(extensions, 1):
        assert command[3].startswith("outputs/<date>/<time>")  # look 1's directory, as its outputs: line printed
        args = [str(look1) + command[3].removeprefix("outputs/<date>/<time>"), *command[4:]]
        assert args[0] == (str(look1) if k == 1 else f"{look1}-extend{k - 1}")  # each extends the one before
        rerun = overrides_for(Path(args[0]), int(args[1]) if len(args) > 1 else None)
        assert "task.num_samples=57" in rerun and "stats.method=paired" in rerun  # look 1's n and rule, pinned
        run = Path(f"{look1}-extend{k}")
        inprocess(rerun, run)
        looks = report(run)["decision"]["sequential"]["looks"]
        assert [lk["n"] for lk in looks] == [57 * j for j in range(1, k + 2)]
        assert ids(run)[:57] == ids(look1)
        notes = report(run)["notes"]
        assert any(n.startswith("looks: look 1 n=57") and "paired with the reference's scores" in n for n in notes)


def inprocess(args: list[str], out: Path) -> None:
    """``python -m runner ARGS`` in this process, with the overrides list Hydra's command line saves beside a job
    (what runner.extend replays)."""
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
