"""One job (alone or in a sweep) inside Hydra: :func:`runner.job.flow.run`, its exit status, its user errors
printed without a traceback, its CI reports."""

from __future__ import annotations

import errno
import sys
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from runner.contract.errors import EXIT_ERROR, EXIT_OK, UserError
from runner.files.redaction import redact_saved_configs
from runner.job.dry_run import dry_run
from runner.job.flow import asked_num_samples, run, typed
from runner.reports.ci import JobLabel, publish_job
from runner.reports.config import ReportConfig
from runner.sweep.callback import print_crash, record_failure
from runner.sweep.gpus import spread_over_gpus
from runner.sweep.progress import position

ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EMFILE, errno.ENAMETOOLONG}
"""Failures of the host, not of the program: a full disk, a read-only or forbidden path."""


def run_job(cfg: DictConfig) -> int:
    """Run one job; in a single run exit with its status, in a multirun return it.

    In a multirun a failing job must not stop the sweep (Hydra's basic launcher stops at the first
    exception, joblib's cancels the rest): every error becomes status 1, is recorded as a FAILED child
    run with its message (``runner.sweep.callback.record_failure``), and the next job runs."""
    multirun = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    if HydraConfig.initialized() and HydraConfig.get().runtime.output_dir:
        # Hydra saved the overrides before this job: redacted before any check can stop it
        redact_saved_configs(Path(HydraConfig.get().runtime.output_dir) / ".hydra")
    failure: BaseException | None = None
    outcome = None
    try:
        where = ""
        if multirun:
            where = position(HydraConfig.get().job.num)
            if not cfg.dry_run:
                print(f"{where}{cfg.quant.name}-{cfg.task.name}", flush=True)
                device = spread_over_gpus(OmegaConf.to_object(cfg.backend), HydraConfig.get().job.num)
                if device is not None:
                    cfg.backend.device = device  # written into the job's config, hence logged with the run
        if cfg.dry_run:
            config = typed(cfg)
            dry_run(config, where, asked_num_samples(cfg, config))
            status = EXIT_OK
        else:
            outcome = run(cfg)
            status = outcome.exit_status
    except OSError as err:
        if err.errno not in ENVIRONMENT_ERRNOS:
            raise
        message = environment_error(err)
        print(message.render(), file=sys.stderr, flush=True)
        status, failure = EXIT_ERROR, message
    except UserError as err:
        print(err.render(), file=sys.stderr, flush=True)
        status, failure = EXIT_ERROR, err
    except Exception as err:
        if not multirun:
            raise
        print_crash(err)
        status, failure = EXIT_ERROR, err
    if multirun:
        if failure is not None:
            record_failure(cfg, failure)
        return status  # the sweep writes the CI reports of all its jobs
    unwritable = isinstance(failure, UserError) and str(failure.where or "").startswith("report.")
    if (failure is not None or not cfg.dry_run) and not unwritable:  # a dry run that worked reports nothing
        try:
            for path in publish_job(job_label(cfg), outcome, failure):
                print(f"report: {path}", flush=True)
        except OSError as err:  # checked before the job; the place changed since: the job's own outputs are kept
            print(UserError("the CI report could not be written; the job's results are in its output directory",
                            where=str(err.filename or "report.junit / report.markdown"),
                            given=f"{type(err).__name__}: {err.strerror or err}",
                            fix="choose a writable file for report.junit / report.markdown").render(),
                  file=sys.stderr, flush=True)
            status = status or EXIT_ERROR
    sys.exit(status)


def job_label(cfg: DictConfig) -> JobLabel:
    """How the job's CI reports name it, read from the composed config (typed or not: it may be the mistake)."""
    def value(key: str) -> object:  # a value that does not resolve (a missing ???) is shown as such
        return OmegaConf.select(cfg, key, default="???", throw_on_missing=False, throw_on_resolution_failure=False)

    return JobLabel(*(value(k) for k in ("quant.name", "task.name", "model.name", "model.hf_id", "reference.mode",
                                         "stats.verdicts", "stats.on_inconclusive")),
                    ReportConfig(value("report.junit"), value("report.markdown")))


def environment_error(err: OSError) -> UserError:
    """A full disk or a forbidden path as a message; the job's results written so far stay on disk."""
    what = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
            errno.EROFS: "the file system is read-only", errno.EMFILE: "too many open files",
            errno.ENAMETOOLONG: "a file name is too long"}.get(err.errno, "permission denied")
    return UserError(f"the job stopped: {what}", where=err.filename or "a file the job writes",
                     given=f"{type(err).__name__}: {err.strerror}",
                     fix="free space or fix the permissions (output_dir, cache.path, RUNNER_CACHE_DIR, "
                     "the MLflow store), then rerun: the generation cache keeps what was already computed")
