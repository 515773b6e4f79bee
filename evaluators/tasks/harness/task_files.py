"""Every lm-eval task YAML of a run read by one loader, so that the trust rule is decided where the YAML is parsed.

lm-eval reads a task file as bytes with PyYAML's safe loader (libyaml's when present) plus a ``!function``
constructor that imports Python. This loader reads the same bytes with the same parser class, so a tag is seen
as the parser resolves it (after ``%TAG`` directives, URI escapes and verbatim tags, in any encoding the parser
accepts), and checks the file's events before anything is constructed:

- a ``!function`` tag needs ``task.trust_include_code=true``; a tag outside YAML's core schema is refused;
- so does a metric lm-eval would load with ``evaluate.load`` (a path, a name not in its registry,
  ``hf_evaluate: true``); a ``process_results``, filter or aggregation lm-eval would drop is refused
  (``named_code``);
- the file's size is at most ``task.yaml_max_kb``; its nodes, with every alias expanded, at most
  ``task.yaml_max_nodes``; its nesting at most ``MAX_DEPTH``; an alias inside its own anchor is refused;
- an ``include:`` must resolve inside the include path or a directory of ``task.include_allow``.

While lm-eval loads a run's tasks, its ``load_yaml`` is this loader (:func:`guarded`), so no file lm-eval reads
for the task escapes these checks. Files inside the installed ``lm_eval`` package are installed code, trusted
as such, and read by lm-eval itself.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from evaluators.tasks.harness import named_code
from runner.contract.errors import ConfigError

log = logging.getLogger("runner")
FUNCTION = "!function"
MAX_DEPTH = 100  # nesting of collections; lm-eval's task files use fewer than 10
_CORE = "tag:yaml.org,2002:"
_IGNORE_DIRS = {"__pycache__", ".ipynb_checkpoints"}  # lm-eval's index skips these directories


@dataclass(frozen=True)
class Policy:
    """What a run lets its task files do: where they may be read from, whether they may name code, how large."""

    include_path: Path  # resolved
    allowed: tuple[Path, ...] = ()  # resolved directories outside include_path an include may read
    trusted: bool = False  # task.trust_include_code
    max_bytes: int = 1 << 20
    max_nodes: int = 100_000


@dataclass
class Findings:
    """What the check of an include tree found: the files whose tags name code, and every file read."""

    code: dict[Path, list[str]] = field(default_factory=dict)  # file -> the !function values it names
    read: list[Path] = field(default_factory=list)


def installed_root() -> Path:
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).parent.resolve()


def task_files(root: Path) -> list[Path]:
    """The files lm-eval's index reads under an include directory (``**/*.yaml``, its ignored directories skipped)."""
    return sorted((p for p in root.glob("**/*.yaml") if not any(part in _IGNORE_DIRS for part in p.parts)),
                  key=lambda p: p.as_posix())


def check_tree(policy: Policy) -> Findings:
    """Every task file lm-eval would index under the include path, and every file they include, read and checked
    (each refusal a ConfigError naming the file); what names code is returned, not refused."""
    found = Findings()
    for path in task_files(policy.include_path):
        _load(path, policy, found, resolve=False, seen=(), origin=None)
    return found


def load_yaml(path: str | Path, policy: Policy, *, resolve_func: bool = True, recursive: bool = True) -> dict[str, Any]:
    """lm-eval's ``load_yaml`` under ``policy``: includes merged (the including file's keys win, an included
    ``task_list`` dropped), ``!function`` values imported when ``resolve_func`` (only with trust)."""
    return _load(Path(path), policy, Findings(), resolve=resolve_func, seen=(), origin=None, recursive=recursive)


@contextlib.contextmanager
def guarded(policy: Policy) -> Iterator[None]:
    """lm-eval's ``load_yaml`` replaced by this module's, in each lm-eval module that calls it, for the duration."""
    import lm_eval.tasks._factory as factory
    import lm_eval.tasks._index as index
    import lm_eval.tasks._yaml_loader as loader
    import lm_eval.tasks.manager as manager

    original = loader.load_yaml
    installed = installed_root()

    def replacement(path: str | Path, *, resolve_func: bool = True, recursive: bool = True,
                    _seen: set[Path] | None = None) -> dict[str, Any]:
        if _inside(Path(path).expanduser().resolve(), (installed,)):
            return original(path, resolve_func=resolve_func, recursive=recursive, _seen=_seen)
        return load_yaml(path, policy, resolve_func=resolve_func, recursive=recursive)

    modules = (loader, index, factory, manager)
    saved = [m.load_yaml for m in modules]  # type: ignore[attr-defined]
    for module in modules:
        module.load_yaml = replacement  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, before in zip(modules, saved):
            module.load_yaml = before  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------- one file
