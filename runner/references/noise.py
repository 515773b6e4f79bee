"""A reference entry's noise record: the host it was measured on (``recorded.host``) and its A/A replicates
(``recorded.noise``), read with a clear error when hand-edited wrong, and written into an existing entry
(``python -m runner.compare A B --aa --write-reference ...``).

The record sits under ``recorded:``, the one key TensorRT-LLM's harness never reads, so files stay loadable there::

    recorded:
      host: {backend: hf, processor: ..., compute_dtype: bfloat16, threads: '2', batch_budget: ...}
      noise:
        method: replicate          # replicate: measured at record time; runs: two runs compared (--aa)
        replicates:
          - perturbation: batch_size=1
            n: 570
            answer_changes: 2
            discordant: {worse: 1, better: 1}
            shift: {mean: 0.0, lower: -0.33, upper: 0.33, confidence: 0.95}
            loglik_change: {max: 0.06, p99: 0.03}
            hosts: {a: {...}, b: {...}}
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from typing import Any

from runner.contract.errors import ReferenceError_
from runner.contract.spec import AccuracySpec
from runner.files.locking import file_lock
from runner.files.paths import write_atomic
from runner.references.recording import _commented, _plain, record_lock
from runner.references.store import PROVENANCE_KEY, Reference, _entries, _matches, reference_path
from runner.stats.data.noise import Replicate

HOST_KEY = "host"
NOISE_KEY = "noise"
METHODS = ("replicate", "runs")


def host_of(recorded: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The fingerprint an entry was recorded with (None: recorded before fingerprints, or by hand)."""
    host = (recorded or {}).get(HOST_KEY)
    return {str(k): str(v) for k, v in host.items()} if isinstance(host, Mapping) else None


def replicates_of(reference: Reference) -> list[Replicate]:
    """The entry's A/A replicates (empty when it has none); a malformed block is refused, naming the field."""
    block = (reference.recorded or {}).get(NOISE_KEY)
    if block is None:
        return []
    where = f"{reference.path}: '{reference.model}' entry {reference.index}, recorded.noise"
    items = block.get("replicates") if isinstance(block, Mapping) else None
    if not isinstance(items, list) or not all(isinstance(r, Mapping) for r in items):
        raise ReferenceError_("the entry's noise record is malformed", where=where, given=repr(block)[:200],
                              allowed="a mapping with `replicates:`, a list of mappings (as reference.noise=replicate "
                                      "writes it)", fix="record the reference again with reference.noise=replicate, or "
                                                        "delete recorded.noise")
    out = []
    for i, item in enumerate(items):
        try:
            out.append(Replicate.from_dict(item))
        except (ValueError, TypeError) as err:
            raise ReferenceError_("a replicate of the entry's noise record is malformed", where=f"{where}.replicates[{i}]",
                                  given=str(err), fix="record the reference again with reference.noise=replicate, "
                                                      "or delete recorded.noise") from None
    return out


def noise_block(method: str, replicates: list[Replicate]) -> dict[str, Any]:
    """The ``recorded.noise`` mapping of ``replicates`` measured by ``method`` (:data:`METHODS`)."""
    return {"method": method, "replicates": [r.to_dict() for r in replicates]}


def attach(ref_dir: str | os.PathLike[str], task: str, model: str, spec: AccuracySpec,
           block: Mapping[str, Any]) -> str:
    """Write ``block`` as ``recorded.noise`` of the entry of ``(model, spec)`` in ``<ref_dir>/<task>.yaml``, keeping
    everything else of the file; returns the file written. The entry must exist."""
    from ruamel.yaml import YAML

    path = reference_path(ref_dir, task)
    if not path.is_file():
        raise ReferenceError_(f"no reference file for task '{task}'", where=str(path),
                              fix="record the reference first (reference.mode=record), then attach its noise")
    with file_lock(record_lock(path)):
        yaml = YAML()
        yaml.preserve_quotes = True
        yaml.indent(mapping=2, sequence=4, offset=2)
        yaml.width = 4096
        data = yaml.load(path.read_text(encoding="utf-8"))
        entries = _entries(data or {}, model, path)
        target = next((e for e in entries if _matches(e, spec.as_query())), None)
        if target is None:
            raise ReferenceError_(f"no entry of '{model}' matches the spec {spec.describe()}", where=str(path),
                                  given=spec.describe(), fix="record the reference first, or name the entry's spec")
        if target.get(PROVENANCE_KEY) is None:
            target[PROVENANCE_KEY] = _commented({})
        target[PROVENANCE_KEY][NOISE_KEY] = _commented(_plain(dict(block)))
        out = io.StringIO()
        yaml.dump(data, out)
        write_atomic(path, out.getvalue(), path.stat().st_mode & 0o777)
    return str(path)
