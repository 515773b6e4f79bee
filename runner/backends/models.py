"""Where a model's weights come from: an explicit path or Hub id, a models root, or an embedded copy."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from runner.errors import ModelError
from runner.paths import models_root

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class ModelSource:
    """A resolved location: ``location`` is a local directory or a Hub id."""

    location: str
    kind: str  # local | hub | embedded


def resolve_model_source(name: str, hf_id: str, path: str | None, embedded: str | None) -> ModelSource:
    """Pick the weights to load, in order: ``path``; ``$RUNNER_MODELS_ROOT/<hf_id>``; the embedded
    asset; the Hub id itself (which needs network access or a warm Hugging Face cache)."""
    if path:
        local = Path(path).expanduser()
        if local.exists():
            if not local.is_dir():
                raise ModelError(
                    "model.path points to a file, not a checkpoint directory",
                    where="model.path", given=path,
                    fix="point model.path at the directory holding config.json and the weights",
                )
            return ModelSource(str(local.resolve()), "local")
        if path.startswith(("/", ".", "~")) or not _HUB_ID.match(path):
            raise ModelError(
                "model path does not exist",
                where="model.path", given=path,
                allowed="an existing local checkpoint directory, or a Hugging Face Hub id like org/name",
                fix="check the path, or set RUNNER_MODELS_ROOT to the directory holding <org>/<name> copies",
            )
        return ModelSource(path, "hub")
    root = models_root()
    if root is not None and (root / hf_id).is_dir():
        return ModelSource(str((root / hf_id).resolve()), "local")
    if embedded:
        from runner.assets import EMBEDDED_MODELS

        if embedded not in EMBEDDED_MODELS:
            raise ModelError(f"unknown embedded model asset for model '{name}'", where="model.embedded",
                             given=embedded, allowed=", ".join(EMBEDDED_MODELS) + " or null")
        return ModelSource(str(EMBEDDED_MODELS[embedded]()), "embedded")
    return ModelSource(hf_id, "hub")
