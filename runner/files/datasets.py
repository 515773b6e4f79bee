"""Loading rows through ``datasets`` from the Hub, a local directory/file, or a packaged file,
with errors that name the alternatives instead of a connection traceback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runner.contract.errors import DataError

LOCAL_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


def _quiet() -> None:
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def hub_offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def load_local(path: str, split: str, config: str | None, where: str) -> Any:
    """A data file, or a directory (a Hub snapshot, or files named after the split), with at least one row."""
    rows = _read_local(path, split, config, where)
    if len(rows) == 0:
        raise DataError(f"the local dataset's '{split}' split holds no rows", where=where, given=path,
                        fix="point it at a file or directory with the dataset's rows")
    return rows


def _read_local(path: str, split: str, config: str | None, where: str) -> Any:
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
    except Exception as err:  # datasets/pyarrow raise many types for a malformed file; the file is the user's input
        raise DataError(f"could not read split '{split}' from the local dataset", where=where, given=path,
                        fix=f"check that the file is complete, UTF-8 and one JSON object per line (JSONL), or that the "
                        f"directory holds the '{split}' split; details: {_first_line(err)}") from None


def _first_line(err: BaseException) -> str:
    cause = err
    while cause.__cause__ is not None or cause.__context__ is not None:  # datasets wraps the parser's error
        cause = cause.__cause__ or cause.__context__
    text = str(cause).splitlines()[0] if str(cause) else ""
    return f"{type(cause).__name__}: {text}"[:300]


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
