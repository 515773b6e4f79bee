"""Build an object from a typed config's ``_target_``, accepting only this project's classes."""

from __future__ import annotations

import importlib
from typing import Any

from runner.contract.errors import ConfigError

ALLOWED_PREFIXES = ("runner.", "evaluators.")


def build(config: Any, where: str, **kwargs: Any) -> Any:
    """``cls(config, **kwargs)`` where ``cls`` is the class ``config._target_`` names; ``where``: the config group."""
    return target_class(getattr(config, "_target_", None), where)(config, **kwargs)


def target_class(target: str | None, where: str) -> Any:
    """The class ``target`` names, after checking it is one of this project's (``where``: its config group)."""
    where = f"{where}._target_" if where else "_target_"
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
