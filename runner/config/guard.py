"""The command line, checked before Hydra starts: overrides of Hydra's own nodes that would run code from
outside the project, write where they should not, or that Hydra would answer with a traceback.

Hydra instantiates its callbacks, launcher, sweeper and logging handlers itself, before the job
sees its config, so the project-classes-only rule of :mod:`runner.contract.build` cannot apply there. This
check runs on the command line before Hydra starts: under ``hydra.*`` a ``_target_`` must name
Hydra's launchers, sweepers and callbacks, a Hydra plugin's or this project's classes (not Hydra's
utilities, which call what they are given), and a logging ``class``/``()`` must name the
standard library's logging or Hydra's. The handlers of Hydra's logging (``hydra.job_logging.handlers.*``)
are not set from the command line at all: a handler writes where and how it is told
(``handlers.file.filename=F +handlers.file.mode=w`` truncates F); the ``hydra/job_logging`` options
choose how a job logs.

The run directory given on the command line (``hydra.run.dir``, ``hydra.sweep.dir``) is checked here
too, because Hydra creates it and writes ``.hydra/`` into it before the job starts: it must be a
directory that can be created and written, and ``hydra.run.dir`` may name an earlier run's directory
(one holding its results) only with ``overwrite_output=true``. A key added with ``+`` under ``hydra``
must be one of Hydra's schema (below its free-form nodes anything goes), and nothing can be added under
a top-level node that is empty until an option fills it (``+gate.x`` without ``gate=NAME``).
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, Iterator, Sequence

from hydra._internal.utils import get_args_parser
from hydra.conf import HydraConf
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException

from runner.config.schemas import RunnerConfig
from runner.contract.errors import ConfigError
from runner.contract.secrets import redact_text
from runner.files.writable import check_output_dir

CALLABLE_PREFIXES = ("runner.", "evaluators.", "hydra_plugins.", "hydra._internal.core_plugins.",
                     "hydra.experimental.callbacks.")
LOGGING_PREFIXES = ("logging.", "hydra.")
LOGGING_NODES = ("hydra.job_logging", "hydra.hydra_logging")
RUN_DIRS = ("hydra.run.dir", "hydra.sweep.dir")
EARLIER_RUN_FILES = ("results.json", "report.json", "samples.jsonl")
"""Files a finished (or partly finished) job leaves in its directory."""


def check_overrides(argv: Sequence[str]) -> None:
    """Raise :class:`ConfigError` for an override that makes Hydra build something foreign or write where it
    should not, or for flags and keys Hydra would refuse with a traceback."""

    args, _ = get_args_parser().parse_known_args(list(argv))
    if args.multirun and (args.cfg or args.info or args.shell_completion):
        flag = "--cfg" if args.cfg else "--info" if args.info else "--shell-completion"
        raise ConfigError(f"-m (a sweep) and {flag} cannot be combined: {flag} shows one composed job",
                          where="the command line", given=" ".join(argv),
                          fix=f"drop -m and give one value per key to see that job (python -m runner task=mmlu {flag} job)")
    try:
        overrides = OverridesParser.create().parse_overrides(args.overrides or [])
    except HydraException:
        return  # Hydra reports its own parse errors with a message
    overwrite = any(o.key_or_group == "overwrite_output" and str(o.value()).lower() == "true" for o in overrides
                    if not o.is_sweep_override())
    inspecting = bool(args.cfg or args.info or args.help or args.hydra_help or args.shell_completion)
    check_secret_dirnames(args.overrides or [])
    for override in overrides:
        key = override.key_or_group
        if override.is_add():
            _check_added_key(key, override.input_line, {o.key_or_group for o in overrides})
        if not key.startswith("hydra.") and key != "hydra":
            continue
        for path, value in _leaves(key, _values(override)):
            _check(path, value, override.input_line)
            _check_logging_handler(path, override.input_line)
            if path in RUN_DIRS and not inspecting and isinstance(value, str) and "${" not in value:
                check_run_dir(path, value, overwrite=overwrite or path != "hydra.run.dir")


def check_secret_dirnames(argv: Sequence[str]) -> None:
    """Refuse a directory named from the overrides (``${hydra.job.override_dirname}``) when an override holds a
    secret: Hydra creates the directory before any code of the runner runs, so its name cannot be redacted."""
    def key(arg: str) -> str:
        return arg.split("=", 1)[0].lstrip("+~")

    named = [a for a in argv if key(a).startswith("hydra.") and "override_dirname" in a.split("=", 1)[-1]]
    excluded = {k.strip() for a in argv if key(a) == "hydra.job.config.override_dirname.exclude_keys"
                for k in a.split("=", 1)[-1].strip("[]").split(",")}
    secret = [a for a in argv if redact_text(a) != a and key(a) not in excluded and not key(a).startswith("hydra.")]
    if named and secret:
        raise ConfigError("a directory named from the overrides would hold a secret in its name", where=named[0],
                          given=" ".join(redact_text(a) for a in secret[:3]),
                          fix="exclude the secret's key with hydra.job.config.override_dirname.exclude_keys=[KEY], "
                              "name the directory otherwise, or pass the secret by an environment variable "
                              "(backend.api_key_env)")


def _values(override: Any) -> list[Any]:
    if override.is_sweep_override():
        return list(override.sweep_string_iterator())
    return [override.value()]


def _leaves(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(f"{prefix}.{k}", v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(prefix, v)
    else:
        yield prefix, value


def _check(path: str, value: Any, line: str | None) -> None:
    leaf = path.rpartition(".")[2]
    logging_node = path.startswith(LOGGING_NODES)
    if leaf == "_target_":
        allowed = CALLABLE_PREFIXES
    elif logging_node and leaf in ("class", "()"):
        allowed = LOGGING_PREFIXES
    else:
        return
    if not str(value).startswith(allowed):
        raise ConfigError("this override would make Hydra call code from outside the project",
                          where=path, given=line or f"{path}={value}",
                          allowed="names starting with " + ", ".join(allowed),
                          fix="remove the override; to change how jobs run, choose a hydra/launcher, "
                          "hydra/job_logging or experiment option instead")


def _check_added_key(key: str, line: str | None, chosen: set[str]) -> None:
    """``+a.b=v`` under a node that is null until an option fills it (``+gate.x``: Hydra fails with an
    AssertionError), or an unknown key added under ``hydra.`` (Hydra would keep and ignore it)."""
    head, _, rest = key.partition(".")
    fields = {f.name: f for f in dataclasses.fields(RunnerConfig)}
    if rest and head in fields and fields[head].default is None and head not in chosen:
        raise ConfigError(f"{head} is empty until an option is chosen, so nothing can be added under it",
                          where=key, given=line or key, allowed=f"{head}=<option> (the files under conf/{head}/)",
                          fix=f"choose an option with {head}=NAME, then change its keys with {key}=VALUE (no +)")
    if head != "hydra" or not rest:
        return
    schema: Any = HydraConf
    prefix = "hydra"
    for part in rest.split("."):
        known = {f.name for f in dataclasses.fields(schema)}
        if part not in known:
            raise ConfigError("unknown key added under hydra", where=f"{prefix}.{part}", given=line or key,
                              allowed=", ".join(f"{prefix}.{name}" for name in sorted(known)),
                              fix="check the spelling; `+` adds keys, a plain key=value changes one that exists")
        nested = _dataclass_of(schema, part)
        if nested is None:
            return  # a free-form node (job_logging, callbacks, launcher, env_set...): anything may be added
        schema, prefix = nested, f"{prefix}.{part}"


def _dataclass_of(schema: Any, name: str) -> Any:
    """The dataclass a field of ``schema`` holds, or None for a free-form or plain field."""
    hints = typing.get_type_hints(schema)
    hint = hints.get(name)
    return hint if isinstance(hint, type) and dataclasses.is_dataclass(hint) else None


def _check_logging_handler(path: str, line: str | None) -> None:
    node = next((n for n in LOGGING_NODES if path.startswith(n + ".")), None)
    if node is None:
        return
    rest = path[len(node) + 1:].split(".")
    if rest[0] == "handlers":
        raise ConfigError("Hydra's logging handlers are not set from the command line: a handler writes where and "
                          "how it is told (a file handler with mode=w truncates its file)",
                          where=path, given=line or path,
                          allowed=f"{node}.root.level=LEVEL and the other levels; a {node.replace('.', '/')} option "
                          "(default, disabled, none)",
                          fix=f"remove the override; choose {node.replace('.', '/')}=disabled to silence the log, or "
                          "read the job's log in its run directory (runner.log)")


def check_run_dir(where: str, value: str, overwrite: bool) -> None:
    """The run directory can be created and written; an earlier run's directory needs ``overwrite_output=true``."""
    path = Path(value).expanduser().absolute()
    if path.is_dir() and not overwrite:
        earlier = [name for name in EARLIER_RUN_FILES if (path / name).exists()]
        if earlier:
            raise ConfigError("the run directory holds an earlier run's results, which this run would replace",
                              where=where, given=f"{value} (holds {', '.join(earlier)})",
                              allowed="a new or empty directory, or overwrite_output=true to replace that run",
                              fix="leave hydra.run.dir unset (every run gets its own directory), choose a new one, "
                              "or add overwrite_output=true")
    check_output_dir(value, where, "the run directory", "choose a writable place (leave hydra.run.dir unset for "
                     "outputs/ here)")
