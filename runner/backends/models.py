"""Where a model's weights come from: an explicit path or Hub id, a models root, or an embedded copy."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from runner.contract.errors import ModelError
from runner.files.assets import EMBEDDED_MODELS
from runner.files.paths import models_root

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

        if embedded not in EMBEDDED_MODELS:
            raise ModelError(f"unknown embedded model asset for model '{name}'", where="model.embedded",
                             given=embedded, allowed=", ".join(EMBEDDED_MODELS) + " or null")
        return ModelSource(str(EMBEDDED_MODELS[embedded]()), "embedded")
    return ModelSource(hf_id, "hub")


def load_failure(err: BaseException, name: str, kind: str, location: str) -> ModelError:
    """A checkpoint that could not be loaded, as a message: what is wrong with it and what to do."""
    text = " ".join(str(err).split()) or type(err).__name__
    where = f"model={name} ({kind}: {location})"
    local = Path(location).is_dir()
    if "custom code" in text or "trust_remote_code" in text:
        return ModelError("the checkpoint ships its own model code, which is not run without consent", where=where,
                          given=text[:300], fix="inspect the code, then set model.trust_remote_code=true if you trust it")
    if local and not (Path(location) / "config.json").is_file():
        return ModelError("the model directory holds no config.json: it is not a Hugging Face checkpoint", where=where,
                          given=", ".join(sorted(p.name for p in Path(location).iterdir())[:10]) or "an empty directory",
                          fix="point model.path at the directory that holds config.json and the weights")
    if isinstance(err, KeyError) or "model_type" in text or "model type" in text or "Unrecognized" in text:
        return ModelError("the checkpoint's model type is unknown to the installed transformers", where=where,
                          given=text[:300], fix="check config.json's model_type, or install a transformers release "
                          "that supports it (custom architectures need model.trust_remote_code=true)")
    return ModelError("could not load the model", where=where, given=f"{type(err).__name__}: {text}"[:400],
                      fix="check that the checkpoint files are complete (config.json, tokenizer, *.safetensors); "
                      "set model.path to a local checkpoint directory, or RUNNER_MODELS_ROOT to a directory holding "
                      "<org>/<name> copies; Hub ids need network access or a warm Hugging Face cache")
