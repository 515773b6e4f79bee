"""Names in an lm-eval task's config that make lm-eval import Python without a ``!function`` tag.

lm-eval resolves a ``metric_list`` entry that is not in its metric registry (or has ``hf_evaluate: true``)
with ``evaluate.load``, which imports a local script (``/path/m.py``, a directory ``D`` holding ``D/D.py``) or,
online, fetches one from the Hub and runs it. Such a name is code, like a ``!function`` tag, and needs
``task.trust_include_code=true``. Names lm-eval would silently drop are refused outright: a ``process_results``
that is not a function (lm-eval ignores it and scores the task its default way), a filter or aggregation that
is not registered. Checked on the config as read, before lm-eval builds the task.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from runner.contract.errors import ConfigError


class NamedFunction(str):
    """A ``!function`` value read without importing it (already counted as code by the tag check)."""


@dataclass
class Names:
    """What a task file's config names: code (needs trust), and names lm-eval would drop or fail on."""

    code: list[tuple[str, str]] = field(default_factory=list)  # (metric name, why it is code)
    unknown: list[str] = field(default_factory=list)


def registries() -> tuple[Any, Any, Any]:
    """lm-eval's metric, filter and aggregation registries, filled (installed code)."""
    import lm_eval.api.metrics  # noqa: F401 - registers the metrics and aggregations
    import lm_eval.filters  # noqa: F401 - registers the filters
    from lm_eval.api.registry import aggregation_registry, filter_registry, metric_registry

    return metric_registry, filter_registry, aggregation_registry


def scan(cfg: Any) -> Names:
    """Every mapping in ``cfg`` (a task, a group's inline tasks) checked for metrics, ``process_results`` and
    filters that name code or nothing lm-eval knows."""
    metrics, filters, aggregations = registries()
    names = Names()
    for node in _mappings(cfg):
        for entry in _list(node.get("metric_list")):
            if isinstance(entry, dict):
                _metric(entry, metrics, aggregations, names)
        if "process_results" in node:
            value = node["process_results"]
            if not isinstance(value, NamedFunction) and not callable(value) and value is not None:
                names.unknown.append(f"process_results: {value!r} (not a !function: lm-eval would ignore it)")
        for pipeline in _list(node.get("filter_list")):
            for step in _list(pipeline.get("filter")) if isinstance(pipeline, dict) else []:
                function = step.get("function") if isinstance(step, dict) else None
                if isinstance(function, str) and not isinstance(function, NamedFunction) and function not in filters:
                    names.unknown.append(f"filter function: {function!r} (not a registered lm-eval filter)")
    return names


def _metric(entry: dict[str, Any], metrics: Any, aggregations: Any, names: Names) -> None:
    name = entry.get("metric")
    if isinstance(name, str) and not isinstance(name, NamedFunction):
        if entry.get("hf_evaluate") is True:
            names.code.append((name, "hf_evaluate: true: evaluate.load imports it"))
        elif name not in metrics:
            names.code.append((name, "not a registered lm-eval metric: evaluate.load would import it"))
    aggregation = entry.get("aggregation")
    if isinstance(aggregation, str) and not isinstance(aggregation, NamedFunction) and aggregation not in aggregations:
        names.unknown.append(f"aggregation: {aggregation!r} (not a registered lm-eval aggregation)")


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def described(names: Names) -> list[str]:
    """The code names as a refusal lists them."""
    return [f"metric: {name} ({why})" for name, why in names.code]


def _mappings(value: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            out.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


def check_unknown(names: Names, where: str) -> None:
    """Refuse names lm-eval would silently drop or fail on, whatever the trust."""
    if names.unknown:
        raise ConfigError("an lm-eval task file names a function lm-eval does not have", where=where,
                          given="; ".join(names.unknown[:5]),
                          allowed="registered lm-eval names, or !function with task.trust_include_code=true",
                          fix="name a registered metric, filter or aggregation, or write the function in a module "
                              "and name it with !function")


def check_offline(names: Names, where: str) -> None:
    """With consent, a metric that is not a local script would be fetched from the Hub: offline it cannot be."""
    from huggingface_hub import constants

    remote = [name for name, _ in names.code if not _local_script(name)]
    if remote and constants.HF_HUB_OFFLINE:
        raise ConfigError("an lm-eval metric is neither registered nor a local metric script, and the Hub is offline",
                          where=where, given=", ".join(remote[:5]),
                          fix="name a registered lm-eval metric, or a local evaluate script (a .py file or a directory "
                              "D holding D/D.py)")


def _local_script(name: str) -> bool:
    """What ``evaluate.load`` reads from disk: a ``.py`` file, or a directory ``D`` holding ``D/D.py``."""
    if name.endswith(".py"):
        return os.path.isfile(name)
    return os.path.isfile(os.path.join(name, os.path.basename(os.path.normpath(name)) + ".py"))
