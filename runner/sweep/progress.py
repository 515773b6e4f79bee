"""Where a sweep stands: "job k of N" and the time since it started, for the log of each job.

The sweep's size is the product of its swept values (the command line's ``a,b,c`` and ``range(...)``
overrides and ``hydra.sweeper.params``); the callback puts it and the start time in the environment
its jobs inherit (they locate the job in the sweep, they change no result)."""

from __future__ import annotations

import math
import os
import time
from typing import Any, Iterable

from hydra.core.override_parser.overrides_parser import OverridesParser

SIZE_ENV, STARTED_ENV = "RUNNER_SWEEP_SIZE", "RUNNER_SWEEP_STARTED"


def sweep_size(overrides: Iterable[str]) -> int | None:

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:
        return None
    sizes = [len(list(o.sweep_string_iterator())) for o in parsed if o.is_sweep_override()]
    return math.prod(sizes) if sizes else 1


def announce(config: Any) -> None:
    params = config.hydra.sweeper.get("params") or {}
    overrides = list(config.hydra.overrides.task) + [f"{k}={v}" for k, v in params.items()]
    size = sweep_size(overrides)
    if size:
        os.environ[SIZE_ENV] = str(size)
    os.environ[STARTED_ENV] = f"{time.time():.0f}"


def position(job_num: int) -> str:
    """``job 3 of 6, 2 min 10 s into the sweep: `` (what is known of it)."""
    size = os.environ.get(SIZE_ENV)
    started = os.environ.get(STARTED_ENV)
    text = f"job {job_num + 1}" + (f" of {size}" if size else "")
    if started:
        elapsed = max(0, int(time.time() - float(started)))
        text += f", {elapsed // 60} min {elapsed % 60} s into the sweep"
    return text + ": "