def _load(path: Path, policy: Policy, found: Findings, *, resolve: bool, seen: tuple[Path, ...],
          origin: Path | None, recursive: bool = True) -> dict[str, Any]:
    path = path.expanduser().resolve()
    where = f"task.include_path={policy.include_path}"
    if path in seen:
        chain = " -> ".join(str(p) for p in (*seen, path))
        raise ConfigError("lm-eval task files include each other in a cycle", where=where, given=chain,
                          fix="remove one of the include: lines")
    installed = installed_root()
    if _inside(path, (installed,)) and origin is not None:
        from lm_eval.tasks._yaml_loader import load_yaml as lm_eval_load

        return lm_eval_load(path, resolve_func=resolve, recursive=recursive)  # installed tasks: installed code
    if not _inside(path, (policy.include_path, *policy.allowed)):
        raise ConfigError("an lm-eval task file is read from outside the include path",
                          where=where if origin is None else f"include: in {origin}", given=str(path),
                          allowed=f"files under {policy.include_path}"
                                  + "".join(f" or {p}" for p in policy.allowed),
                          fix="copy the file into the include path, or allow its directory with "
                              f"task.include_allow=[{path.parent}] if you trust what is there")
    data = _read(path, policy, origin)
    functions = _check_events(data, path, policy)
    found.read.append(path)
    if functions:
        found.code[path] = functions
    cfg = _construct(data, path, policy, resolve)
    if not isinstance(cfg, dict):
        raise ConfigError("an lm-eval task file must hold one mapping of keys", where=str(path),
                          given=type(cfg).__name__, fix="write the task's keys (task:, dataset_path:, ...) at the top level")
    _check_names(cfg, path, policy, found, resolve)
    if not recursive or "include" not in cfg:
        return cfg
    includes = cfg.pop("include")
    if isinstance(includes, str):
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise ConfigError("include: names a file or a list of files", where=str(path), given=repr(includes)[:200])
    merged: dict[str, Any] = {}
    for name in includes:
        target = Path(name).expanduser()
        target = target if target.is_absolute() else path.parent / target
        if not target.resolve().is_file():
            raise ConfigError("an included lm-eval task file does not exist", where=f"include: in {path}",
                              given=name, fix="name a file relative to the including file")
        sub = _load(target, policy, found, resolve=resolve, seen=(*seen, path), origin=path)
        sub.pop("task_list", None)
        merged.update(sub)
    merged.update(cfg)
    return merged


def _check_names(cfg: dict[str, Any], path: Path, policy: Policy, found: Findings, resolve: bool) -> None:
    """Metrics, ``process_results`` and filters that name code without a tag, counted as code; names lm-eval
    would drop, refused."""
    names = named_code.scan(cfg)
    named_code.check_unknown(names, str(path))
    if not names.code:
        return
    found.code.setdefault(path, []).extend(named_code.described(names))
    if resolve and not policy.trusted:
        raise ConfigError("an lm-eval task file would run Python code (a metric lm-eval loads with evaluate.load)",
                          where=str(path), given="; ".join(named_code.described(names)[:3]),
                          fix="set task.trust_include_code=true only if you trust the code it names")
    if policy.trusted:
        named_code.check_offline(names, str(path))


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _read(path: Path, policy: Policy, origin: Path | None) -> bytes:
    where = str(path) if origin is None else f"{path} (included by {origin})"
    try:
        size = path.stat().st_size
        if size > policy.max_bytes:
            raise ConfigError("an lm-eval task file is over the size limit", where=where,
                              given=f"{size / 1024:.0f} KiB", allowed=f"at most {policy.max_bytes // 1024} KiB "
                              "(task.yaml_max_kb)", fix="raise task.yaml_max_kb if the file is meant to be this large")
        with open(path, "rb") as handle:
            data = handle.read(min(policy.max_bytes, size) + 1)
    except OSError as err:
        raise ConfigError("an lm-eval task file cannot be read", where=where, given=f"{type(err).__name__}: {err}") from None
    if len(data) > policy.max_bytes:  # grew since stat
        raise ConfigError("an lm-eval task file is over the size limit", where=where,
                          allowed=f"at most {policy.max_bytes // 1024} KiB (task.yaml_max_kb)")
    return data


def _parser(data: bytes) -> Any:
    """lm-eval's parser class over the bytes, as lm-eval gives them (it opens the file in binary: the parser
    decodes UTF-8 or, after a byte-order mark, UTF-16)."""
    from lm_eval.tasks._yaml_loader import _Base

    return _Base(data)


