"""Finding an lm-eval task or group by name, the trust rule for local task files, and what identifies a
task's definition in the reference key.

lm-eval task YAMLs can run Python (``!function`` tags: document processors, metrics, whole task classes).
Tasks inside the installed ``lm_eval`` package are trusted as installed code. The YAMLs under
``task.include_path`` and every file they include are read by one loader (``task_files``), first all at once
before lm-eval is asked for anything, then again as lm-eval loads them: a tag that resolves to ``!function``
needs ``task.trust_include_code=true``, an include outside the include path needs ``task.include_allow``,
and each file has a size and an alias-expansion limit.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from evaluators.tasks.harness.task_files import Policy, check_tree, guarded
from evaluators.tasks.harness.templates import sandbox_templates
from runner.contract.errors import ConfigError, DataError
from runner.files.hub import go_offline_unless_reachable

log = logging.getLogger("runner")
MAX_KB = 1 << 20
"""task.yaml_max_kb at most 1 GiB."""
MAX_NODES = 100_000_000


@dataclass
class Subtask:
    """One lm-eval task of the run (the task itself, or one leaf of a group)."""

    name: str
    task: Any  # lm_eval.api.task.Task


def check_include_path(include_path: str | None, trusted: bool, allowed: Sequence[str] = (), max_kb: int = 1024,
                       max_nodes: int = 100_000) -> Policy | None:
    """The rule the include directory's files are read under, after reading them all: refused unless
    ``trusted`` when a tag in any of them (or in a file they include) resolves to ``!function``."""
    if include_path is None:
        if allowed:
            raise ConfigError("task.include_allow widens task.include_path, and none is given", where="task.include_allow",
                              given=list(allowed), fix="set task.include_path, or drop task.include_allow")
        return None
    root = Path(include_path).expanduser()
    if not root.is_dir():
        raise ConfigError("the task include path is not a directory", where="task.include_path", given=include_path,
                          fix="point it at a directory of lm-eval task YAML files")
    dirs = []
    for entry in allowed:
        path = Path(entry).expanduser()
        if not path.is_dir():
            raise ConfigError("an allowed include directory is not a directory", where="task.include_allow",
                              given=entry, fix="name directories whose task files may be included")
        dirs.append(path.resolve())
    for limit, name, most in ((max_kb, "task.yaml_max_kb", MAX_KB), (max_nodes, "task.yaml_max_nodes", MAX_NODES)):
        if not 1 <= limit <= most:
            raise ConfigError("a task-file limit is out of range", where=name, given=limit, allowed=f"1 to {most}",
                              fix=f"set {name} to at most {most}: a larger limit is no limit, and a file of that "
                                  "size would not fit in memory")
    check_installed()
    policy = Policy(root.resolve(), tuple(dirs), trusted, max_kb * 1024, max_nodes)
    found = check_tree(policy)
    outside = sorted({str(p.parent) for p in found.read if not p.is_relative_to(policy.include_path)})
    if outside:
        log.warning("task.include_allow: lm-eval task files read from outside %s: %s", root, ", ".join(outside))
    if found.code and trusted:
        log.warning("task.trust_include_code=true: Python code named by %d task file(s) read from %s may run in this "
                    "process", len(found.code), root)
    if found.code and not trusted:
        shown = ", ".join(f"{_shown(p, policy)} ({', '.join(sorted(set(f))[:3])})" for p, f in list(found.code.items())[:5])
        raise ConfigError("local lm-eval task files would run Python code (!function) in this process",
                          where="task.include_path", given=f"{root}: {shown}" + (" ..." if len(found.code) > 5 else ""),
                          allowed="task files without !function and with registered lm-eval metrics, or "
                                  "task.trust_include_code=true on this command line",
                          fix="read those files and the code they name; set task.trust_include_code=true only if you "
                              "trust it (the same stance as model.trust_remote_code)")
    return policy


def _shown(path: Path, policy: Policy) -> str:
    return str(path.relative_to(policy.include_path)) if path.is_relative_to(policy.include_path) else str(path)


def check_installed() -> None:
    """lm-evaluation-harness importable, or a message that says how to install it."""
    if importlib.util.find_spec("lm_eval") is None:
        raise ConfigError("task=lm_eval needs lm-evaluation-harness, which is not installed",
                          where="python package lm_eval", given="not importable",
                          fix='pip install "lm-eval==0.4.13" (or `pip install -e ".[harness]"` in this project)')


def load_subtasks(name: str, policy: Policy | None) -> list[Subtask]:
    """The leaf tasks of ``name`` (one for a task, its subtasks for a group), sorted by name.

    Local YAMLs are indexed alone first (indexing lm-eval's thousands of installed tasks takes seconds);
    a name they do not define is looked up among the installed tasks."""
    check_installed()
    sandbox_templates()
    with _reading(policy):
        return _load_subtasks(name, None if policy is None else policy.include_path)


@contextlib.contextmanager
def _reading(policy: Policy | None) -> Iterator[None]:
    if policy is None:
        yield
        return
    with guarded(policy):
        yield


def _load_subtasks(name: str, include_path: Path | None) -> list[Subtask]:
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
    unreachable = go_offline_unless_reachable()  # one quick probe: no retries against a dead endpoint
    try:
        loaded = manager.load([name])["tasks"]
    except (ConnectionError, OSError, ValueError, FileNotFoundError) as err:
        why = f" (the Hugging Face Hub does not answer: {unreachable})" if unreachable else ""
        raise DataError(f"lm-eval could not load the task's dataset{why}", where=f"task.lm_eval_task={name}",
                        given=f"{type(err).__name__}: {str(err)[:300]}",
                        fix=("Hub datasets need the Hub: check the network, a proxy or HF_ENDPOINT"
                             if unreachable else "Hub datasets need the Hub (unset HF_HUB_OFFLINE)")
                            + "; offline, use a local task YAML over local files (task.include_path)") from None
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
