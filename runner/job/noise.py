"""The reference's measured noise, read for the job's decision (``reference.floor``): the floor, the host
differences and the replicates as data (:class:`runner.stats.data.noise.MeasuredNoise`), which the decision applies
(:func:`runner.stats.dispatch.floored`). A tolerance at or below the floor is refused before any request: GO cannot be
shown there.
"""

from __future__ import annotations

from runner.contract.errors import ConfigError
from runner.contract.fingerprint import describe_differences, differences
from runner.job.state import Job
from runner.references.noise import host_of, replicates_of
from runner.stats.data.noise import MeasuredNoise
from runner.stats.numerics.noise import floor

FLOOR_MODES = ("auto", "host_differs", "off")
"""``reference.floor``: auto (whenever the entry has a replicate of a continuous metric), host_differs (only when
this run's host fingerprint differs from the entry's), off (the verdict ignores the measured noise)."""


def measured(job: Job) -> MeasuredNoise | None:
    """What the decision needs of the reference's measured noise (None: no reference); read once, when the job has
    found its reference and knows its own host."""
    if job.reference is None:
        return None
    replicates = tuple(replicates_of(job.reference))
    recorded = host_of(job.reference.recorded)
    differ = differences(recorded, job.host) if recorded is not None else []
    mode = job.config.reference.floor
    continuous = [r for r in replicates if r.worse is None]  # a 0/100 metric's replicates keep their exact rules
    line = None
    if mode != "off" and continuous and not (mode == "host_differs" and recorded is not None and not differ):
        line = floor(continuous)
    return MeasuredNoise(line, mode, describe_differences(differ) if differ else None, replicates)


def check_tolerance(job: Job) -> None:
    """Before any request: a tolerance at or below the floor (``job.noise``, :func:`measured`) is refused (a GO claim
    cannot be shown there)."""
    line = job.noise.floor if job.noise is not None else None
    if line is None or job.tolerance is None or job.tolerance.points > line:
        return
    raise ConfigError("the tolerance is within the reference's measured noise: GO cannot be shown there",
                      where=f"the tolerance ({job.tolerance.source})", given=f"{job.tolerance.points:.4g} points",
                      allowed=f"more than the A/A floor {line:.4g} (the reference's replicate, recorded.noise)",
                      fix="set a larger tolerance (stats.tolerance), or reference.floor=off to ignore the measured "
                          "noise (the verdict then holds its alpha against sampling noise only)")
