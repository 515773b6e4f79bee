"""Built TensorRT engines, kept on disk and found again by what went into them.

Layout under ``runner.files.paths.cache_dir()``::

    engines/<key>/engine/          what ``LLM.save()`` wrote (config.json, rank*.engine, tokenizer)
    engines/<key>/manifest.json    the key's inputs, in readable form, plus provenance
    engines/<key>.lock             held while the entry is checked and, on a miss, built

An entry counts only once its manifest exists: the engine is saved into a temporary sibling and
renamed into place, then the manifest is written, so a crashed build never looks like a hit. The manifest
records the sha256 of the entry's content (every file's name and whole content, read when it was built);
before an entry is used it is compared again (:meth:`EngineEntry.verified`): an edited or swapped file is a
mismatch, said in a warning, and the entry is built again.

The key is the sha256 of the canonical JSON of its inputs: the model files' fingerprint, the
requested spec (QuantConfig and CalibConfig arguments, the calibration data's fingerprint), the
BuildConfig, the parallel layout, the TensorRT-LLM version and the GPU model. Any change to one of
them gives another key, hence a fresh build; nothing is ever invalidated in place.

File fingerprints (``fingerprint_dir``) identify content, not paths or times: every file's relative
name, size and the sha256 of its whole content. Hashing the whole file is what makes a hit safe: a
fine-tune that keeps every shape and changes only middle layers leaves a safetensors file's header
and tail untouched, so a partial hash (``KEY_FORMAT`` 1 read only the first and last MiB)
would hand back a stale engine, quantized model or cached generation, a wrong answer for a tool
whose job is to detect accuracy changes. Nothing but the content enters the fingerprint, so a
copied or re-downloaded checkpoint still hits.
Names starting with a dot (``.cache/``, ``.git/``) are skipped: they hold download bookkeeping.

Reading gigabytes of weights on every lookup would cost seconds to minutes, so a checkpoint is
read once (its first lookup) and each file's sha256 is memoized under ``<cache_dir>/file-hashes/``
(one small JSON file per resolved path). A memo entry records the path, size, ``st_mtime_ns``,
``st_ctime_ns``, ``st_ino`` and ``st_dev`` it was computed for, and is trusted only when all of them still
match: a rewrite changes the mtime and the ctime (an mtime set back by hand does not restore the ctime), a
replacement by rename changes the inode, a move to another disk changes the device. Two guards keep a stale entry from ever being written: the file is stat'ed
again after hashing (a file changed meanwhile is not memoized), and a file modified less than
``RACY_SECONDS`` before it was hashed is not memoized either, since a second write within the file
system's timestamp granularity could keep the mtime. Entries are written to a temporary file and
renamed into place, so concurrent jobs never read half an entry; an unreadable or malformed entry
is ignored and recomputed. The memo only saves time: deleting ``file-hashes/`` is always safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from runner.files.assets import sha256_of
from runner.files.locking import file_lock
from runner.files.paths import cache_dir, write_atomic

log = logging.getLogger("runner")
KEY_FORMAT = 2  # bump when the meaning of the key inputs changes (2: whole-file sha256 of every file)
RACY_SECONDS = 2.0  # a file modified this recently is hashed but not memoized (see the module docstring)
_STAT_FIELDS = ("path", "size", "mtime_ns", "ctime_ns", "ino", "dev")


def fingerprint_dir(root: Path) -> list[dict[str, Any]]:
    """Content fingerprint of every file under ``root`` (see the module docstring)."""
    entries = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        size, digest = file_sha256(path)
        entries.append({"name": rel.as_posix(), "size": size, "sha256": digest})
    return entries


def file_sha256(path: Path) -> tuple[int, str]:
    """``(size, sha256)`` of a file's whole content, from the memo when it still describes the file."""
    resolved = path.resolve()
    before = _stat_identity(resolved)
    memo = _memo_path(resolved)
    digest = _read_memo(memo, before)
    if digest is None:
        hashed_at_ns = time.time_ns()
        digest = sha256_of(resolved)
        settled = before["mtime_ns"] <= hashed_at_ns - int(RACY_SECONDS * 1e9)
        if settled and _stat_identity(resolved) == before:
            _write_memo(memo, {**before, "sha256": digest})
    return before["size"], digest


def fingerprint_digest(root: Path) -> str:
    """One sha256 over :func:`fingerprint_dir` (for a compact manifest entry)."""
    return _digest(fingerprint_dir(root))


