"""Which model a checkpoint is: the reference key must name the model that was loaded.

``model.path`` may point anywhere. The embedded default takes its identity from the checkpoint it
is pointed at (``${runner.checkpoint_id:...}`` in ``conf/model/smollm2_135m.yaml``): the config's
``_name_or_path`` when it names a Hub id, else the directory name, or the Hub id given as the path.
A named model option (``model=llama31_8b``) keeps its ``hf_id`` and declares its architecture; a
checkpoint whose ``config.json`` disagrees with it is refused before anything loads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from runner.contract.errors import ConfigError
from runner.files.assets import EMBEDDED_TARGETS
from runner.files.paths import models_root

ARCHITECTURE_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
"""Where a checkpoint's config.json states its context window, in the order they are read."""


def checkpoint_config(path: str | None) -> dict[str, Any] | None:
    """The checkpoint's ``config.json`` when ``path`` is a local directory holding a readable one."""
    if not path:
        return None
    file = Path(path).expanduser() / "config.json"
    try:
        return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else None
    except (OSError, ValueError):
        return None  # the backend reports an unreadable checkpoint with its own message


def checkpoint_id(path: str | None, fallback: str) -> str:
    """The model id of the checkpoint at ``path`` (``fallback`` when no path is given)."""
    if not path:
        return fallback
    local = Path(str(path)).expanduser()
    if not local.exists():
        return str(path)  # a Hub id
    declared = (checkpoint_config(str(local)) or {}).get("_name_or_path")
    if isinstance(declared, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", declared) and not Path(declared).exists():
        return declared
    return local.resolve().name


def checkpoint_name(path: str | None, fallback: str) -> str:
    """A short name for run names and directories: the last part of the id, lower case."""
    if not path:
        return fallback
    name = re.sub(r"[^a-z0-9._-]+", "_", checkpoint_id(path, fallback).rsplit("/", 1)[-1].lower()).strip("._-")
    return name[:100] or fallback


def embedded_asset(path: str | None, asset: str) -> str | None:
    """The embedded asset the default model loads, or None when ``model.path`` names the checkpoint instead (the
    composed job then shows the user's checkpoint only, not an asset it will not read)."""
    return None if path else asset


def check_architecture(model: Any) -> None:
    """A named model pointed at a checkpoint of another architecture is refused, with the fix."""
    expected = dict(model.architecture or {})
    found = checkpoint_config(model.path)
    if not expected or not model.path or found is None:
        return
    text = found.get("text_config") if isinstance(found.get("text_config"), dict) else {}
    seen = {k: text.get(k, found.get(k)) for k in expected}  # a multimodal wrapper: its language model
    differ = {k: (v, seen[k]) for k, v in expected.items() if seen[k] is not None and seen[k] != v}
    if differ:
        raise ConfigError(
            f"model.path holds another model than model={model.name} ({model.hf_id})",
            where="model.path", given=f"{model.path}: " + ", ".join(f"{k}={got}" for k, (_, got) in differ.items()),
            allowed=f"a {model.hf_id} checkpoint: " + ", ".join(f"{k}={want}" for k, (want, _) in differ.items()),
            fix=f"drop model={model.name} so the identity comes from the checkpoint (python -m runner "
            f"model.path={model.path}), or set model.hf_id to the id its references are registered under")


def local_checkpoint(model: Any) -> Path | None:
    """The local checkpoint directory the model loads from, when one exists already: ``model.path``,
    ``$RUNNER_MODELS_ROOT/<hf_id>`` or the embedded copy once converted (nothing is converted here)."""
    root = models_root()
    candidates = [Path(str(model.path)).expanduser() if model.path else None,
                  root / str(model.hf_id) if root is not None and not model.path and model.hf_id else None,
                  EMBEDDED_TARGETS[model.embedded]() if not model.path and model.embedded in EMBEDDED_TARGETS else None]
    return next((c for c in candidates if c is not None and (c / "config.json").is_file()), None)


def context_window(config: dict[str, Any]) -> tuple[int, str] | None:
    """The longest sequence (prompt and generated tokens) a checkpoint's config.json declares, and its key."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    for key in CONTEXT_KEYS:
        value = text.get(key, config.get(key))
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, key
    return None


def check_lengths(model: Any, max_input_len: int, max_output_len: int) -> None:
    """``task.max_input_len`` and ``task.max_output_len`` each within the local checkpoint's context window."""
    folder = local_checkpoint(model)
    found = context_window(checkpoint_config(str(folder)) or {}) if folder is not None else None
    if found is None:
        return
    window, declared_by = found
    for key, value in (("task.max_input_len", max_input_len), ("task.max_output_len", max_output_len)):
        if value > window:
            raise ConfigError(f"{key} is beyond the model's context window", where=key, given=value,
                              allowed=f"at most {window} tokens ({declared_by} in {folder / 'config.json'})",
                              fix=f"lower {key} (a changed length enters the reference key), or evaluate a model "
                              "with a longer context")