def _check_events(data: bytes, path: Path, policy: Policy) -> list[str]:
    """The ``!function`` values the file names; refuses other non-core tags, alias bombs, recursive aliases
    and deep nesting. Reads events, so nothing is composed or expanded before the counts are known."""
    import yaml

    functions: list[str] = []
    sizes: dict[str, int] = {}  # anchor -> nodes its subtree expands to
    stack: list[list[Any]] = [[None, 0]]  # open collections: [anchor, expanded nodes so far]
    parser = _parser(data)
    try:
        while parser.check_event():
            event = parser.get_event()
            if isinstance(event, yaml.NodeEvent) and not isinstance(event, yaml.AliasEvent):
                _check_tag(event, path, policy, functions)
            if isinstance(event, yaml.AliasEvent):
                if any(frame[0] == event.anchor for frame in stack):
                    raise ConfigError("an alias refers to the node that contains it (a recursive structure)",
                                      where=str(path), given=f"*{event.anchor}", fix="remove the alias")
                if event.anchor not in sizes:
                    raise ConfigError("an alias names no anchor defined before it", where=str(path),
                                      given=f"*{event.anchor}")
                _add(stack, sizes[event.anchor], path, policy)
            elif isinstance(event, yaml.ScalarEvent):
                if event.anchor:
                    sizes[event.anchor] = 1
                _add(stack, 1, path, policy)
            elif isinstance(event, yaml.CollectionStartEvent):
                if len(stack) > MAX_DEPTH:
                    raise ConfigError("an lm-eval task file nests deeper than the loader allows", where=str(path),
                                      allowed=f"at most {MAX_DEPTH} levels")
                stack.append([event.anchor, 1])
            elif isinstance(event, yaml.CollectionEndEvent):
                anchor, count = stack.pop()
                if anchor:
                    sizes[anchor] = count
                _add(stack, count, path, policy)
    except yaml.YAMLError as err:
        raise ConfigError("not a YAML file lm-eval can read", where=str(path),
                          given=" ".join(str(err).split())[:300],
                          fix="lm-eval reads UTF-8 or UTF-16 with a byte-order mark; fix the syntax the message "
                              "points at") from None
    finally:
        parser.dispose()
    return functions


def _add(stack: list[list[Any]], count: int, path: Path, policy: Policy) -> None:
    stack[-1][1] += count
    total = sum(frame[1] for frame in stack)  # an upper bound of what is open, cheap at these depths
    if total > policy.max_nodes:
        raise ConfigError("an lm-eval task file expands to too many nodes once its aliases are expanded",
                          where=str(path), given=f"over {policy.max_nodes} nodes",
                          allowed=f"at most {policy.max_nodes} (task.yaml_max_nodes)",
                          fix="remove the aliases that repeat large anchors (a billion-laughs file), or raise "
                              "task.yaml_max_nodes if the file is meant to be this large")


def _check_tag(event: Any, path: Path, policy: Policy, functions: list[str]) -> None:
    tag = event.tag
    if tag is None or tag == "!" or (tag.startswith(_CORE) and not tag[len(_CORE):].startswith("python")):
        return
    if tag == FUNCTION:
        functions.append(str(getattr(event, "value", "")))
        return
    raise ConfigError("an lm-eval task file carries a tag the loader does not read as data", where=str(path),
                      given=tag, allowed="YAML's core tags, and !function with task.trust_include_code=true",
                      fix="remove the tag")


def _construct(data: bytes, path: Path, policy: Policy, resolve: bool) -> Any:
    """The file's data, built by lm-eval's parser class with this module's ``!function`` constructor."""
    import yaml
    from lm_eval.tasks._yaml_loader import _Base, _import_func_in_yml

    base = path.parent

    def function(loader: Any, node: Any) -> Any:
        spec = loader.construct_scalar(node)
        if not resolve:
            return named_code.NamedFunction(base / spec)  # what lm-eval's index keeps: a name, nothing imported
        if not policy.trusted:
            raise ConfigError("an lm-eval task file would run Python code (!function)", where=str(path), given=spec,
                              fix="set task.trust_include_code=true only if you trust the code it names")
        return _import_func_in_yml(spec, base)

    class Loader(_Base):  # type: ignore[misc, valid-type]
        pass

    yaml.add_constructor(FUNCTION, function, Loader=Loader)
    try:
        return yaml.load(data, Loader=Loader)  # noqa: S506 - the events were checked: no tag but !function builds code
    except yaml.YAMLError as err:
        raise ConfigError("not a YAML file lm-eval can read", where=str(path), given=" ".join(str(err).split())[:300]) from None
