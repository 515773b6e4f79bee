"""The reference's measured noise in the job's decision (``reference.floor``).

A continuous paired rule tests its NO-GO claim against the larger of the margin and the A/A replicate's shift
bound (the floor): a NO-GO at the margin that is not one at the floor is INCONCLUSIVE, "within the measured noise",
and more samples are not advised (they cannot move a systematic shift). A tolerance at or below the floor is
refused before any request: GO cannot be shown there. 0/100 rules keep their p-values (a symmetric flip only costs
power); an exact rule or explicit threshold that fails on another host, where the replicate fails the same way, is
labelled so.
"""

from __future__ import annotations

from collections.abc import Callable

from runner.contract.errors import ConfigError
from runner.contract.fingerprint import describe_differences, differences
from runner.job.state import Job
from runner.references.noise import host_of, replicates_of
from runner.stats.decision import Decision
from runner.stats.data.noise import Replicate
from runner.stats.numerics.noise import floor
from runner.stats.settings import margin_points
from runner.stats.data.verdicts import NO_GO

FLOOR_MODES = ("auto", "host_differs", "off")
"""``reference.floor``: auto (whenever the entry has a replicate of a continuous metric), host_differs (only when
this run's host fingerprint differs from the entry's), off (the verdict ignores the measured noise)."""


def continuous_replicates(job: Job) -> list[Replicate]:
    """The reference entry's replicates of a continuous metric (a 0/100 metric's keep their exact rules)."""
    return [r for r in replicates_of(job.reference) if r.worse is None] if job.reference is not None else []


def floor_for(job: Job) -> float | None:
    """The floor the NO-GO claim of a continuous paired rule is tested against (None: it does not apply)."""
    mode = job.config.reference.floor
    replicates = continuous_replicates(job)
    if mode == "off" or not replicates or job.reference is None:
        return None
    recorded = host_of(job.reference.recorded)
    if mode == "host_differs" and recorded is not None and not differences(recorded, job.host):
        return None
    return floor(replicates)


def check_tolerance(job: Job) -> None:
    """Before any request: a tolerance at or below the floor is refused (a GO claim cannot be shown there)."""
    line = floor_for(job)
    if line is None or job.tolerance is None or job.tolerance.points > line:
        return
    raise ConfigError("the tolerance is within the reference's measured noise: GO cannot be shown there",
                      where=f"the tolerance ({job.tolerance.source})", given=f"{job.tolerance.points:.4g} points",
                      allowed=f"more than the A/A floor {line:.4g} (the reference's replicate, recorded.noise)",
                      fix="set a larger tolerance (stats.tolerance), or reference.floor=off to ignore the measured "
                          "noise (the verdict then holds its alpha against sampling noise only)")


def with_floor(job: Job, decision: Decision, redo: Callable[[float], Decision]) -> Decision:
    """``decision`` (at the stated margin) with the floor applied: ``redo(margin)`` decides again at the floor when it
    is above the margin and a continuous paired rule decided."""
    line = floor_for(job)
    if line is None or decision.paired is None or decision.paired.discordant is not None or decision.claims is None:
        return decision
    assert job.reference is not None
    margin = margin_points(job.config.stats, job.reference.value)
    if line <= margin:
        decision.notes.append(f"noise floor {line:.4g} (the reference's A/A replicate) is within the margin {margin:g}")
        return decision
    raised = redo(line)
    raised.noise_floor, raised.stated_margin = line, margin
    raised.notes.append(f"noise floor: the NO-GO claim is tested against {line:.4g} = max(margin {margin:g}, the "
                        f"A/A shift's one-sided upper bound {line:.4g}) (reference.floor={job.config.reference.floor})")
    if decision.outcome == NO_GO and raised.outcome != NO_GO:
        raised.within_noise = True
        raised.notes.append(f"within the measured noise: a regression > {margin:g} is shown at the stated margin, but "
                            f"not one > the A/A floor {line:.4g}; more samples cannot move a systematic shift")
    return raised


def host_failure_note(job: Job, decision: Decision) -> str | None:
    """An exact rule or explicit threshold that failed on a host other than the reference's, where the entry's
    replicate fails the same way (it lost a sample an exact rule counts, or its shift reaches the line)."""
    if decision.rule not in ("explicit_threshold", "exact") or decision.outcome != NO_GO or job.reference is None:
        return None
    recorded = host_of(job.reference.recorded)
    differ = differences(recorded, job.host) if recorded is not None else []
    reference = job.reference.value
    line = job.reference.threshold if job.reference.threshold is not None else reference
    room = abs(reference - line)
    failing = [r for r in replicates_of(job.reference)
               if (r.worse or 0) > 0 or (decision.rule == "explicit_threshold" and r.floor >= room)]
    if not differ or not failing:
        return None
    return (f"this failure is on a host other than the reference's ({describe_differences(differ)}), and the "
            f"reference's A/A replicate fails the same rule ({failing[0].describe()}): it may be the system's noise")
