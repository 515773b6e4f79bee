"""``gate``: a release policy (``conf/gate/<name>.yaml``), its schema and its checks.

A policy lists the tasks of a release by ``task.name`` (the ``name:`` of ``conf/task/<option>.yaml``;
``task=mmlu_0shot`` is MMLU with name ``mmlu``) with a tier, and optionally the tolerance, alpha and
beta that task is judged with. Each job applies its own task's entry (:mod:`runner.config.gate`); the
sweep turns the jobs into one release verdict (:mod:`runner.sweep.release`, rules in
:mod:`runner.stats.rules.release`). ``gate=null`` (the default) leaves jobs and sweeps exactly as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING

from runner.contract.errors import ConfigError
from runner.stats.rules.release import CRITICAL, RELEASE_CORRECTIONS, TIERS
from runner.stats.data.tolerance import UNITS

UNLISTED = ("error", "advisory")
"""What a task that runs in the sweep but is not in the policy is: an error (the release fails, and the job
refuses to start) or advisory (reported only, with a note)."""


@dataclass
class GateTask:
    """One task of a release policy."""

    tier: str = MISSING  # critical (a NO-GO blocks) | supporting (more than K NO-GOs block) | advisory (reported)
    # GO needs the drop shown smaller than this; null: the job's own (stats.tolerance, the task's tolerance, its
    # designed theta). Replaces stats.tolerance for this task's job, so it means what stats.tolerance means:
    tolerance: Optional[float] = None
    tolerance_unit: str = "points"  # points (metric points, e.g. 2 = 2 accuracy points) | percent (of the reference)
    alpha: Optional[float] = None  # replaces the task's alpha (both claims of its test); null: the task's
    beta: Optional[float] = None  # replaces the task's beta (its designed theta, its advice); null: the task's


@dataclass
class GateConfig:
    """A release policy: the tasks of a release, their tiers, and how many supporting NO-GOs are tolerated."""

    name: str = MISSING
    max_supporting_failures: int = 0  # K: more than K supporting tasks NO-GO blocks the release
    # holm | bh | none | graph: over the NO-GO claims of the critical and supporting tiers, one family; graph: the
    # critical tasks hold critical_share of alpha, the supporting ones the rest, a rejected task passes its share on
    # (Bretz et al. 2009): more power for a critical task beside many supporting ones (docs/release-gates.md)
    correction: str = "holm"
    critical_share: float = 0.8
    unlisted: str = "error"  # a task run but not listed: error (the release fails) | advisory (reported only)
    tasks: dict[str, GateTask] = field(default_factory=dict)


def check_policy(gate: Any) -> None:
    """Raise :class:`ConfigError` (where, what was given, what is allowed) for a policy that cannot be used."""
    name = gate.name
    where = f"gate ({name})"
    k = gate.max_supporting_failures
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ConfigError("the number of supporting NO-GOs a release tolerates must be a whole number >= 0",
                          where=f"{where}: gate.max_supporting_failures", given=repr(k),
                          allowed="0 (any supporting NO-GO blocks the release), 1, 2, ...")
    share = getattr(gate, "critical_share", 0.8)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < share <= 1.0:
        raise ConfigError("the critical tasks' share of alpha must be a number in (0, 1]",
                          where=f"{where}: gate.critical_share", given=repr(share),
                          allowed="0.8 (the default), 0.9; 1 leaves the supporting tasks nothing until every "
                                  "critical one is rejected")
    for key, value, allowed in (("correction", gate.correction, RELEASE_CORRECTIONS),
                                ("unlisted", gate.unlisted, UNLISTED)):
        if value not in allowed:
            raise ConfigError(f"unknown value of gate.{key}", where=f"{where}: gate.{key}", given=str(value),
                              allowed=", ".join(allowed))
    if not gate.tasks:
        raise ConfigError("the release policy lists no task", where=f"{where}: gate.tasks", given="{}",
                          fix="list each task of the release with its tier, e.g. tasks: {mmlu: {tier: critical}}")
    for task, entry in gate.tasks.items():
        _check_entry(f"{where}: gate.tasks.{task}", entry)
    if not any(entry.tier == CRITICAL for entry in gate.tasks.values()):
        raise ConfigError("a release policy needs at least one critical task (a release is GO when every "
                          "critical task is GO)", where=f"{where}: gate.tasks",
                          given=", ".join(f"{t}: {e.tier}" for t, e in gate.tasks.items()),
                          fix="make the task the release stands or falls on critical")


def _check_entry(where: str, entry: Any) -> None:
    if entry.tier not in TIERS:
        raise ConfigError("unknown tier", where=f"{where}.tier", given=str(entry.tier), allowed=", ".join(TIERS))
    if entry.tolerance_unit not in UNITS:
        raise ConfigError("unknown tolerance unit", where=f"{where}.tolerance_unit", given=str(entry.tolerance_unit),
                          allowed=", ".join(UNITS))
    checks = (("tolerance", lambda v: v > 0, "a finite number > 0 (points, or percent with tolerance_unit: percent)"),
              ("alpha", lambda v: 0 < v < 0.5, "a probability in (0, 0.5), e.g. 0.05"),
              ("beta", lambda v: 0 < v < 0.5, "a probability in (0, 0.5), e.g. 0.2"))
    for key, ok, allowed in checks:
        value = getattr(entry, key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not ok(value):
            raise ConfigError(f"{key} out of range", where=f"{where}.{key}", given=repr(value),
                              allowed=f"{allowed}; null: the task's own")
