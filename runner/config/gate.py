"""A job under a release policy (``gate=<name>``): its task's entry changes how the job is judged.

The policy's tolerance (with its unit), alpha and beta for the job's task are written into the composed
config before it is typed (``stats.tolerance``/``stats.tolerance_unit``, ``task.alpha``, ``task.beta``), so
the job decides with them and they appear where every setting of a job appears: its ``config.yaml``, its
MLflow params (``task.alpha``, ``stats.tolerance``, ``gate.*``) and its report. A task the policy does not
list is refused before any model loads (``gate.unlisted: error``) or runs with its own settings
(``advisory``).
"""

from __future__ import annotations

import logging

from omegaconf import DictConfig

from runner.contract.errors import ConfigError
from runner.sweep.policy import check_policy

log = logging.getLogger("runner")


def apply_policy(cfg: DictConfig) -> None:
    """Write the policy's entry for ``cfg.task.name`` into ``cfg`` (no policy: nothing changes)."""
    gate = cfg.get("gate")
    if gate is None:
        return
    check_policy(gate)
    task = cfg.task.name
    entry = gate.tasks.get(task)
    if entry is None:
        if gate.unlisted == "error":
            raise ConfigError(f"task {task} is not in the release policy {gate.name}", where=f"gate.tasks ({gate.name})",
                              given=f"task.name={task}", allowed=", ".join(gate.tasks),
                              fix=f"add {task} to conf/gate/{gate.name}.yaml with a tier (advisory: reported only), "
                                  "set gate.unlisted=advisory, or leave the task out of the sweep")
        log.info("gate %s: task %s is not in the policy: advisory (reported only), judged with its own settings",
                 gate.name, task)
        return
    changes = []
    if entry.tolerance is not None:
        given = (cfg.stats.tolerance, cfg.stats.tolerance_unit)
        if given[0] is not None and given != (entry.tolerance, entry.tolerance_unit):
            raise ConfigError("two tolerances for one task: the release policy's and stats.tolerance",
                              where=f"gate.tasks.{task}.tolerance ({gate.name})",
                              given=f"policy {entry.tolerance:g} {entry.tolerance_unit}, "
                                    f"stats.tolerance {given[0]:g} {given[1]}",
                              fix="drop stats.tolerance (the policy decides), or change the policy")
        cfg.stats.tolerance, cfg.stats.tolerance_unit = entry.tolerance, entry.tolerance_unit
        changes.append(f"tolerance {entry.tolerance:g} {entry.tolerance_unit}")
    for key in ("alpha", "beta"):
        value = entry.get(key)
        if value is not None:
            changes.append(f"{key} {value:g} (task's {cfg.task[key]:g})")
            cfg.task[key] = value
    log.info("gate %s: task %s is %s%s", gate.name, task, entry.tier,
             f"; judged with {', '.join(changes)}" if changes else "")
