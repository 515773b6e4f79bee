"""A Hydra multirun as one sweep: an MLflow parent run, nested child runs, a summary and one exit status.

The jobs of a multirun may live in other processes (``hydra/launcher=joblib``) or on other hosts
(``submitit_slurm``), so nothing is shared in memory:

- :class:`SweepCallback` (registered in ``conf/config.yaml`` under ``hydra.callbacks``) creates the
  parent run when the multirun starts and exports its id as ``RUNNER_SWEEP_PARENT_RUN_ID``. The
  launchers start their workers from this process's environment (joblib's loky workers, submitit's
  local processes, ``sbatch``'s default ``--export=ALL``), so every job finds it there and tags its
  own run with ``mlflow.parentRunId``: MLflow's nesting.
- Each job leaves ``report.json`` (finished) or ``failure.json`` (failed) in its directory under the
  sweep directory. When the multirun ends, the callback builds the summary from those files
  (``runner.sweep.summary``), logs it to the parent run, closes the parent, and leaves the sweep's
  exit status for the entry point (:func:`take_exit_status`).
- A job that fails before its own run starts (a bad override, a missing library) still gets a
  FAILED child run with its error (:func:`record_failure`), and the sweep goes on.
- A job whose *process* dies (SIGKILL, the OOM killer, a crash in native code) cannot record anything,
  and the launcher then raises (loky's ``TerminatedWorkerError``, submitit's ``UncompletedJobError``)
  out of Hydra's multirun, which has no ``finally``: ``on_multirun_end`` never runs. The open sweep
  is therefore reachable from the module (:func:`abort_open_sweep`), and the entry point finishes it:
  the summary from the job directories, the parent run closed FAILED, a message and exit status 1.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

from hydra.errors import CompactHydraException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from runner.contract.build import build
from runner.contract.errors import EXIT_ERROR, EXIT_INTERRUPTED, Terminated, UserError
from runner.contract.secrets import redact_logs, redact_text, redact_tree, redact_url
from runner.files.redaction import redact_saved_configs
from runner.reports.ci import publish_sweep
from runner.reports.markdown import fenced, text
from runner.reports.outputs import write_failure
from runner.stats.multiple_testing import validate
from runner.sweep import summary as sweep_summary
from runner.sweep.policy import check_policy
from runner.sweep.progress import announce
from runner.tracking.naming import run_identity
from runner.tracking.provenance import flatten, project_commit
from runner.tracking.trackers import (PARENT_ENV, browse_hint, open_experiment, parent_run_id, process_tags,
                                      runs_table_url, ui_address)

log = logging.getLogger("runner")
FULL_ERROR_ENV = "HYDRA_FULL_ERROR"
DEAD_JOB = "the job's process ended without closing its run (killed by a signal or the OOM killer?)"
_exit_status: int | None = None
_open_sweep: SweepCallback | None = None  # between on_multirun_start and the end of the sweep


def take_exit_status() -> int | None:
    """The last sweep's exit status (None when no sweep ran in this process), reset on read."""
    global _exit_status
    status, _exit_status = _exit_status, None
    return status


def record_failure(cfg: DictConfig, err: BaseException) -> None:
    """Make a failed job visible in the sweep: ``failure.json``, and a FAILED child run when the
    error came before the job's own run existed. Never raises: the sweep must go on."""

    out_dir = Path(cfg.output_dir)
    if (out_dir / "failure.json").is_file():
        return  # the job's own run recorded it
    run_id = None
    try:
        tracker = build(OmegaConf.to_object(cfg.tracking), "tracking")
        tracker.check()
        run_name, tags = run_identity(cfg.model, cfg.quant, cfg.task, cfg.backend.name, cfg.reference.mode,
                                      parent_run_id())
        tracker.start(run_name, flatten(OmegaConf.to_container(cfg, resolve=True)), tags)
        run_id = tracker.run_id
        tracker.set_tags({"error": f"{type(err).__name__}: {err}"[:5000], "verdict": "failed"})
        tracker.end("FAILED")
    except Exception as track_err:  # the store itself may be the problem
        log.warning("could not record the failed job in the tracking store: %s", track_err)
    write_failure(out_dir, err, run_id)


def print_crash(err: BaseException) -> None:
    """A crash inside one job of a sweep: its traceback, then the sweep continues."""
    traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)


