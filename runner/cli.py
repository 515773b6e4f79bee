"""Glue between Hydra and :func:`runner.job.run`: exit codes and error printing."""

from __future__ import annotations

import sys

from omegaconf import DictConfig

from runner.errors import EXIT_ERROR, UserError


def run_job(cfg: DictConfig) -> int:
    """Run one job; in a single run exit with its status, in a multirun return it."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from runner.job import run

    multirun = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        outcome = run(cfg)
        status = outcome.exit_status
    except UserError as err:
        print(err.render(), file=sys.stderr, flush=True)
        status = EXIT_ERROR
    if multirun:
        return status
    sys.exit(status)
