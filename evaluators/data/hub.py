"""Rows of a task that no package ships (CNN/DailyMail, json-mode-eval): a local copy, or the Hub.

``task.dataset.source``: ``local`` reads ``task.dataset.local_path`` (a data file, or a directory:
a Hub snapshot, with the split's files directly inside, in a sub-directory named after the
config, or under ``data/`` as the Hub's parquet conversion lays them out); ``hub`` loads
``hub_id``/``hub_config``; ``auto`` is ``local`` when a path is set, else ``hub``. When the Hub
cannot be reached, the error names the local alternative.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.contract.errors import ConfigError
from runner.files.datasets import load_hub, load_local

SOURCES = ("auto", "hub", "local")


def check_source(dataset: Any) -> None:
    if dataset.source not in SOURCES:
        raise ConfigError("unknown dataset source", where="task.dataset.source", given=dataset.source,
                          allowed=", ".join(SOURCES) + " (no packaged copy exists for this task)")


def load_rows(dataset: Any, name: str, columns: str) -> tuple[Any, str, str]:
    """(rows, a label naming source and split for messages, the source used: local or hub).

    ``name`` is the dataset's usual name and ``columns`` describes the columns a local file needs;
    both go into the message when the Hub is out of reach.
    """
    source = dataset.source
    if source == "auto":
        source = "local" if dataset.local_path else "hub"
    split = dataset.split
    if source == "local":
        if not dataset.local_path:
            raise ConfigError("task.dataset.source=local needs a path", where="task.dataset.local_path",
                              given=None, fix=f"set task.dataset.local_path=/path/to/{name}")
        path = Path(dataset.local_path).expanduser()
        if path.is_dir() and (path / "data").is_dir() and not any(path.glob(f"{split}*")):
            path = path / "data"
        rows = load_local(str(path), split, dataset.hub_config, "task.dataset.local_path", dataset.max_file_mb)
        return rows, f"{dataset.local_path} [{split}]", source
    alternatives = (f"no offline copy of {name} ships in any package: use a local copy, "
                    f"task.dataset.local_path=/path/to/{name} (a snapshot of {dataset.hub_id}, or {split}*.jsonl/"
                    f".parquet/.csv files with {columns}), or allow Hugging Face Hub access")
    rows = load_hub(dataset.hub_id, dataset.hub_config, split, f"task.dataset.hub_id={dataset.hub_id}", alternatives)
    return rows, f"{dataset.hub_id} [{split}]", source
