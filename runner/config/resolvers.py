"""OmegaConf resolvers the config tree uses for output directories and model identities.

``${runner.unique:}`` is a short random token, resolved once per config (OmegaConf caches it, and
Hydra copies the cache into each sweep job), so two jobs started in the same second never share an
output directory. ``${runner.path_part:${task.name}}`` turns a name into one safe path component
before Hydra creates the directory; the names themselves are validated later, with a message.
``${runner.checkpoint_id:${model.path},<default id>}`` names the model a checkpoint holds
(:mod:`runner.backends.identity`); ``${runner.embedded_asset:${model.path},<asset>}`` is the embedded asset only
while no ``model.path`` is given.
"""

from __future__ import annotations

import re
import secrets

from omegaconf import OmegaConf

from runner.backends.identity import checkpoint_id, checkpoint_name, embedded_asset

UNIQUE = "runner.unique"
PATH_PART = "runner.path_part"
CHECKPOINT_ID = "runner.checkpoint_id"
CHECKPOINT_NAME = "runner.checkpoint_name"
EMBEDDED_ASSET = "runner.embedded_asset"
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def unique_token() -> str:
    return secrets.token_hex(3)


def path_part(value: object) -> str:
    """``value`` as a single directory-name component: no separators, no leading dots, <= 64 chars."""
    text = _UNSAFE.sub("_", str(value)).lstrip(".") or "_"
    return text[:64]


def register_resolvers() -> None:
    """Idempotent; called by the entry points with the schemas, never on import."""
    if not OmegaConf.has_resolver(UNIQUE):
        OmegaConf.register_new_resolver(UNIQUE, unique_token, use_cache=True)
    if not OmegaConf.has_resolver(PATH_PART):
        OmegaConf.register_new_resolver(PATH_PART, path_part)
    if not OmegaConf.has_resolver(CHECKPOINT_ID):

        OmegaConf.register_new_resolver(CHECKPOINT_ID, checkpoint_id)
        OmegaConf.register_new_resolver(CHECKPOINT_NAME, checkpoint_name)
    if not OmegaConf.has_resolver(EMBEDDED_ASSET):
        OmegaConf.register_new_resolver(EMBEDDED_ASSET, embedded_asset)
