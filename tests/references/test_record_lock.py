"""The reference lock (and every lock of the runner): filelock with a timeout and a message naming the lock
file, never following a symlink out of its directory, never waiting without a word."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from runner.contract.errors import UserError
from runner.files.locking import file_lock
from runner.references.recording import record_lock
from tests.conftest import ROOT


def test_a_held_lock_is_said_and_given_up_with_the_lock_files_name(tmp_path, caplog):
    """A 1 s timeout: under SAY_AFTER_S (2 s) the wait is said at the timeout, and the second try gives up at once
    (the 3 s this test waited showed nothing more)."""
    lock = record_lock(tmp_path / "refs" / "gsm8k.yaml")
    lock.parent.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from runner.files.locking import file_lock\n"
                               "with file_lock(Path(sys.argv[1])):\n print('held', flush=True); time.sleep(30)",
                               str(lock)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env=os.environ | {"PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with caplog.at_level(logging.WARNING, logger="runner"), pytest.raises(UserError) as err:
            with file_lock(lock, timeout_s=1):
                pytest.fail("the lock was held by the other process")
        assert str(lock) in str(err.value) and "held a lock" in str(err.value)
        assert any(str(lock) in r.getMessage() and "waiting" in r.getMessage() for r in caplog.records)
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("kind", ["symlink out", "dangling symlink", "directory", "fifo"])
def test_a_lock_path_that_is_not_a_regular_file_is_refused_and_nothing_outside_is_created(tmp_path, kind):
    refs = tmp_path / "refs"
    refs.mkdir()
    lock = record_lock(refs / "gsm8k.yaml")
    outside = tmp_path / "outside" / "created-by-the-lock"
    if kind == "symlink out":
        outside.parent.mkdir()
        outside.write_text("precious")
        lock.symlink_to(outside)
    elif kind == "dangling symlink":
        lock.symlink_to(outside)
    elif kind == "directory":
        lock.mkdir()
    else:
        os.mkfifo(lock)
    with pytest.raises(UserError, match="not a regular file") as err:
        with file_lock(lock):
            pass
    assert str(lock) in str(err.value)
    assert (outside.read_text() == "precious") if kind == "symlink out" else not outside.exists()


def test_the_record_lock_is_ignored_by_git_and_not_tracked():
    listed = subprocess.run(["git", "ls-files", "references"], cwd=ROOT, capture_output=True, text=True).stdout
    assert ".runner-record.lock" not in listed
    ignored = subprocess.run(["git", "check-ignore", "-q", "references/.runner-record.lock"], cwd=ROOT)
    assert ignored.returncode == 0


def test_num_threads_above_the_cores_is_refused(tmp_path):
    from runner.config.validate import check_job
    from runner.contract.errors import ConfigError
    from tests.conftest import compose

    cores = len(os.sched_getaffinity(0))
    out = f"output_dir={tmp_path}"
    check_job(compose(["backend=hf", f"backend.num_threads={cores}", out]))
    with pytest.raises(ConfigError, match="more compute threads than this host has cores"):
        check_job(compose(["backend=hf", f"backend.num_threads={cores * 50}", out]))
    with pytest.raises(ConfigError, match="seed"):
        check_job(compose(["seed=18446744073709551616", out]))


def test_write_atomic_syncs_the_content_before_the_rename(tmp_path, monkeypatch):
    """A crash after the rename must not leave an empty file under the name: the data is fsynced first."""
    from runner.files import paths

    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(paths.os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(paths.os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b))[1])
    paths.write_atomic(tmp_path / "f.yaml", "x: 1\n")
    assert calls == ["fsync", "replace"] and (tmp_path / "f.yaml").read_text() == "x: 1\n"
