"""Build an object from a config node's ``_target_``, accepting only this project's classes."""

from __future__ import annotations

import importlib
from typing import Any

from omegaconf import DictConfig, OmegaConf

from runner.errors import ConfigError

ALLOWED_PREFIXES = ("runner.", "evaluators.")


def build_object(node: DictConfig, **kwargs: Any) -> Any:
    """``cls(config, **kwargs)`` where ``cls`` is ``node._target_`` and ``config`` the typed node."""
    return target_class(node)(OmegaConf.to_object(node), **kwargs)


def target_class(node: DictConfig) -> Any:
    """The class ``node._target_`` names, after checking it is one of this project's."""
    target = node.get("_target_")
    where = f"{node._key()}._target_" if node._key() else "_target_"
    if not target or not target.startswith(ALLOWED_PREFIXES) or target.count(".") < 2:
        raise ConfigError("only classes of this project can be built from config", where=where, given=target,
                          allowed="runner.<module>.<Class> or evaluators.<module>.<Class>")
    module_name, _, attr = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ConfigError("config names a class that does not exist", where=where, given=target,
                          fix=f"check the spelling ({err})") from None
    return cls
