"""``references/acceptance_length.yaml``: the registered acceptance lengths of speculative-decoding runs.

Upstream's schema (``tests/integration/defs/accuracy/references/acceptance_length.yaml``): a mapping of
test keys to ``{ref_al, min_al}``. Unlike the accuracy tables it is keyed by a name, not by a spec, so a
job names its entry (``backend.acceptance_key``); a missing key or an entry without values stops the job
before the model loads, as upstream's ``assert_acceptance_length`` refuses them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from runner.contract.errors import ReferenceError_

FILE = "acceptance_length.yaml"


def _number(value: Any, where: str, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 1:
        raise ReferenceError_(f"{key} must be a mean acceptance length (a number >= 1) or null", where=where,
                              given=repr(value), fix="correct the entry, or repopulate it from a GPU run")
    return float(value)


def entry(ref_dir: Path, key: str) -> tuple[float | None, float | None]:
    """``(ref_al, min_al)`` registered under ``key``; refused when the file, the key or both values are missing."""
    from ruamel.yaml import YAML

    path = ref_dir / FILE
    if not path.is_file():
        raise ReferenceError_("no acceptance-length references", where=str(path), given=key,
                              fix=f"add {FILE} (TensorRT-LLM's schema) to the reference directory")
    data = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ReferenceError_("the acceptance-length file must map test keys to entries", where=str(path),
                              given=type(data).__name__)
    if key not in data:
        known = ", ".join(sorted(map(str, data))[:8])
        raise ReferenceError_(f"no acceptance-length entry '{key}'", where=str(path), given=key,
                              allowed=f"a registered key ({known}{', ...' if len(data) > 8 else ''})",
                              fix="set backend.acceptance_key to a registered key, or add the entry after a GPU run")
    found = data[key] or {}
    where = f"{path}: {key}"
    ref_al, min_al = _number(found.get("ref_al"), where, "ref_al"), _number(found.get("min_al"), where, "min_al")
    if ref_al is None and min_al is None:
        raise ReferenceError_("the acceptance-length entry has no values yet (ref_al and min_al are null)", where=where,
                              given="null", fix="populate it from a GPU run (min_al = 0.95 x ref_al)")
    return ref_al, min_al
