"""Built TensorRT engines, kept on disk and found again by what went into them.

Layout under ``runner.paths.cache_dir()``::

    engines/<key>/engine/          what ``LLM.save()`` wrote (config.json, rank*.engine, tokenizer)
    engines/<key>/manifest.json    the key's inputs, in readable form, plus provenance
    engines/<key>.lock             held while the entry is checked and, on a miss, built

An entry counts only once its manifest exists: the engine is saved into a temporary sibling and
renamed into place, then the manifest is written, so a crashed build never looks like a hit.

The key is the sha256 of the canonical JSON of its inputs: the model files' fingerprint, the
requested spec (QuantConfig and CalibConfig arguments, the calibration data's fingerprint), the
BuildConfig, the parallel layout, the TensorRT-LLM version and the GPU model. Any change to one of
them gives another key, hence a fresh build; nothing is ever invalidated in place.

File fingerprints (``fingerprint_dir``) identify content, not paths or times:
- every file's relative name and size;
- files up to ``SMALL_FILE_BYTES`` (config.json, tokenizer files, the safetensors index, generation
  config): the sha256 of the whole file;
- bigger files (the weights): the sha256 of their first and last MiB. A safetensors file starts with
  its header (every tensor's name, dtype, shape and offsets), so a different export, dtype or layout
  changes the key; reading 2 MiB instead of gigabytes keeps a cache lookup within a second.
  Modification times are ignored, so a copied or re-downloaded checkpoint still hits. An in-place
  edit of a weight file's middle that keeps its size would go unnoticed; checkpoints are not edited
  that way, and ``backend.engine_cache=false`` (or deleting the entry) forces a rebuild.
Names starting with a dot (``.cache/``, ``.git/``) are skipped: they hold download bookkeeping.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from runner.assets import sha256_of
from runner.locking import file_lock
from runner.paths import cache_dir

SMALL_FILE_BYTES = 16 * 1024 * 1024
EDGE_BYTES = 1024 * 1024
KEY_FORMAT = 1  # bump when the meaning of the key inputs changes


def fingerprint_dir(root: Path) -> list[dict[str, Any]]:
    """Content fingerprint of every file under ``root`` (see the module docstring)."""
    entries = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        size = path.stat().st_size
        entry: dict[str, Any] = {"name": rel.as_posix(), "size": size}
        if size <= SMALL_FILE_BYTES:
            entry["sha256"] = sha256_of(path)
        else:
            entry["edges_sha256"] = _sha256_edges(path, size)
        entries.append(entry)
    return entries


def fingerprint_digest(root: Path) -> str:
    """One sha256 over :func:`fingerprint_dir` (for a compact manifest entry)."""
    return _digest(fingerprint_dir(root))


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
            stamped = {"key": key, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), **manifest}
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


def _sha256_edges(path: Path, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        h.update(handle.read(EDGE_BYTES))
        handle.seek(max(size - EDGE_BYTES, 0))
        h.update(handle.read(EDGE_BYTES))
    return h.hexdigest()
