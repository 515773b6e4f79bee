"""Recording a reference: writing a measured score into ``references/<task>.yaml``.

The entry of the effective spec is updated in place or appended, with the runner's ``recorded:``
provenance; comments, key order and untouched entries survive, so the file stays a hand-edited,
TensorRT-LLM-compatible document (the lookup rules live in :mod:`runner.references.store`).
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.contract.errors import ReferenceError_
from runner.contract.spec import SPEC_KEYS, AccuracySpec
from runner.files.locking import file_lock
from runner.files.paths import write_atomic
from runner.references.store import PROVENANCE_KEY, _entries, _matches, metric_key, reference_path
from runner.references.yaml_comments import put_trailing, take_trailing

VALUE_DECIMALS = 4


def _plain(obj: Any) -> Any:
    """Provenance as YAML-safe plain data (paths and unknown objects become strings)."""
    if obj is None or type(obj) in (bool, int, str):
        return obj
    if isinstance(obj, bool):
        return bool(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        obj = float(obj)
        return obj if math.isfinite(obj) else str(obj)
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return str(obj)



def _commented(obj: Any) -> Any:
    """Plain data as ruamel round-trip containers (so comments can be attached to them)."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(obj, dict):
        out = CommentedMap()
        for k, v in obj.items():
            out[k] = _commented(v)
        return out
    if isinstance(obj, list):
        return CommentedSeq(_commented(v) for v in obj)
    return obj



def record(
    ref_dir: str | os.PathLike[str],
    task: str,
    metric: str,
    model: str,
    spec: AccuracySpec,
    value: float,
    provenance: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``value`` as the reference of ``(model, spec)``; returns the file written.

    An entry matching the spec exactly is updated in place (its metric value and its
    ``recorded`` provenance); otherwise a new entry is appended holding only the non-default
    spec keys, the value, ``extra`` and the provenance. ``extra`` sets further entry keys (for
    example ``num_samples`` when the reference was measured on a non-default subset, or
    ``reference_note``), replacing existing ones. Comments, key order and untouched entries
    survive the round trip.
    """

    key = metric_key(metric)
    extra = dict(extra or {})
    clash = sorted(set(extra) & (set(SPEC_KEYS) | {key, PROVENANCE_KEY}))
    if clash:
        raise ValueError(f"record(extra=...) may not set {clash}: they are written from the other arguments")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"cannot record a non-finite reference value: {value!r}")

    path = reference_path(ref_dir, task)
    # two jobs recording into one file would each read it, add their entry and write it back, the second write
    # dropping the first's entry: the read-modify-write holds a lock beside the file, the same lock whatever
    # cache directory (RUNNER_CACHE_DIR) or host each job has, and writes only if the file is still as read
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(record_lock(path)):
        for _ in range(WRITE_ATTEMPTS):
            before = _read(path)
            text = _updated(path, before, task, key, model, spec, number, provenance, extra)
            # a writer that took no lock (a hand edit) changed nothing meanwhile: this second read narrows the window
            # such a writer has to the time between it and the rename below; it is not a compare-and-swap
            if _read(path) == before:
                mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
                write_atomic(path, text, mode)  # an interrupted run never leaves half a file
                return path
    raise ReferenceError_("the reference file kept changing while the entry was written; nothing was overwritten",
                          where=str(path), fix="rerun the job once whatever else writes the file has finished")


WRITE_ATTEMPTS = 5
LOCK_NAME = ".runner-record.lock"


def record_lock(path: Path) -> Path:
    """The lock of the reference files of one directory: a hidden file beside them, so that every writer of
    ``path`` (another job, another user, another cache directory, another host on a shared file system)
    takes the same lock."""
    return path.parent / LOCK_NAME


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None


def _updated(path: Path, text: str | None, task: str, key: str, model: str, spec: AccuracySpec, number: float,
             provenance: dict[str, Any], extra: dict[str, Any]) -> str:
    """:func:`record`'s new text of ``path`` (whose current text is ``text``; None: no file yet)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    yaml = YAML()  # round-trip: keeps comments, order and quoting
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    if text is not None:
        data = yaml.load(text)
        if data is None:  # comments only: they stay the file's header
            data = CommentedMap()
            header = [line[1:].strip() for line in text.splitlines() if line.startswith("#")]
            if header:
                data.yaml_set_start_comment("\n".join(header))
        if not isinstance(data, CommentedMap):
            raise ReferenceError_("the reference file must map model ids to lists of entries", where=str(path))
    else:
        data = CommentedMap()
        data.yaml_set_start_comment(
            f"{task} references in TensorRT-LLM's accuracy-suite schema.\n"
            "Entries with a `recorded:` key were written by `python -m runner ... reference.mode=record`."
        )

    entries = data.get(model)
    if entries is None:
        tail = take_trailing(data)
        entries = CommentedSeq()
        data[model] = entries
        grown = data
    else:
        _entries(data, model, path)  # shape check with a readable error
        grown = None

    query = spec.as_query()
    target = next((e for e in entries if _matches(e, query)), None)
    if grown is None:
        grown = entries if target is None else target
        tail = take_trailing(grown)
    if target is None:
        target = CommentedMap()
        for k in SPEC_KEYS:
            if query[k] != AccuracySpec.default_for(k):
                target[k] = query[k]
        entries.append(target)
    target[key] = round(number, VALUE_DECIMALS)
    for k, v in extra.items():
        target[k] = _commented(_plain(v))
    target[PROVENANCE_KEY] = _commented(_plain(provenance))
    put_trailing(grown, tail)

    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()
