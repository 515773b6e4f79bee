"""Aggregate helpers every task shares: the mean metric, the rate metric and per-group means.

Each keeps the arithmetic the tasks' references were recorded with (``sum / n``; a rate is
``100 * count / n``), so a figure computed here is the same float as before, to the last bit.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Sequence


def mean(values: Iterable[float]) -> float:
    """The plain mean (``nan`` for no values): per-sample scores on the metric's scale stay on it."""
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def rate(flags: Iterable[Any]) -> float:
    """The share of true flags in percent (``nan`` for no flags): ``100 * count / n``."""
    flags = [bool(f) for f in flags]
    return 100.0 * sum(flags) / len(flags) if flags else float("nan")


def group_means(scored: Sequence[Any], key: str, prefix: str) -> dict[str, float]:
    """``{"<prefix>/<group>": mean score}`` per value of ``meta[key]`` (a subject, a domain), sorted by group."""
    groups: dict[str, list[float]] = defaultdict(list)
    for s in scored:
        groups[s.meta[key]].append(s.score)
    return {f"{prefix}/{group}": mean(scores) for group, scores in sorted(groups.items())}
