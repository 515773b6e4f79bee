"""lm-eval's installed LongBench definitions: their group tree, and task files that run them over a local copy.

The installed ``lm_eval/tasks/longbench/`` holds one YAML per subtask (prompt, generation settings, the
``!function`` that scores a document) and one per group (``longbench`` -> six subgroups -> 21 subtasks).
Offline, :func:`write_local_tasks` writes a task directory where each subtask file ``include:``\\ s the installed
one and changes only where the rows come from (``dataset_path: json`` over the local file), and each group
file repeats the installed group's plain data. The prompts, metrics and settings stay the installed ones, and the
written files run no code of their own (the code they reach is lm-eval's, trusted as installed), so
``task.trust_include_code`` is not needed.

A local copy is a directory of ``<subset>.jsonl`` files (THUDM/LongBench's ``data.zip`` has them under
``data/``). The installed prompts read a ``question`` field; THUDM's rows name it ``input``: such files are
copied into the task directory with ``question`` added (the same text).

The metrics module imports ``fuzzywuzzy.fuzz`` for the code-similarity ratio; upstream's evaluator loads it with
RapidFuzz's ``fuzz`` under that name (a float ratio; fuzzywuzzy rounds to whole percents), and so does
:func:`rapidfuzz_as_fuzzywuzzy` here.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from runner.contract.errors import ConfigError, DataError

GROUP_PREFIX = "_longbench"
EXTRA_PACKAGES = ("jieba", "rapidfuzz", "rouge")  # what the installed metrics module needs (fuzzywuzzy: rapidfuzz)


@dataclass(frozen=True)
class Definitions:
    """The installed LongBench task files: groups (name -> children, and their plain YAML), subtasks."""

    groups: dict[str, list[str]]
    group_yaml: dict[str, dict[str, Any]]
    subtask_file: dict[str, Path]  # lm-eval task name -> its installed YAML
    dataset_name: dict[str, str]  # lm-eval task name -> the subset (file stem of a local copy)


def installed_dir() -> Path:
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).parent / "longbench"


class _Tolerant(yaml.SafeLoader):
    """Reads a task YAML's plain keys; a tagged value (``!function``) is kept as its text."""


_Tolerant.add_multi_constructor("!", lambda loader, tag, node: f"{tag} {node.value}")


def definitions(root: Path | None = None) -> Definitions:
    """The group tree and the subtask files of the installed LongBench tasks."""
    root = root or installed_dir()
    groups, group_yaml, files, names = {}, {}, {}, {}
    for path in sorted(root.glob("*.yaml")):
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Tolerant)  # noqa: S506 (a SafeLoader)
        if not isinstance(data, dict):
            continue
        if "group" in data:
            groups[str(data["group"])] = [str(t) for t in data.get("task", [])]
            group_yaml[str(data["group"])] = data
        elif "task" in data:
            files[str(data["task"])] = path
            names[str(data["task"])] = str(data.get("dataset_name"))
    return Definitions(groups, group_yaml, files, names)


def leaves(defs: Definitions, name: str) -> list[str]:
    """The subtasks under ``name`` (itself when it is a subtask), in the groups' order."""
    if name in defs.groups:
        return [leaf for child in defs.groups[name] for leaf in leaves(defs, child)]
    return [name]


def shares(defs: Definitions, name: str, share: float = 1.0) -> Iterator[tuple[str, float]]:
    """Each subtask's weight in an unweighted mean of unweighted means down the group tree (lm-eval's
    ``weight_by_size: False`` at every level): a node's share split equally among its children."""
    if name not in defs.groups:
        yield name, share
        return
    children = defs.groups[name]
    for child in children:
        yield from shares(defs, child, share / len(children))


@contextmanager
def rapidfuzz_as_fuzzywuzzy() -> Iterator[None]:
    """While lm-eval loads the task files: ``import fuzzywuzzy`` gives RapidFuzz's ``fuzz`` (upstream's choice)."""
    from rapidfuzz import fuzz  # lazy: an optional package (the [longbench] extra), needed only here

    before = sys.modules.get("fuzzywuzzy")
    stand_in = types.ModuleType("fuzzywuzzy", "RapidFuzz's fuzz under fuzzywuzzy's name (task=longbench_v1)")
    stand_in.fuzz = fuzz  # type: ignore[attr-defined]
    sys.modules["fuzzywuzzy"] = stand_in
    try:
        yield
    finally:
        if before is None:
            sys.modules.pop("fuzzywuzzy", None)
        else:
            sys.modules["fuzzywuzzy"] = before


