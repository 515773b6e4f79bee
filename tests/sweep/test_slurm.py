"""The cluster path for real: sweeps through Hydra's submitit SLURM launcher on a single-node SLURM
cluster started on this machine (tests/helpers/slurm_cluster.py), with the scripted fake backend so no
model loads. Two jobs that pass (summary, MLflow parent and children, exit 0), then a job cancelled
with ``scancel`` while it runs (summary lists it, the other job's result kept, exit 1).

Skips with the reason where SLURM is not installed (.ci/slurm-setup installs it in CI)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, _hermetic
from tests.helpers.slurm_cluster import SlurmCluster, why_not
from tests.sweep.test_sweep import TINY, children

REASON = why_not()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=str(REASON))]

SLURM = ["hydra/launcher=submitit_slurm", "hydra.launcher.partition=debug", "hydra.launcher.timeout_min=5",
         "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1", "backend=fake", *TINY]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        running.start()
        yield running
    finally:
        running.stop()
    assert all(p.poll() is not None for p in running.procs.values())


# Two waits of submitit's that are margins for a large cluster: it waits up to 15 s (``Job._results_timeout_s``) for
# the result file of a job that ended (slow shared filesystems), and it asks sacct for the jobs' states at 2, 4, 8,
# 16 s ... after the last submission (``SlurmInfoWatcher``: a busy controller). A cancelled job never writes a result,
# so the sweep learnt of a cancel only at the next sacct call and then waited the 15 s out. Here the cluster and the
# files are local: the sweep's process asks sacct every second and waits 1 s for a result, set at its start by this
# sitecustomize (a test-only hook on the sweep's PYTHONPATH; the runner's own code is unchanged).
SUBMITIT_LOCAL_WAITS = """import submitit.core.core
import submitit.slurm.slurm
submitit.core.core.Job._results_timeout_s = 1
submitit.slurm.slurm.SlurmJob.watcher._delay_s = 1
"""


def runner_cmd(cluster: SlurmCluster, args: list[str], cwd: Path, hooks: Path | None = None) -> subprocess.Popen:
    """``python -m runner ARGS`` as a user on the cluster's login node runs it (SLURM_CONF set); ``hooks``, a
    directory put first on its PYTHONPATH (a sitecustomize.py there runs at its start)."""
    path = str(ROOT) if hooks is None else f"{hooks}:{ROOT}"
    env = cluster.env | {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "runner", *_hermetic(args)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def array_states(cluster: SlurmCluster, array_id: str) -> dict[str, tuple[str, str]]:
    """sacct's view of a job array: {"ID_TASK": (state, node)}, job steps left out."""
    out = cluster.client("sacct", "-X", "-n", "-P", "-o", "JobID,State,NodeList", "-j", array_id).stdout
    return {f[0]: (f[1], f[2]) for f in (line.split("|") for line in out.splitlines()) if "_" in f[0]}


def submitit_jobs(sweep: Path) -> dict[str, str]:
    """Task id -> hostname, from the ``JobEnvironment`` line submitit logs inside each SLURM job."""
    found = {}
    for log in sweep.glob(".submitit/*/*_log.out"):
        match = re.search(r"JobEnvironment\(job_id=(\d+_\d+), hostname=([^,]+),", log.read_text())
        if match:
            found[match[1]] = match[2]
    return found


