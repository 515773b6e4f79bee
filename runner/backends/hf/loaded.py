"""The last model this process loaded, kept for the next job that asks for the same one.

A sweep run by one worker process (the basic launcher, each joblib worker) evaluates the same model
and quantization on several tasks; loading, and above all quantizing, it again for every job is the
slowest part of the job on CPU. A model is reused only under the same key: its files' location and
revision, the quant spec with its calibration settings, dtype, device and attention kernel. Only
the last one is kept, so memory holds one model as before.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

_last: tuple[str, "LoadedModel"] | None = None


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    dtype: Any  # torch dtype computed in
    native: Any  # the checkpoint's torch dtype
    quant_algo: str | None
    kv_cache_quant_algo: str | None
    versions: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    # guided decoding's filters over the tokenizer's vocabulary (its prefix tree: seconds of CPU to build), by the
    # end-of-row ids and logits width they were built for; kept with the model for the next job that reuses it
    json_constraints: dict[tuple[tuple[int, ...], int], Any] = field(default_factory=dict)


def load_key(location: str, revision: str | None, trust_remote_code: bool, quant: Any, dtype: str, device: str,
             attn_implementation: str, folded: bool) -> str:
    quant_doc = dataclasses.asdict(quant) if dataclasses.is_dataclass(quant) else dict(quant)
    return json.dumps([location, revision, trust_remote_code, quant_doc, dtype, device, attn_implementation, folded],
                      sort_keys=True, default=str)


def take(key: str) -> LoadedModel | None:
    """The kept model when it is the one asked for (it stays kept); otherwise drop what is kept."""
    global _last
    if _last is not None and _last[0] == key:
        return _last[1]
    _last = None
    return None


def keep(key: str, loaded: LoadedModel) -> None:
    global _last
    _last = (key, loaded)


def forget() -> None:
    global _last
    _last = None