class SweepCallback(Callback):
    """Hydra callback: the parent run around a multirun, and the summary at its end."""

    def __init__(self) -> None:
        self.parent_id: str | None = None
        self.client: Any = None
        self.started: datetime | None = None
        self.config: DictConfig | None = None
        self._full_error: str | None = None  # the user's HYDRA_FULL_ERROR, restored at the end

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Hydra turns a callback's exception into a warning, so errors are handled here: a user error
        (unknown correction, unreachable tracking server) stops the sweep before any job runs."""
        global _open_sweep

        redact_logs()  # the launcher logs each job's overrides
        announce(config)
        if config.get("dry_run"):
            print("dry run: each job says what it would evaluate; nothing is loaded, evaluated or logged", flush=True)
            return
        try:
            self._start(config)
        except UserError as err:
            print(err.render(), file=sys.stderr, flush=True)
            sys.exit(EXIT_ERROR)
        except Exception as err:
            print_crash(err)
            self.client = None
        self.config = config
        _open_sweep = self
        # Hydra prints an exception out of the multirun as a traceback and exits, before the entry
        # point could close the sweep; with HYDRA_FULL_ERROR=1 it re-raises it instead (only while
        # the sweep is open: composition errors before it keep Hydra's short messages).
        self._full_error = os.environ.get(FULL_ERROR_ENV)
        os.environ[FULL_ERROR_ENV] = "1"

    def _start(self, config: DictConfig) -> None:

        self.started = datetime.now()
        validate(config.sweep.correction, config.sweep.alpha)
        validate(config.sweep.go_correction, None, "sweep.go_correction")
        if config.get("gate") is not None:
            check_policy(config.gate)  # a bad release policy stops the sweep before any job runs
        if config.tracking.name != "mlflow":
            return
        tracker = build(OmegaConf.to_object(config.tracking), "tracking")
        tracker.check()
        from mlflow.tracking import MlflowClient

        experiment = open_experiment(tracker.uri, config.tracking.experiment)
        self.client = MlflowClient(tracking_uri=tracker.uri)
        name = redact_text(config.sweep.name or f"sweep-{self.started:%Y-%m-%d-%H%M%S}")
        overrides = redact_text(" ".join(config.hydra.overrides.task))  # no URL secrets in MLflow
        swept = config.hydra.sweeper.get("params")
        params = redact_tree(OmegaConf.to_container(swept, resolve=True)) if swept else {}
        tags = {"sweep": "parent", "sweep.dir": str(config.hydra.sweep.dir),
                "sweep.overrides": overrides[:5000] or "(none)",
                "sweep.launcher": str(config.hydra.launcher.get("_target_", "")).rpartition(".")[2],
                "sweep.correction": config.sweep.correction,
                "sweep.go_correction": config.sweep.go_correction, "sweep.alpha": str(config.sweep.alpha),
                "mlflow.note.content": "\n".join(["Sweep:", *fenced(f"python -m runner -m {overrides}")]
                                                  + ([f"with sweeper params {text(params)}"] if params else []))}

        tags["runner_commit"] = project_commit()
        tags |= process_tags()
        run = self.client.create_run(experiment.experiment_id, run_name=name, tags=tags)
        self.parent_id = run.info.run_id
        os.environ[PARENT_ENV] = self.parent_id
        log.info("sweep parent run %s (%s) in %s", name, self.parent_id, tracker.uri)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Hydra has just saved the job's configs (and, before the first job, the sweep's ``multirun.yaml``):
        no URL secret stays in them, before anything of the job runs."""
        hydra = config.hydra
        folders = [Path(str(hydra.runtime.output_dir)) / str(hydra.output_subdir)] if hydra.output_subdir else []
        if hydra.mode == RunMode.MULTIRUN:
            folders.append(Path(str(hydra.sweep.dir)))
        redact_saved_configs(*folders)
        redact_logs()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        global _exit_status
        if config.get("dry_run"):
            return
        _exit_status = self.finish(config)

    def finish(self, config: DictConfig, stopped_by: BaseException | None = None) -> int:
        """Close the sweep once: summary (printed, written, logged), dead children and the parent run
        closed. ``stopped_by``: the exception that ended the multirun before all jobs returned; the
        sweep then fails whatever its jobs said. Returns the sweep's exit status."""
        global _open_sweep

        if _open_sweep is self:
            _open_sweep = None
        self._restore_full_error()
        os.environ.pop(PARENT_ENV, None)
        status, exit_status = "FAILED", EXIT_ERROR
        try:
            if self.client is not None:
                close_dead_children(self.client, self.parent_id)
            summary = sweep_summary.build(Path(str(config.hydra.sweep.dir)), config.sweep.correction,
                                          config.sweep.alpha, self.client, self.parent_id,
                                          stopped=None if stopped_by is None else describe_stop(stopped_by),
                                          stop_status=None if stopped_by is None else signal_status(stopped_by),
                                          mode=config.stats.verdicts, on_inconclusive=config.stats.on_inconclusive,
                                          policy=config.get("gate"), go_correction=config.sweep.go_correction)
            print(summary.render(), flush=True)
            exit_status = summary.exit_status

            for path in publish_sweep(config, summary):
                print(f"report: {path}", flush=True)
            if self.client is not None:
                summary.log_to(self.client, self.parent_id)
                experiment = self.client.get_run(self.parent_id).info.experiment_id
                tracking_uri = redact_url(self.client.tracking_uri)
                hint = browse_hint(tracking_uri)
                print(f"tracking: MLflow parent run {self.parent_id} in {tracking_uri} "
                      f"(experiment '{config.tracking.experiment}'); " + (f"browse with: {hint}, then " if hint else "")
                      + f"the runs table: {runs_table_url(ui_address(tracking_uri), experiment)}", flush=True)
            if stopped_by is None:
                status = "FINISHED"
        except Exception as err:
            print_crash(err)
            self._tag_error(err)
        finally:
            if stopped_by is not None:
                self._tag_error(stopped_by)
                status = "KILLED" if isinstance(stopped_by, KeyboardInterrupt) else "FAILED"
            self._close_parent(status)
        return exit_status

    def _restore_full_error(self) -> None:
        if self._full_error is None:
            os.environ.pop(FULL_ERROR_ENV, None)
        else:
            os.environ[FULL_ERROR_ENV] = self._full_error

    def _tag_error(self, err: BaseException) -> None:
        if self.client is None:
            return
        try:
            self.client.set_tag(self.parent_id, "error", describe_stop(err)[:5000])
        except Exception as track_err:  # the store itself may be the problem
            log.warning("could not tag the sweep's parent run with its error: %s", track_err)

    def _close_parent(self, status: str) -> None:
        if self.client is None:
            return
        try:
            self.client.set_terminated(self.parent_id, status=status)
        except Exception as track_err:
            log.warning("could not close the sweep's parent run %s: %s", self.parent_id, track_err)


