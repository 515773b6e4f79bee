"""Where a task's rows come from (``task.dataset``): the source ``auto`` resolves to, and a loader
for one split of a local copy or the Hub. Shared by the tasks whose packaged copy lacks the
split few-shot examples come from (GSM8K, GPQA)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from runner.contract.errors import ConfigError, DataError
from runner.files.datasets import load_hub, load_local

SOURCES = ("auto", "hub", "local", "packaged")


def check_source(dataset: Any) -> None:
    if dataset.source not in SOURCES:
        raise ConfigError("unknown dataset source", where="task.dataset.source", given=dataset.source,
                          allowed=", ".join(SOURCES))


def resolve_source(dataset: Any) -> str:
    """``auto`` is ``local`` when a path is set, else ``packaged`` (never the network by surprise)."""
    if dataset.source == "auto":
        return "local" if dataset.local_path else "packaged"
    return dataset.source


def split_loader(dataset: Any, source: str, alternatives: str) -> tuple[str, Callable[[str], Any]]:
    """``(where, load)`` for a local or Hub source; ``load(split)`` returns a ``datasets`` table."""
    if source == "local":
        if not dataset.local_path:
            raise ConfigError("task.dataset.source=local needs a path", where="task.dataset.local_path",
                              given=None, fix="set task.dataset.local_path=/path/to/data")
        where = "task.dataset.local_path"

        def load(split: str) -> Any:
            # A single file holds one split only: it is the evaluated split, never the examples' one.
            if Path(dataset.local_path).expanduser().is_file() and split != dataset.split:
                raise DataError(f"a single data file has no '{split}' split", where=where, given=dataset.local_path)
            return load_local(dataset.local_path, split, dataset.hub_config, where, dataset.max_file_mb)
        return where, load
    where = f"task.dataset.hub_id={dataset.hub_id}"
    return where, lambda split: load_hub(dataset.hub_id, dataset.hub_config, split, where, alternatives)


def optional_split(load: Callable[[str], Any], split: str) -> Any | None:
    """A split the source may lack (few-shot examples): None instead of an error."""
    try:
        return load(split)
    except DataError:
        return None
