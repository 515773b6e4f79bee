"""The bad inputs of issue 30's last round: each is refused with a message (where, what was given, what is
allowed, what to do) before any model loads. In-process: the composed config and the checks themselves,
or :func:`runner.job.flow.run` on the scripted fake backend; ``benchmarks/bad_inputs.py`` replays the
whole list through the command line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from runner.contract.errors import UserError
from tests.conftest import ROOT, compose

GSM8K = ["backend=fake", "task=gsm8k", "task.dataset.source=local",
         f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "task.num_samples=2",
         "tracking=none", "reference.mode=skip"]
MMLU_ROW = {"question": "Which planet is closest to the Sun?", "subject": "astronomy",
            "choices": ["Venus", "Mercury", "Mars", "Earth"], "answer": 1}


def _message(err: UserError, *fragments: str) -> None:
    text = err.render()
    assert "where:" in text and "given:" in text, text
    for fragment in fragments:
        assert fragment in text, text


# ------------------------------------------------------------------ the composed config
@pytest.mark.parametrize("override,fragments", [
    ("+foo=1", ("unknown key at the top level", "where:   foo")),
    ("task.metric=bogus", ("does not compute this metric", "allowed: accuracy")),
    ("sweep.correction=bogus", ("unknown multiple-testing correction", "holm, bh, none")),
    ("sweep.go_correction=bonferroni", ("unknown multiple-testing correction", "where:   sweep.go_correction")),
    ("sweep.alpha=7", ("sweep.alpha",)),
])
def test_config_mistakes_are_refused(tmp_path, override, fragments):
    from runner.config.validate import check_job

    with pytest.raises(UserError) as caught:
        check_job(compose([*GSM8K, f"output_dir={tmp_path}", override]))
    _message(caught.value, *fragments)


@pytest.mark.parametrize("overrides", [["task=arc_easy", "task.metric=accuracy_norm"], ["task=humaneval", "task.metric=rouge1"],
                                       ["task=cnn_dailymail"], ["task=perplexity"], ["overwrite_output=true"]])
def test_metrics_a_task_declares_still_compose(tmp_path, overrides):
    from runner.config.validate import check_job

    check_job(compose([*GSM8K, f"output_dir={tmp_path}", *overrides]))


# ------------------------------------------------------------------ the command line, before Hydra starts
@pytest.mark.parametrize("argv,fragments", [
    (["hydra.job_logging.handlers.file.filename={tmp}/F", "+hydra.job_logging.handlers.file.mode=w"],
     ("logging handlers are not set from the command line", "hydra/job_logging=disabled")),
    (["+hydra.hydra_logging.handlers={h:{filename:x}}"], ("where:   hydra.hydra_logging.handlers.h.filename",)),
    (["hydra.run.dir=/proc/x"], ("cannot be created or written", "No such file or directory")),
    (["hydra.run.dir={tmp}/file.txt"], ("cannot be created or written", "Not a directory")),
    (["-m", "hydra.sweep.dir=/proc/y", "task=mmlu,gsm8k"], ("where:   hydra.sweep.dir",)),
    (["hydra.run.dir={tmp}/earlier"], ("an earlier run's results", "holds results.json", "overwrite_output=true")),
    (["+hydra.job.foo=1"], ("unknown key added under hydra", "where:   hydra.job.foo", "hydra.job.chdir")),
    (["+gate.tasks=x"], ("gate is empty until an option is chosen", "gate=<option>")),
])
def test_command_line_mistakes_are_refused_before_hydra_starts(tmp_path, argv, fragments):
    from runner.config.guard import check_overrides

    (tmp_path / "F").write_text("keep me")
    (tmp_path / "file.txt").write_text("")
    (tmp_path / "earlier").mkdir()
    (tmp_path / "earlier" / "results.json").write_text("{}")
    with pytest.raises(UserError) as caught:
        check_overrides([a.replace("{tmp}", str(tmp_path)) for a in argv])
    _message(caught.value, *fragments)
    assert (tmp_path / "F").read_text() == "keep me"


def test_run_directories_that_are_fine_pass_and_the_probe_leaves_nothing(tmp_path):
    from runner.config.guard import check_overrides, check_run_dir

    (tmp_path / "earlier").mkdir()
    (tmp_path / "earlier" / "results.json").write_text("{}")
    check_overrides([f"hydra.run.dir={tmp_path}/earlier", "overwrite_output=true"])
    check_overrides([f"hydra.run.dir={tmp_path}/new/a/b", "hydra.job_logging.root.level=DEBUG", "hydra/job_logging=disabled",
                     "+hydra.job.env_set.X=1", "gate=embedded_release", "+gate.x=1"])  # free-form nodes; a chosen gate
    check_overrides(["hydra.run.dir=/proc/x", "--cfg", "job"])  # only shows the config: nothing is created
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier"]
    if os.geteuid() == 0:
        return  # root writes through permission bits
    (tmp_path / "ro").mkdir(mode=0o500)
    with pytest.raises(UserError, match="cannot be created or written"):
        check_run_dir("hydra.run.dir", str(tmp_path / "ro" / "x"), overwrite=False)


def test_a_read_only_file_system_is_a_message(tmp_path, monkeypatch):
    import errno

    from runner.config import guard
    from runner.files import writable

    def read_only(path, mode=0o777):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(writable.os, "mkdir", read_only)
    with pytest.raises(UserError) as caught:
        guard.check_overrides([f"hydra.run.dir={tmp_path}/run"])
    _message(caught.value, "Read-only file system", "hydra.run.dir")


# ------------------------------------------------------------------ data files
def test_data_files_not_utf8_or_too_large_are_refused_before_they_are_read(tmp_path):
    from runner.files.datasets import check_files

    bad = tmp_path / "d.jsonl"
    bad.write_bytes(b'{"a": "ok"}\n{"a": "ok"}\n{"a": "caf\xe9"}\n')  # latin-1: byte 34 (12 + 12 + 10) on line 3
    with pytest.raises(UserError) as caught:
        check_files([bad], "task.dataset.local_path", 256)
    _message(caught.value, "not valid UTF-8", "byte 34 (line 3)")
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"{}\n" * 700_000)  # 2.0 MB
    with pytest.raises(UserError) as caught:
        check_files([big], "task.dataset.local_path", 1)
    _message(caught.value, "larger than the size limit", "2.0 MB", "task.dataset.max_file_mb=1")
    check_files([big], "task.dataset.local_path", 3)


@pytest.mark.parametrize("rows,extra,fragments", [
    ([MMLU_ROW, MMLU_ROW | {"subject": None}], [], ("subject must be a name", "row 1")),
    ([MMLU_ROW, MMLU_ROW | {"answer": True}], [], ("answer must be 0-3 or A-D", "True")),
    (b'{"question": "\xff", "subject": "x", "choices": ["a", "b", "c", "d"], "answer": 0}\n', [], ("not valid UTF-8",)),
    ([MMLU_ROW] * 20, ["task.dataset.max_file_mb=0.001"], ("larger than the size limit",)),
])
def test_bad_rows_stop_the_job_before_any_sample_is_answered(tmp_path, rows, extra, fragments):
    from runner.job.flow import run

    data = tmp_path / "d.jsonl"
    data.write_bytes(rows if isinstance(rows, bytes) else "".join(json.dumps(r) + "\n" for r in rows).encode())
    overrides = ["backend=fake", "task=mmlu", "tracking=none", "reference.mode=skip", "task.dataset.source=local",
                 f"task.dataset.local_path={data}", "task.num_fewshot=0", "task.num_samples=2",
                 f"output_dir={tmp_path / 'out'}", *extra]
    with pytest.raises(UserError) as caught:
        run(compose(overrides))
    _message(caught.value, *fragments)
    assert not (tmp_path / "out" / "samples.jsonl").exists()


# ------------------------------------------------------------------ tracking, model context, references
def test_a_sqlite_uri_with_two_slashes_says_the_three_slash_form():
    from runner.tracking.trackers import MlflowTracker

    tracker = MlflowTracker(SimpleNamespace(tracking_uri="sqlite://relative.db", experiment="x", connect_timeout_s=1))
    with pytest.raises(UserError) as caught:
        tracker.check()
    _message(caught.value, "three slashes", "sqlite:///relative.db")


@pytest.mark.parametrize("config,input_len,output_len,fragment", [
    ({"max_position_embeddings": 2048}, 2049, 10, "task.max_input_len is beyond"),
    ({"max_position_embeddings": 2048}, 100, 100_000, "task.max_output_len is beyond"),
    ({"text_config": {"max_position_embeddings": 512}}, 513, 1, "at most 512 tokens"),
    ({"n_positions": 1024}, 1024, 1025, "at most 1024 tokens (n_positions"),
    ({"n_positions": 1024}, 1024, 1024, None),
    ({"model_type": "llama"}, 10_000_000, 100_000, None),  # no window declared: nothing to check
])
def test_lengths_beyond_the_checkpoints_context_are_refused(tmp_path, config, input_len, output_len, fragment):
    from runner.backends.identity import check_lengths

    (tmp_path / "config.json").write_text(json.dumps(config))
    model = SimpleNamespace(path=str(tmp_path), hf_id="org/m", embedded=None)
    if fragment is None:
        check_lengths(model, input_len, output_len)
        return
    with pytest.raises(UserError) as caught:
        check_lengths(model, input_len, output_len)
    _message(caught.value, fragment, "in " + str(tmp_path / "config.json"))


def test_a_job_asking_beyond_the_context_stops_before_the_model_loads(tmp_path):
    from runner.job.flow import run

    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": 8192}))
    with pytest.raises(UserError) as caught:
        run(compose([*GSM8K, f"model.path={checkpoint}", "task.max_output_len=100000", f"output_dir={tmp_path / 'out'}"]))
    _message(caught.value, "task.max_output_len is beyond", "at most 8192")


@pytest.mark.parametrize("writing", [False, True])
def test_a_reference_file_that_is_a_symlink_loop_is_said_and_kept(tmp_path, writing):
    from runner.references.store import preflight

    link = tmp_path / "gsm8k.yaml"
    os.symlink("gsm8k.yaml", link)
    with pytest.raises(UserError) as caught:
        preflight(tmp_path, "gsm8k", "org/m", writing=writing)
    _message(caught.value, "symlink loop")
    assert link.is_symlink() and os.readlink(link) == "gsm8k.yaml"
    Path(link).unlink()
    os.symlink("missing.yaml", link)
    with pytest.raises(UserError, match="symlink to a missing file"):
        preflight(tmp_path, "gsm8k", "org/m", writing=writing)
