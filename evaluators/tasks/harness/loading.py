"""Finding an lm-eval task or group by name, the trust rule for local task files, and what identifies a
task's definition in the reference key.

lm-eval task YAMLs can run Python (``!function`` tags: document processors, metrics, whole task classes).
Tasks inside the installed ``lm_eval`` package are trusted as installed code. A YAML under
``task.include_path`` may run code only with ``task.trust_include_code=true``; otherwise the run is
refused before any task file is loaded, naming the files that would run code.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.contract.errors import ConfigError, DataError

log = logging.getLogger("runner")
FUNCTION_TAG = "!function"


@dataclass
class Subtask:
    """One lm-eval task of the run (the task itself, or one leaf of a group)."""

    name: str
    task: Any  # lm_eval.api.task.Task


def code_files(include_path: Path) -> list[Path]:
    """The task YAMLs under ``include_path`` that carry a ``!function`` tag outside a comment."""
    found = []
    for path in sorted(include_path.rglob("*.y*ml")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if FUNCTION_TAG in line.split("#", 1)[0]:
                found.append(path)
                break
    return found


def check_include_path(include_path: str | None, trusted: bool) -> Path | None:
    """The include directory, checked to exist and, unless ``trusted``, to hold no task file that runs code."""
    if include_path is None:
        return None
    root = Path(include_path).expanduser()
    if not root.is_dir():
        raise ConfigError("the task include path is not a directory", where="task.include_path", given=include_path,
                          fix="point it at a directory of lm-eval task YAML files")
    risky = code_files(root)
    if trusted and risky:
        log.warning("task.trust_include_code=true: Python code named by %d task file(s) under %s may run in this "
                    "process", len(risky), root)
    if not trusted:
        if risky:
            shown = ", ".join(str(p.relative_to(root)) for p in risky[:5]) + (" ..." if len(risky) > 5 else "")
            raise ConfigError("local lm-eval task files would run Python code (!function) in this process",
                              where="task.include_path", given=f"{root}: {shown}",
                              allowed="task files without !function, or task.trust_include_code=true",
                              fix="read those files; set task.trust_include_code=true only if you trust the code "
                                  "they name (the same stance as model.trust_remote_code)")
    return root


def check_installed() -> None:
    """lm-evaluation-harness importable, or a message that says how to install it."""
    if importlib.util.find_spec("lm_eval") is None:
        raise ConfigError("task=lm_eval needs lm-evaluation-harness, which is not installed",
                          where="python package lm_eval", given="not importable",
                          fix='pip install "lm-eval==0.4.13" (or `pip install -e ".[harness]"` in this project)')


def load_subtasks(name: str, include_path: Path | None) -> list[Subtask]:
    """The leaf tasks of ``name`` (one for a task, its subtasks for a group), sorted by name.

    Local YAMLs are indexed alone first (indexing lm-eval's thousands of installed tasks takes seconds);
    a name they do not define is looked up among the installed tasks."""
    check_installed()
    from lm_eval.tasks import TaskManager

    manager = None
    if include_path is not None:
        local = TaskManager(include_path=str(include_path), include_defaults=False)
        if name in local.all_tasks:
            manager = local
    if manager is None:
        manager = TaskManager(include_path=None if include_path is None else str(include_path))
        if name not in manager.all_tasks:
            close = [t for t in manager.all_tasks if name.lower() in t.lower()][:8]
            raise ConfigError("lm-eval knows no task or group of this name", where="task.lm_eval_task", given=name,
                              allowed=("similar names: " + ", ".join(close)) if close else None,
                              fix="list the names with `lm_eval ls tasks`; local YAMLs go in task.include_path")
    try:
        loaded = manager.load([name])["tasks"]
    except (ConnectionError, OSError, ValueError, FileNotFoundError) as err:
        raise DataError("lm-eval could not load the task's dataset", where=f"task.lm_eval_task={name}",
                        given=f"{type(err).__name__}: {str(err)[:300]}",
                        fix="Hub datasets need the Hub (unset HF_HUB_OFFLINE); offline, use a local task YAML "
                            "over local files (task.include_path)") from None
    return [Subtask(str(key), task) for key, task in sorted(loaded.items())]


def config_hash(subtasks: list[Subtask]) -> str:
    """8 hex digits of the subtasks' resolved configs (lm-eval's ``dump_config``): another prompt, metric
    or filter is another protocol, hence another reference entry."""
    dumped = {s.name: _protocol(s.task.dump_config()) for s in subtasks}
    text = json.dumps(dumped, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _protocol(config: dict[str, Any]) -> dict[str, Any]:
    """A task's config without where things are: its source file and its data files' directories."""
    config = {k: v for k, v in config.items() if k != "metadata"}
    kwargs = dict(config.get("dataset_kwargs") or {})
    files = kwargs.get("data_files")
    if isinstance(files, dict):
        kwargs["data_files"] = {k: [Path(f).name for f in ([v] if isinstance(v, str) else v)] for k, v in files.items()}
    elif files is not None:
        kwargs["data_files"] = [Path(f).name for f in ([files] if isinstance(files, str) else files)]
    return config | {"dataset_kwargs": kwargs}


def lm_eval_version() -> str:
    import lm_eval

    return str(lm_eval.__version__)
