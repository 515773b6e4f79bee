"""Protocol deviations shared by the generative tasks: the parts of ``extra_acc_spec`` that say a
run's generation settings differ from upstream's, so references never mix protocols."""

from __future__ import annotations

import hashlib
from typing import Any, Sequence


def short_hash(text: str) -> str:
    """A stable 8-hex tag for free text (a system prompt, stop strings) in the reference key."""
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def generation_deviations(config: Any, upstream_max_output: int, upstream_stop: Sequence[str]) -> list[str]:
    """``max_output_len=N``, ``stop=<hash>``, ``chat_template=true``, ``system_prompt=<hash>`` as they apply."""
    parts = []
    if config.max_output_len != upstream_max_output:
        parts.append(f"max_output_len={config.max_output_len}")
    if tuple(config.stop) != tuple(upstream_stop):
        parts.append("stop=" + short_hash("\x00".join(config.stop)))
    if config.apply_chat_template:
        parts.append("chat_template=true")
    if config.system_prompt:
        parts.append("system_prompt=" + short_hash(config.system_prompt))
    return parts


def limit_and_data_deviations(config: Any, upstream: dict[str, Any]) -> list[str]:
    """``max_input_len=N``, ``max_output_len=N``, ``config=X``, ``split=Y`` where they differ from ``upstream``."""
    parts = [f"{name}={getattr(config, name)}" for name in ("max_input_len", "max_output_len")
             if getattr(config, name) != upstream[name]]
    if config.dataset.hub_config != upstream["hub_config"]:
        parts.append(f"config={config.dataset.hub_config}")
    if config.dataset.split != upstream["split"]:
        parts.append(f"split={config.dataset.split}")
    return parts
