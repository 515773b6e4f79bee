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
  (``runner.sweep_summary``), logs it to the parent run, closes the parent, and leaves the sweep's
  exit status for the entry point (:func:`take_exit_status`).
- A job that fails before its own run starts (a bad override, a missing library) still gets a
  FAILED child run with its error (:func:`record_failure`), and the sweep goes on.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("runner")
PARENT_ENV = "RUNNER_SWEEP_PARENT_RUN_ID"
_exit_status: int | None = None


def parent_run_id() -> str | None:
    """The sweep's parent run id when this job belongs to a tracked sweep (an id only locates a run)."""
    return os.environ.get(PARENT_ENV) or None


def take_exit_status() -> int | None:
    """The last sweep's exit status (None when no sweep ran in this process), reset on read."""
    global _exit_status
    status, _exit_status = _exit_status, None
    return status


def spread_over_gpus(cfg: DictConfig, job_num: int) -> None:
    """One job per GPU: with ``backend.device=auto`` and several visible GPUs, job k of a sweep runs
    on ``cuda:(k mod count)``, so parallel launchers (joblib with n_jobs = GPU count) do not all
    land on cuda:0. The choice is written into the job's config, hence logged with the run."""
    if cfg.backend.get("device") != "auto":
        return
    import torch

    count = torch.cuda.device_count()
    if count > 1:
        cfg.backend.device = f"cuda:{job_num % count}"
        log.info("sweep job %d runs on %s (%d GPUs visible)", job_num, cfg.backend.device, count)


def record_failure(cfg: DictConfig, err: BaseException) -> None:
    """Make a failed job visible in the sweep: ``failure.json``, and a FAILED child run when the
    error came before the job's own run existed. Never raises: the sweep must go on."""
    from runner.job import run_identity, write_failure

    out_dir = Path(cfg.output_dir)
    if (out_dir / "failure.json").is_file():
        return  # the job's own run recorded it
    run_id = None
    try:
        from runner.build import build_object
        from runner.provenance import flatten

        tracker = build_object(cfg.tracking)
        tracker.check()
        run_name, tags = run_identity(cfg)
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

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Hydra turns a callback's exception into a warning, so errors are handled here: a user error
        (unknown correction, unreachable tracking server) stops the sweep before any job runs."""
        from runner.errors import EXIT_ERROR, UserError

        try:
            self._start(config)
        except UserError as err:
            print(err.render(), file=sys.stderr, flush=True)
            sys.exit(EXIT_ERROR)
        except Exception as err:
            print_crash(err)
            self.client = None

    def _start(self, config: DictConfig) -> None:
        from runner.multiple_testing import validate

        self.started = datetime.now()
        validate(config.sweep.correction, config.sweep.alpha)
        if config.tracking.name != "mlflow":
            return
        from runner.build import build_object

        tracker = build_object(config.tracking)
        tracker.check()
        import mlflow
        from mlflow.tracking import MlflowClient

        logging.getLogger("mlflow").setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)
        mlflow.set_tracking_uri(tracker.uri)
        experiment = mlflow.set_experiment(config.tracking.experiment)
        from runner.tracking import mark_model_experiment

        mark_model_experiment(experiment, tracker.uri)
        self.client = MlflowClient(tracking_uri=tracker.uri)
        name = config.sweep.name or f"sweep-{self.started:%Y-%m-%d-%H%M%S}"
        overrides = " ".join(config.hydra.overrides.task)
        swept = config.hydra.sweeper.get("params")
        params = OmegaConf.to_container(swept, resolve=True) if swept else {}
        tags = {"sweep": "parent", "sweep.dir": str(config.hydra.sweep.dir),
                "sweep.overrides": overrides[:5000] or "(none)",
                "sweep.launcher": str(config.hydra.launcher.get("_target_", "")).rpartition(".")[2],
                "sweep.correction": config.sweep.correction, "sweep.alpha": str(config.sweep.alpha),
                "mlflow.note.content": f"Sweep `python -m runner -m {overrides}`"
                + (f" with sweeper params {params}" if params else "")}
        from runner.provenance import project_commit

        tags["runner_commit"] = project_commit()
        run = self.client.create_run(experiment.experiment_id, run_name=name, tags=tags)
        self.parent_id = run.info.run_id
        os.environ[PARENT_ENV] = self.parent_id
        log.info("sweep parent run %s (%s) in %s", name, self.parent_id, tracker.uri)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        global _exit_status
        from runner import sweep_summary

        os.environ.pop(PARENT_ENV, None)
        status = "FAILED"
        try:
            summary = sweep_summary.build(Path(str(config.hydra.sweep.dir)), config.sweep.correction,
                                          config.sweep.alpha, self.client, self.parent_id)
            print(summary.render(), flush=True)
            _exit_status = summary.exit_status
            if self.client is not None:
                summary.log_to(self.client, self.parent_id)
                print(f"tracking: MLflow parent run {self.parent_id} in {self.client.tracking_uri} "
                      f"(experiment '{config.tracking.experiment}')", flush=True)
            status = "FINISHED"
        except Exception as err:
            _exit_status = 1
            print_crash(err)
            if self.client is not None:
                self.client.set_tag(self.parent_id, "error", f"{type(err).__name__}: {err}"[:5000])
        finally:
            if self.client is not None:
                self.client.set_terminated(self.parent_id, status=status)
