"""Loading rows through ``datasets`` from the Hub, a local directory/file, or a packaged file,
with errors that name the alternatives instead of a connection traceback.

A local split is checked before ``datasets`` reads it: its files together must stay under
``task.dataset.max_file_mb`` (``datasets`` reads a split whole and keeps an Arrow copy in its cache),
and a text file (JSON lines, JSON, CSV) must be UTF-8. ``datasets`` decodes strings lazily, when a
row is first read, so an undecodable byte would otherwise surface as a traceback far from here."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

from runner.contract.errors import DataError
from runner.contract.task_config import DatasetConfig
from runner.files.hub import go_offline_unless_reachable, hub_offline

LOCAL_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}
TEXT_FORMATS = (".json", ".jsonl", ".csv")
DEFAULT_MAX_FILE_MB = DatasetConfig.max_file_mb


def _quiet() -> None:
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def load_local(path: str, split: str, config: str | None, where: str, max_mb: float = DEFAULT_MAX_FILE_MB) -> Any:
    """A data file, or a directory (a Hub snapshot, or files named after the split), with at least one row."""
    rows = _read_local(path, split, config, where, max_mb)
    if len(rows) == 0:
        raise DataError(f"the local dataset's '{split}' split holds no rows", where=where, given=path,
                        fix="point it at a file or directory with the dataset's rows")
    return rows


def _read_local(path: str, split: str, config: str | None, where: str, max_mb: float) -> Any:
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
            check_files([local], where, max_mb)
            return datasets.load_dataset(builder, data_files={split: str(local)}, split=split)
        folder = local / config if config and (local / config).is_dir() else local
        for suffix, builder in LOCAL_FORMATS.items():
            files = sorted(str(p) for p in folder.glob(f"{split}*{suffix}"))
            if files:
                check_files([Path(f) for f in files], where, max_mb)
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


def check_files(files: list[Path], where: str, max_mb: float) -> None:
    """Refuse a split over ``max_mb`` before reading it, and a text file that is not UTF-8 (read in chunks)."""
    size = sum(f.stat().st_size for f in files)
    if size > max_mb * 2**20:
        raise DataError("the local dataset is larger than the size limit", where=where,
                        given=f"{size / 2**20:.1f} MB in {len(files)} file(s) ({files[0]}{', ...' if len(files) > 1 else ''})",
                        allowed=f"at most task.dataset.max_file_mb={max_mb:g} MB",
                        fix="point at the split you mean to evaluate, or raise task.dataset.max_file_mb if the "
                        "host has the memory (the split is read whole, about twice its size)")
    for file in files:
        if file.suffix not in TEXT_FORMATS:
            continue
        decoder = codecs.getincrementaldecoder("utf-8")()
        line, offset = 1, 0
        with open(file, "rb") as stream:
            while chunk := stream.read(1 << 20):
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as err:
                    bad = offset + err.start
                    raise DataError("the data file is not valid UTF-8", where=f"{where}: {file}",
                                    given=f"byte {bad} (line {line + chunk[:err.start].count(10)}): {chunk[err.start:err.start + 4]!r}",
                                    allowed="UTF-8 text", fix="convert the file to UTF-8 (iconv -f <encoding> -t utf-8)") from None
                line += chunk.count(10)
                offset += len(chunk)
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                raise DataError("the data file is not valid UTF-8: it ends inside a character", where=f"{where}: {file}",
                                given=f"byte {offset}", allowed="UTF-8 text", fix="check that the file is complete") from None


def _first_line(err: BaseException) -> str:
    cause = err
    while cause.__cause__ is not None or cause.__context__ is not None:  # datasets wraps the parser's error
        cause = cause.__cause__ or cause.__context__
    text = str(cause).splitlines()[0] if str(cause) else ""
    return f"{type(cause).__name__}: {text}"[:300]


def load_hub(hub_id: str, config: str | None, split: str, where: str, alternatives: str) -> Any:
    import datasets

    unreachable = go_offline_unless_reachable()  # one quick probe: no library retries against a dead endpoint
    _quiet()
    try:
        return datasets.load_dataset(hub_id, name=config, split=split)
    except (ConnectionError, OSError, ValueError) as err:
        why = (f" (the Hugging Face Hub does not answer: {unreachable}; nor is it in the local Hugging Face cache)"
               if unreachable else " (Hugging Face Hub offline mode is on)" if hub_offline() else "")
        raise DataError(
            f"the dataset {hub_id} cannot be reached{why}",
            where=where, given=f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
            fix=alternatives,
        ) from None


def load_packaged_json(path: Path) -> Any:
    import datasets

    _quiet()
    return datasets.load_dataset("json", data_files={"test": str(path)}, split="test")


def load_packaged_arrow(path: Path) -> Any:
    """A split saved by ``datasets`` as one Arrow file (memory-mapped, read offline)."""
    import datasets

    _quiet()
    return datasets.Dataset.from_file(str(path))
