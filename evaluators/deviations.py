"""Protocol deviations shared by the tasks: the parts of ``extra_acc_spec`` that say a run's
generation, chat or data settings differ from upstream's, so references never mix protocols."""

from __future__ import annotations

import hashlib
from typing import Any, Sequence


def short_hash(text: str) -> str:
    """A stable 8-hex tag for free text (a system prompt, stop strings) in the reference key."""
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def chat_deviation(config: Any, upstream_chat: bool = False, key_system_prompt_without_chat: bool = True) -> list[str]:
    """The chat settings where they differ from upstream's: ``chat_template=true`` (upstream uses none),
    ``system_prompt=<hash>`` (upstream has none), ``chat_template=false`` (upstream uses one), in that order.

    ``upstream_chat``: whether upstream applies the chat template. A system prompt reaches the model only
    through the chat template; ``key_system_prompt_without_chat=False`` keys it only then (the keys of
    cnn_dailymail and mmlu were recorded that way, the other tasks' with the system prompt either way).
    """
    chat = bool(config.apply_chat_template)
    parts = ["chat_template=true"] if chat and not upstream_chat else []
    if config.system_prompt and (chat or key_system_prompt_without_chat):
        parts.append("system_prompt=" + short_hash(config.system_prompt))
    if upstream_chat and not chat:
        parts.append("chat_template=false")
    return parts


def generation_deviations(config: Any, upstream_max_output: int, upstream_stop: Sequence[str],
                          upstream_chat: bool = False) -> list[str]:
    """``max_output_len=N``, ``stop=<hash>``, then :func:`chat_deviation`'s parts, as they apply."""
    parts = []
    if config.max_output_len != upstream_max_output:
        parts.append(f"max_output_len={config.max_output_len}")
    if tuple(config.stop) != tuple(upstream_stop):
        parts.append("stop=" + short_hash("\x00".join(config.stop)))
    return parts + chat_deviation(config, upstream_chat)


def limit_and_data_deviations(config: Any, upstream: dict[str, Any]) -> list[str]:
    """``max_input_len=N``, ``max_output_len=N``, ``config=X``, ``split=Y`` where they differ from ``upstream``."""
    parts = [f"{name}={getattr(config, name)}" for name in ("max_input_len", "max_output_len")
             if getattr(config, name) != upstream[name]]
    if config.dataset.hub_config != upstream["hub_config"]:
        parts.append(f"config={config.dataset.hub_config}")
    if config.dataset.split != upstream["split"]:
        parts.append(f"split={config.dataset.split}")
    return parts
