"""``python -m runner``: a thin Hydra shell around :func:`runner.job.run`.

Hydra composes the job; this module only converts the result of :func:`run` into an exit
status, and prints user errors without a traceback.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from runner.schema import register_schemas


@hydra.main(version_base="1.3", config_path="pkg://conf", config_name="config")
def main(cfg: DictConfig) -> int:
    from runner.cli import run_job

    return run_job(cfg)


def entry() -> None:
    """Console-script entry point (``runner``)."""
    register_schemas()
    main()
    from runner.sweep import take_exit_status

    status = take_exit_status()  # a multirun: the sweep's verdict (runner/sweep.py)
    if status:
        sys.exit(status)


if __name__ == "__main__":
    entry()