def test_a_two_job_sweep_runs_on_slurm(cluster, mlflow_server, tmp_path):
    sweep = tmp_path / "sweep"
    proc = runner_cmd(cluster, ["-m", "seed=0,1", *SLURM, f"tracking.tracking_uri={mlflow_server}",
                                "tracking.experiment=sweep-slurm", "sweep.name=slurm-gate",
                                f"hydra.sweep.dir={sweep}"], tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 4), err[-3000:] + cluster.logs()
    assert "sweep verdict: GO" in out or "sweep verdict: INCONCLUSIVE" in out

    # both jobs ran inside SLURM: one array, two tasks, COMPLETED on this cluster's node
    ran = submitit_jobs(sweep)
    assert len(ran) == 2 and set(ran.values()) == {cluster.node}, ran
    array_id = next(iter(ran)).split("_")[0]
    assert sorted(ran) == [f"{array_id}_0", f"{array_id}_1"]
    assert array_states(cluster, array_id) == {job: ("COMPLETED", cluster.node) for job in ran}

    summary = json.loads((sweep / "summary.json").read_text())
    rows = sorted(summary["rows"], key=lambda r: r["job"])
    assert [r["configuration"] for r in rows] == ["seed=0", "seed=1"]
    assert all(r["verdict"] in ("go", "inconclusive") and r["sweep_verdict"] == r["verdict"] for r in rows)
    assert all((sweep / r["job"] / "report.json").is_file() for r in rows)

    client, parent, kids = children(mlflow_server, "sweep-slurm")
    assert parent.info.run_name == "slurm-gate" and parent.info.status == "FINISHED"
    assert parent.data.tags["sweep.launcher"] == "SlurmLauncher" and parent.data.tags["sweep.verdict"] in ("GO", "INCONCLUSIVE")
    assert sorted(k.info.status for k in kids) == ["FINISHED", "FINISHED"]
    assert {k.info.run_id for k in kids} == {r["mlflow_run_id"] for r in rows}
    # each child run was held by a process other than the sweep's (the SLURM job's)
    assert len({k.data.tags["runner.pid"] for k in kids} | {str(proc.pid)}) == 3


def test_a_job_cancelled_with_scancel_fails_the_sweep_and_keeps_the_other(cluster, mlflow_server, tmp_path):
    sweep, hooks = tmp_path / "sweep", tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SUBMITIT_LOCAL_WAITS)
    # the second job's backend takes 300 s to "load": it is still running when it is cancelled
    proc = runner_cmd(cluster, ["-m", "backend.delay_s=0,300", *SLURM, f"tracking.tracking_uri={mlflow_server}",
                                "tracking.experiment=sweep-slurm-cancel", f"hydra.sweep.dir={sweep}"], tmp_path, hooks)
    try:
        slow, deadline = None, time.monotonic() + 60
        while slow is None and time.monotonic() < deadline:
            ran = submitit_jobs(sweep)
            states = array_states(cluster, next(iter(ran)).split("_")[0]) if ran else {}
            done = [j for j, (state, _) in states.items() if state == "COMPLETED"]
            running = [j for j, (state, _) in states.items() if state == "RUNNING" and j in ran]
            if done and running and any(sweep.glob("1-*/.hydra/config.yaml")):
                slow = running[0]
            time.sleep(0.5)
        assert slow is not None and slow.endswith("_1"), (submitit_jobs(sweep), cluster.logs())
        cluster.client("scancel", slow, check=True)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err[-3000:]
    assert array_states(cluster, slow.split("_")[0])[slow][0].startswith("CANCELLED")
    assert "sweep verdict: FAILED" in out and "-> exit 1" in out
    assert "the sweep stopped early: the scheduler cancelled a job" in err and "n_jobs" not in err

    summary = json.loads((sweep / "summary.json").read_text())
    rows = {r["configuration"]: r for r in summary["rows"]}
    assert rows["backend.delay_s=0"]["verdict"] in ("go", "inconclusive")  # the other job's result is kept
    assert (sweep / rows["backend.delay_s=0"]["job"] / "report.json").is_file()
    assert rows["backend.delay_s=300"]["verdict"] == "incomplete"
    assert "CANCELLED" in summary["stopped"] and slow in summary["stopped"]

    client, parent, kids = children(mlflow_server, "sweep-slurm-cancel")
    assert parent.info.status == "FAILED" and parent.data.tags["sweep.verdict"] == "FAILED"
    assert "CANCELLED" in parent.data.tags["error"]
    assert sorted(k.info.status for k in kids) == ["FINISHED", "KILLED"]