def close_dead_children(client: Any, parent_id: str) -> None:
    """Child runs still RUNNING when the sweep ends belong to jobs whose process died without closing
    them: mark them KILLED, so no run of the sweep stays RUNNING forever. (A SLURM job that is in fact
    still alive overwrites this with its own status when it ends.)"""
    parent = client.get_run(parent_id)
    running = client.search_runs([parent.info.experiment_id], filter_string=(
        f"tags.mlflow.parentRunId = '{parent_id}' and attributes.status = 'RUNNING'"))
    for run in running:
        client.set_tag(run.info.run_id, "error", DEAD_JOB)
        client.set_terminated(run.info.run_id, status="KILLED")
        log.warning("sweep: child run %s (%s) was still RUNNING: marked KILLED", run.info.run_name, run.info.run_id)


def describe_stop(err: BaseException) -> str:
    """One line for what ended a multirun early (loky's messages span several lines); a signal is named as
    the process's exit status names it (``stopped by SIGTERM``: 143)."""
    if isinstance(err, Terminated):
        return str(err)
    if isinstance(err, KeyboardInterrupt):
        return "interrupted (Ctrl-C)"
    return " ".join(f"{type(err).__name__}: {err}".split())


def signal_status(err: BaseException) -> int | None:
    """The exit status of a sweep a signal stopped (143 SIGTERM, 130 SIGINT), which the summary prints and
    the process exits with; None when something else stopped it (the sweep then fails with 1)."""
    if isinstance(err, Terminated):
        return err.exit_status
    return EXIT_INTERRUPTED if isinstance(err, KeyboardInterrupt) else None


def abort_open_sweep(err: BaseException) -> int | None:
    """Finish the sweep this process has open after its multirun raised instead of returning (a worker
    killed by a signal or the OOM killer, a submitit job that died, Ctrl-C): the summary from the job
    directories, the parent run closed, and a message instead of a traceback. Returns the exit status,
    or None when no sweep was open (the error is not a sweep's)."""
    sweep = _open_sweep
    if sweep is None or sweep.config is None:
        return None
    status = sweep.finish(sweep.config, stopped_by=err)
    print(stop_message(err, sweep.config), file=sys.stderr, flush=True)
    return status


def stop_message(err: BaseException, config: DictConfig) -> str:
    """What the user reads when the multirun stopped before all its jobs returned."""

    if isinstance(err, (CompactHydraException, UserError)):  # e.g. a swept value that does not compose
        return f"error: the sweep stopped: {err}"
    launcher = str(config.hydra.launcher.get("_target_", "")).rpartition(".")[2] or "the launcher"
    if isinstance(err, KeyboardInterrupt):
        what, fix = f"the sweep was {describe_stop(err)}", "rerun the same command to finish it"
    elif "CANCELLED" in str(err):
        what = "the sweep stopped early: the scheduler cancelled a job (scancel, a time limit, preemption)"
        fix = ("the cancelled job is 'incomplete' in the summary; rerun the same command to finish the sweep "
               "(answers already computed come from the generation cache), with a longer "
               "hydra.launcher.timeout_min if the time limit ended it")
    elif _job_died(err):
        what = "the sweep stopped early: a job's process died, and the launcher gave up on the sweep"
        fix = ("a job killed by a signal or the OOM killer leaves no report: look for it as 'incomplete' in the "
               "summary (jobs without a row never started), lower hydra.launcher.n_jobs or the job's memory "
               "use, then rerun the same command: answers already computed come from the generation cache")
    else:
        what = "the sweep stopped early: the launcher raised an error"
        fix = f"the summary lists the jobs that ran; rerun with {FULL_ERROR_ENV}=1 for the full traceback"
    return UserError(what, where=f"hydra/launcher ({launcher})", given=describe_stop(err)[:1000], fix=fix).render()


def _job_died(err: BaseException) -> bool:
    """The launchers' ways of saying a job's process is gone (loky/joblib, concurrent.futures, submitit),
    matched by name so that no launcher library has to be imported."""
    names = {cls.__name__ for cls in type(err).__mro__}
    return bool(names & {"TerminatedWorkerError", "BrokenProcessPool", "UncompletedJobError", "FailedJobError"})
