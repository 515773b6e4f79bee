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

from tests.conftest import ROOT, run_cli, run_in_process

REFERENCE = """HuggingFaceTB/SmolLM2-135M-Instruct:
  - extra_acc_spec: scoring=loglikelihood,num_fewshot=0,dataset=packaged
    accuracy: 24.0
"""


def ids(run_dir) -> list[str]:
    return [json.loads(line)["sample_id"] for line in open(run_dir / "samples.jsonl")]


def extend(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runner.extend", *args], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}, timeout=600)


def refused_here(*args: str, capsys) -> tuple[int, str]:
    """``python -m runner.extend ARGS`` in this process, for a refusal (it stops before starting the job's own
    process): (exit status, stderr)."""
    from runner.commands.extend import main

    code = main(list(args))
    return code, capsys.readouterr().err


def test_a_planned_extension_adds_the_next_nested_look_and_the_last_one_is_final(tmp_path, capsys):
    """The first look and the extension through the real command lines; the two refusals (another size, no
    extension left) by runner.extend's entry point in this process: they stop before any job starts."""
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "mmlu.yaml").write_text(REFERENCE)
    first = tmp_path / "look1"
    proc = run_cli(["backend=fake", "task=mmlu_0shot", f"reference.dir={refs}", "tracking=none",
                    "stats.extensions=1", f"hydra.run.dir={first}"], tmp_path)
    assert proc.returncode == 4, proc.stderr[-3000:]  # INCONCLUSIVE at 57 questions
    assert "1 of 1 planned extension(s) left: python -m runner.extend" in proc.stdout

    # a size other than the planned one (the first look's) is refused before anything runs
    code, err = refused_here(str(first), "20", capsys=capsys)
    assert code == 1 and "the planned number of samples" in err and "allowed: 57" in err

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

    code, err = refused_here(str(second), capsys=capsys)
    assert code == 1 and "no planned extension left" in err


def test_an_unplanned_extension_is_refused_before_anything_runs(tmp_path):
    """The job's own check (in this process, through the command line's job glue)."""
    proc = run_in_process(["backend=fake", "task=mmlu_0shot", "tracking=none", "stats.extend=[57]",
                           f"output_dir={tmp_path / 'out'}"], tmp_path)
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


def hostile_run(tmp_path, overrides: list[str]):
    """A run directory from someone else, planned for one extension, whose saved overrides hold ``overrides``."""
    import yaml

    run_dir = tmp_path / "foreign"
    (run_dir / ".hydra").mkdir(parents=True)
    base = ["backend=fake", "task=gsm8k", "task.dataset.source=local",
            f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "task.num_samples=2",
            "reference.mode=skip", "stats.extensions=1", "tracking=none", f"cache.path={tmp_path / 'gen.sqlite'}"]
    (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([*base, *overrides]))
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"task": {"num_samples": 2}, "model": {},
                                                        "stats": {"extensions": 1, "extend": []}}))
    return run_dir


def test_runner_extend_replays_only_what_a_look_needs(tmp_path):
    """A launch command, an environment, Hydra's job settings, a launcher and a callback named by a run directory
    are dropped (and said to be); the look's own keys are replayed; the user's own overrides are used."""
    from runner.commands.extend import plan_rerun

    hostile = [f"backend.launch.command=touch {tmp_path / 'marker'}", "+hydra.job.env_set.TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1",
               "+hydra.job.env_set.HF_HOME=/tmp/theirs", "hydra/launcher=joblib", "+hydra.callbacks.x._target_=os.system",
               "hydra.job.chdir=true", "backend.api_key_env=AWS_SECRET_ACCESS_KEY", "tracking.tracking_uri=http://theirs:5000",
               "+extra.thing=1"]
    rerun = plan_rerun(hostile_run(tmp_path, hostile), 2, extra=["seed=3"])
    assert rerun.dropped == hostile
    assert not set(hostile) & set(rerun.overrides)
    assert "task=gsm8k" in rerun.replayed and "stats.extensions=1" in rerun.replayed
    assert rerun.overrides.index("seed=3") > rerun.overrides.index("task=gsm8k")
    with pytest.raises(UserError, match="sets these itself"):
        plan_rerun(hostile_run(tmp_path / "again", []), 2, extra=["task.trust_include_code=true"])


def test_runner_extend_prints_what_it_replays_and_drops(tmp_path):
    run_dir = hostile_run(tmp_path, ["backend.launch.command=touch marker", "+hydra.job.env_set.X=1"])
    proc = extend(str(run_dir), "2", f"cache.path={tmp_path / 'gen.sqlite'}", cwd=tmp_path)
    assert "dropped" in proc.stdout and "backend.launch.command=touch marker" in proc.stdout, proc.stdout + proc.stderr
    assert "replayed from the run directory: backend=fake" in proc.stdout
    assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize("name", ["config.yaml", ".hydra/overrides.yaml", "report.json", "samples.jsonl"])
def test_a_fifo_in_a_run_directory_is_not_opened(tmp_path, name):
    """A FIFO blocks open() until a writer comes: each file runner.extend reads is opened only if regular."""
    import os

    from runner.commands.extend import plan_rerun

    run_dir = hostile_run(tmp_path, [])
    (run_dir / name).unlink(missing_ok=True)
    os.mkfifo(run_dir / name)
    if name in ("config.yaml", ".hydra/overrides.yaml"):
        with pytest.raises(UserError, match="not a regular file") as err:
            plan_rerun(run_dir, 2)
        assert "FIFO" in str(err.value)
    else:
        assert plan_rerun(run_dir, 2).overrides  # an optional file that is not regular is skipped, not waited on


def test_a_fifo_for_a_runs_samples_is_a_message_in_runner_compare(tmp_path):
    import os

    from runner.reports.runs import _jsonl

    os.mkfifo(tmp_path / "samples.jsonl")
    with pytest.raises(UserError, match="not a regular file"):
        _jsonl(tmp_path / "samples.jsonl")
