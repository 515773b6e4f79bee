"""Loading rows through ``datasets`` from the Hub, a local directory/file, or a packaged file,
with errors that name the alternatives instead of a connection traceback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runner.errors import DataError

LOCAL_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


def _quiet() -> None:
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def hub_offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def load_local(path: str, split: str, config: str | None, where: str) -> Any:
    """A data file, or a directory (a Hub snapshot, or files named after the split)."""
    import datasets

    _quiet()
    local = Path(path).expanduser()
    if not local.exists():
        raise DataError("local dataset path does not exist", where=where, given=path,
                        fix="point it at a data file (.jsonl/.json/.parquet/.csv) or a directory with the dataset's files")
    try:
        if local.is_file():
            builder = LOCAL_FORMATS.get(local.suffix)
            if builder is None:
                raise DataError("unsupported data file type", where=where, given=local.name,
                                allowed=", ".join(LOCAL_FORMATS))
            return datasets.load_dataset(builder, data_files={split: str(local)}, split=split)
        folder = local / config if config and (local / config).is_dir() else local
        for suffix, builder in LOCAL_FORMATS.items():
            files = sorted(str(p) for p in folder.glob(f"{split}*{suffix}"))
            if files:
                return datasets.load_dataset(builder, data_files={split: files}, split=split)
        raise DataError(f"no '{split}' files in the local dataset directory", where=where, given=str(folder),
                        allowed=f"files named {split}*.jsonl, {split}*.json, {split}*.parquet or {split}*.csv "
                        "(directly or in a sub-directory named after the dataset config)")
    except DataError:
        raise
    except (ValueError, FileNotFoundError) as err:
        raise DataError(f"could not read split '{split}' from the local dataset", where=where, given=path,
                        fix=f"the directory must hold the '{split}' split; details: {str(err).splitlines()[0]}") from None


def load_hub(hub_id: str, config: str | None, split: str, where: str, alternatives: str) -> Any:
    import datasets

    _quiet()
    try:
        return datasets.load_dataset(hub_id, name=config, split=split)
    except (ConnectionError, OSError, ValueError) as err:
        raise DataError(
            f"the dataset {hub_id} cannot be reached" + (" (Hugging Face Hub offline mode is on)" if hub_offline() else ""),
            where=where, given=f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
            fix=alternatives,
        ) from None


def load_packaged_json(path: Path) -> Any:
    import datasets

    _quiet()
    return datasets.load_dataset("json", data_files={"test": str(path)}, split="test")
