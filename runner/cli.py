"""Glue between Hydra and :func:`runner.run.run`: exit codes and error printing."""

from __future__ import annotations

import sys

from omegaconf import DictConfig

from runner.errors import EXIT_ERROR, UserError


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
    try:
        if multirun:
            from runner.sweep.gpus import spread_over_gpus

            spread_over_gpus(cfg, HydraConfig.get().job.num)
        outcome = run(cfg)
        status = outcome.exit_status
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
        return status
    sys.exit(status)