def content_digest(root: Path) -> str:
    """sha256 over every file's relative name and whole content under ``root`` (dot files included), each file's
    sha256 from the memo while its stat identity, ctime included, is unchanged."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + file_sha256(path)[1].encode())
    return digest.hexdigest()


def engine_key(inputs: dict[str, Any]) -> str:
    """The cache key: sha256 (32 hex digits) of the canonical JSON of ``inputs``."""
    return _digest({"key_format": KEY_FORMAT, **inputs})[:32]


@dataclass(frozen=True)
class EngineEntry:
    key: str
    dir: Path

    @property
    def engine_dir(self) -> Path:
        return self.dir / "engine"

    @property
    def manifest_path(self) -> Path:
        return self.dir / "manifest.json"

    def complete(self) -> bool:
        return self.manifest_path.is_file() and self.engine_dir.is_dir()

    def manifest(self) -> dict[str, Any]:
        return json.loads(self.manifest_path.read_text())

    def verified(self) -> bool:
        """Complete, and its content what the manifest recorded when it was built; a mismatch is logged (the
        caller builds the entry again). An entry built before digests were recorded has its digest recorded now."""
        if not self.complete():
            return False
        try:
            manifest = self.manifest()
            recorded = manifest.get("content_sha256")
        except (OSError, ValueError, AttributeError):
            manifest, recorded = None, "unreadable"
        actual = content_digest(self.engine_dir)
        if manifest is not None and recorded is None:
            log.info("cache entry %s was built before its content was recorded: its sha256 is recorded now", self.dir)
            write_atomic(self.manifest_path, json.dumps(manifest | {"content_sha256": actual}, indent=2,
                                                        sort_keys=True, default=str) + "\n")
            return True
        if recorded != actual:
            log.warning("cache entry %s does not hold what was built into it (content sha256 %s, recorded %s): "
                        "it was changed on disk; building it again", self.dir, actual[:12], str(recorded)[:12])
            return False
        return True


class EngineCache:
    """``<root>/<key>/`` entries; ``root`` defaults to ``<cache_dir>/engines``."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else cache_dir() / "engines"

    def entry(self, key: str) -> EngineEntry:
        return EngineEntry(key, self.root / key)

    @contextlib.contextmanager
    def locked(self, key: str) -> Iterator[EngineEntry]:
        """Hold the entry's lock: two jobs never build the same engine at once."""
        with file_lock(self.root / f"{key}.lock"):
            yield self.entry(key)

    def store(self, key: str, save: Callable[[Path], None], manifest: dict[str, Any]) -> EngineEntry:
        """Save an engine with ``save(dir)`` and publish it with its manifest (call under ``locked``)."""
        entry = self.entry(key)
        tmp = self.root / f"{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            save(tmp / "engine")
            stamped = {"key": key, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), **manifest,
                       "content_sha256": content_digest(tmp / "engine")}
            (tmp / "manifest.json").write_text(json.dumps(stamped, indent=2, sort_keys=True, default=str) + "\n")
            if entry.dir.exists():  # a partial entry left by a crash
                shutil.rmtree(entry.dir)
            os.replace(tmp, entry.dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return entry


def _digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _stat_identity(resolved: Path) -> dict[str, Any]:
    """What a memo entry must match to be trusted: the path and the stat fields a rewrite changes."""
    st = resolved.stat()
    return {"path": str(resolved), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "ino": st.st_ino, "dev": st.st_dev}


def _memo_path(resolved: Path) -> Path:
    """One entry per resolved path, so a rewritten file replaces its entry instead of adding one."""
    name = hashlib.sha256(str(resolved).encode()).hexdigest()
    return cache_dir() / "file-hashes" / f"{name}.json"


def _read_memo(memo: Path, identity: dict[str, Any]) -> str | None:
    """The memoized sha256, or None when the entry is missing, unreadable, malformed or stale."""
    try:
        data = json.loads(memo.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or any(data.get(k) != identity[k] for k in _STAT_FIELDS):
        return None
    digest = data.get("sha256")
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        return None
    return digest


def _write_memo(memo: Path, data: dict[str, Any]) -> None:
    """Atomically, so a concurrent reader sees the old entry or the new one. A failure (read-only or
    full cache directory) is ignored: the memo only saves time."""
    try:
        write_atomic(memo, json.dumps(data, sort_keys=True))
    except OSError:
        pass