def check_extras() -> None:
    """The packages the installed LongBench metrics import, or a message saying how to install them."""
    missing = [p for p in EXTRA_PACKAGES if importlib.util.find_spec(p) is None]
    if missing:
        raise ConfigError("lm-eval's LongBench metrics need packages that are not installed",
                          where="task=longbench_v1", given="missing: " + ", ".join(missing),
                          fix='pip install -e ".[longbench]" (jieba, rapidfuzz, rouge)')


def find_file(local_dir: Path, subset: str) -> Path | None:
    """``<subset>.jsonl`` in the copy (or in its ``data/``), else None."""
    for candidate in (local_dir / f"{subset}.jsonl", local_dir / "data" / f"{subset}.jsonl"):
        if candidate.is_file():
            return candidate
    return None


def _with_question(source: Path, target: Path) -> Path:
    """The file itself when its rows have ``question``; else a copy with ``question`` = ``input``."""
    with source.open(encoding="utf-8") as f:
        first = next((line for line in f if line.strip()), "")
    try:
        row = json.loads(first) if first else {}
    except json.JSONDecodeError as err:
        raise DataError("a LongBench file is not JSON Lines", where=str(source), given=f"line 1: {err}",
                        fix="give the subset's rows one JSON object a line") from None
    if "question" in row or "input" not in row:
        return source
    with source.open(encoding="utf-8") as f, target.open("w", encoding="utf-8") as out:
        for line in f:
            if line.strip():
                row = json.loads(line)
                out.write(json.dumps(row | {"question": row["input"]}, ensure_ascii=False) + "\n")
    return target


def write_local_tasks(local_dir: str, name: str, target: Path) -> Path:
    """Task files for ``name`` (a group or subtask) over the copy in ``local_dir``, written into ``target``."""
    root = Path(local_dir).expanduser()
    if not root.is_dir():
        raise ConfigError("the LongBench copy is not a directory", where="task.local_dir", given=local_dir,
                          fix="point it at a directory of <subset>.jsonl files (THUDM/LongBench's data.zip)")
    defs = definitions()
    if name not in defs.groups and name not in defs.subtask_file:
        raise ConfigError("lm-eval's LongBench has no group or subtask of this name", where="task.lm_eval_task",
                          given=name, allowed=", ".join(sorted(defs.groups) + sorted(defs.subtask_file)))
    wanted = leaves(defs, name)
    found = {task: find_file(root, defs.dataset_name[task]) for task in wanted}
    missing = [defs.dataset_name[t] + ".jsonl" for t, path in found.items() if path is None]
    if missing:
        raise DataError("the LongBench copy lacks files of the subsets this task runs", where=f"task.local_dir={root}",
                        given="missing: " + ", ".join(missing),
                        fix="unpack THUDM/LongBench's data.zip there, or run a part of LongBench that the copy has "
                            "(task.lm_eval_task=longbench_single, longbench_qasper...; another reference key)")
    target.mkdir(parents=True, exist_ok=True)
    for task, path in found.items():
        assert path is not None
        rows = _with_question(path, target / f"{defs.dataset_name[task]}.jsonl")
        spec = {"include": str(defs.subtask_file[task]), "dataset_path": "json", "dataset_name": None,
                "dataset_kwargs": {"data_files": {"test": str(rows.resolve())}}}
        (target / f"{task}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    for group in groups_under(defs, name):
        (target / f"{GROUP_PREFIX}_{group}.yaml").write_text(yaml.safe_dump(defs.group_yaml[group], sort_keys=False),
                                                             encoding="utf-8")
    return target


def groups_under(defs: Definitions, name: str) -> list[str]:
    """``name`` and the groups below it (none for a subtask)."""
    if name not in defs.groups:
        return []
    return [name] + [g for child in defs.groups[name] for g in groups_under(defs, child)]
