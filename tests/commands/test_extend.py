"""``python -m runner.extend``: a planned extension evaluates the task's larger nested draw as the next look.

The fake backend answers MMLU 0-shot by log-likelihood; the reference is an entry without per-sample
scores, so every look is the unpaired test against the same fixed reference."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from runner.contract.errors import UserError

from tests.conftest import ROOT, run_cli

REFERENCE = """HuggingFaceTB/SmolLM2-135M-Instruct:
  - extra_acc_spec: scoring=loglikelihood,num_fewshot=0,dataset=packaged
    accuracy: 24.0
"""


def ids(run_dir) -> list[str]:
    return [json.loads(line)["sample_id"] for line in open(run_dir / "samples.jsonl")]


def extend(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runner.extend", *args], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}, timeout=600)


def test_a_planned_extension_adds_the_next_nested_look_and_the_last_one_is_final(tmp_path):
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "mmlu.yaml").write_text(REFERENCE)
    first = tmp_path / "look1"
    proc = run_cli(["backend=fake", "task=mmlu_0shot", f"reference.dir={refs}", "tracking=none",
                    "stats.extensions=1", f"hydra.run.dir={first}"], tmp_path)
    assert proc.returncode == 4, proc.stderr[-3000:]  # INCONCLUSIVE at 57 questions
    assert "1 of 1 planned extension(s) left: python -m runner.extend" in proc.stdout

    # a size other than the planned one (the first look's) is refused before anything runs
    other = extend(str(first), "20", cwd=tmp_path)
    assert other.returncode == 1 and "the planned number of samples" in other.stderr and "allowed: 57" in other.stderr

    done = extend(str(first), "57", cwd=tmp_path)
    assert done.returncode in (0, 3, 4), done.stderr[-3000:]
    second = tmp_path / "look1-extend1"
    assert f"stats.extend=[57] hydra.run.dir={second}" in done.stdout
    # the larger draw contains the first one (one more question per subject), and the first look comes first
    assert len(ids(second)) == 114 and ids(second)[:57] == ids(first)
    decision = json.loads((second / "report.json").read_text())["decision"]
    seq = decision["sequential"]
    assert [look["n"] for look in seq["looks"]] == [57, 114] and seq["extensions_left"] == 0
    assert decision["verdict"] in ("GO", "NO-GO", "INCONCLUSIVE") and decision["ci_method"].startswith("repeated CI")
    # its last look spent what was left of alpha: a look with a bound, no further extension
    assert seq["looks"][1]["efficacy"] is not None

    refused = extend(str(second), cwd=tmp_path)
    assert refused.returncode == 1 and "no planned extension left" in refused.stderr


def test_an_unplanned_extension_is_refused_before_anything_runs(tmp_path):
    proc = run_cli(["backend=fake", "task=mmlu_0shot", "tracking=none", "stats.extend=[57]"], tmp_path)
    assert proc.returncode == 1 and "more extensions than were planned at the first look" in proc.stderr


def test_an_extension_of_another_size_than_the_first_look_is_refused_by_the_job():
    """Sizes are planned at look 1: stats.extend entries other than the first look's size are refused."""
    import pytest

    from runner.contract.errors import ConfigError
    from runner.job.looks import nested_looks

    class Draws:
        def samples(self, n, seed):
            return [SimpleNamespace(id=i) for i in range(n)]

    first = Draws().samples(57, 0)
    ordered, sizes = nested_looks(Draws(), first, [57, 57], 0, "mmlu")
    assert sizes == [57, 114, 171] and [s.id for s in ordered] == list(range(171))
    with pytest.raises(ConfigError, match="the planned number of samples") as err:
        nested_looks(Draws(), first, [57, 20], 0, "mmlu")
    assert "stats.extend=[57,57]" in str(err.value.fix)


def test_the_printed_record_command_for_a_demo_entry_composes_and_is_accepted():
    # the embedded gate's 0-shot MMLU baseline (references/mmlu.yaml) is a demo entry: recording over it is refused
    # without reference.overwrite_demo=true, so the command runner.extend prints carries that flag
    from runner.commands.extend import demo_consent
    from runner.commands.plan_job import planned_job
    from runner.job.flow import typed
    from runner.references import store
    from tests.conftest import compose

    planned = planned_job(["task=mmlu_0shot", "quant=w4a16", "reference.against=baseline"])
    refs = store.default_reference_dir()
    flags, why = demo_consent(refs, planned.task, planned.model, planned.reference.spec)
    assert flags == ["reference.overwrite_demo=true"] and "experiment=" in why
    assert demo_consent(refs.parent / "elsewhere", planned.task, planned.model, planned.reference.spec) == ([], "")
    printed = ["task=mmlu_0shot", "reference.mode=record", "reference.overwrite=true", *flags, "task.num_samples=228"]
    settings = typed(compose([*printed, "output_dir=/tmp/x"])).reference
    rec = store.Recording(planned.task, "accuracy", planned.model, planned.reference.spec, 228, 57, why)
    store.check_replacement(refs, rec, settings.overwrite, settings.overwrite_demo)  # accepted: no exception
    with pytest.raises(UserError, match="embedded demo"):
        store.check_replacement(refs, rec, settings.overwrite, False)
