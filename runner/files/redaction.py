"""The YAML files Hydra saves before a job runs (``.hydra/config.yaml``, ``hydra.yaml``, ``overrides.yaml``,
a sweep's ``multirun.yaml``), rewritten with every URL secret redacted.

Why here: Hydra writes the command line's overrides three ways (the composed values, the override list, and
``override_dirname``, the items joined by commas) before any code of ours runs. The text is redacted item by
item (:func:`runner.contract.secrets.redact_text`), then read back as YAML and redacted value by value, so a
password YAML had to quote (``'pa''ss'``) or fold is hidden too.
"""

from __future__ import annotations

from pathlib import Path

from runner.contract.secrets import redact_text, redact_tree
from runner.files.paths import write_atomic


def redact_yaml(text: str) -> str:
    """``text`` (a YAML document) with no URL secret left: in its text, and in each value it parses to."""
    import yaml

    redacted = redact_text(text)
    try:
        tree = yaml.safe_load(redacted)
    except yaml.YAMLError:
        return redacted
    if redact_tree(tree) != tree:
        return yaml.safe_dump(redact_tree(tree), sort_keys=False, allow_unicode=True, width=10 ** 6)
    return redacted


def redact_saved_configs(*folders: Path) -> None:
    """Rewrite each ``*.yaml`` file directly in ``folders`` that holds a URL secret, in place (atomically)."""
    for folder in folders:
        for path in sorted(folder.glob("*.yaml")):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if redact_yaml(text) != text:
                write_atomic(path, redact_yaml(text), 0o644)
