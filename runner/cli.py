"""Glue between Hydra and :func:`runner.run.run`: exit codes and error printing."""

from __future__ import annotations

import errno
import sys

from omegaconf import DictConfig

from runner.errors import EXIT_ERROR, EXIT_OK, UserError

ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EMFILE, errno.ENAMETOOLONG}
"""Failures of the host, not of the program: a full disk, a read-only or forbidden path."""


def run_job(cfg: DictConfig) -> int:
    """Run one job; in a single run exit with its status, in a multirun return it.

    In a multirun a failing job must not stop the sweep (Hydra's basic launcher stops at the first
    exception, joblib's cancels the rest): every error becomes status 1, is recorded as a FAILED child
    run with its message (``runner.sweep.callback.record_failure``), and the next job runs."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from runner.run import run

    multirun = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    failure: BaseException | None = None
    outcome = None
    try:
        where = ""
        if multirun:
            from runner.sweep.gpus import spread_over_gpus
            from runner.sweep.progress import position

            where = position(HydraConfig.get().job.num)
            if not cfg.dry_run:
                print(f"{where}{cfg.quant.name}-{cfg.task.name}", flush=True)
                spread_over_gpus(cfg, HydraConfig.get().job.num)
        if cfg.dry_run:
            from runner.dry_run import dry_run

            dry_run(cfg, where)
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
        from runner.sweep.callback import print_crash

        print_crash(err)
        status, failure = EXIT_ERROR, err
    if multirun:
        if failure is not None:
            from runner.sweep.callback import record_failure

            record_failure(cfg, failure)
        return status  # the sweep writes the CI reports of all its jobs
    if failure is not None or not cfg.dry_run:  # a dry run that worked reports nothing
        from runner.exports.publish import publish_job

        for path in publish_job(cfg, outcome, failure):
            print(f"report: {path}", flush=True)
    sys.exit(status)


def environment_error(err: OSError) -> UserError:
    """A full disk or a forbidden path as a message; the job's results written so far stay on disk."""
    what = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
            errno.EROFS: "the file system is read-only", errno.EMFILE: "too many open files",
            errno.ENAMETOOLONG: "a file name is too long"}.get(err.errno, "permission denied")
    return UserError(f"the job stopped: {what}", where=err.filename or "a file the job writes",
                     given=f"{type(err).__name__}: {err.strerror}",
                     fix="free space or fix the permissions (output_dir, cache.path, RUNNER_CACHE_DIR, "
                     "the MLflow store), then rerun: the generation cache keeps what was already computed")
