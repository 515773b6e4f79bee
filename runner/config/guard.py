"""Command-line overrides of Hydra's own nodes that would run code from outside the project.

Hydra instantiates its callbacks, launcher, sweeper and logging handlers itself, before the job
sees its config, so the project-classes-only rule of :mod:`runner.contract.build` cannot apply there. This
check runs on the command line before Hydra starts: under ``hydra.*`` a ``_target_`` must name
Hydra's launchers, sweepers and callbacks, a Hydra plugin's or this project's classes (not Hydra's
utilities, which call what they are given), and a logging ``class``/``()`` must name the
standard library's logging or Hydra's.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from hydra._internal.utils import get_args_parser
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException

from runner.contract.errors import ConfigError

CALLABLE_PREFIXES = ("runner.", "evaluators.", "hydra_plugins.", "hydra._internal.core_plugins.",
                     "hydra.experimental.callbacks.")
LOGGING_PREFIXES = ("logging.", "hydra.")
LOGGING_NODES = ("hydra.job_logging", "hydra.hydra_logging")


def check_overrides(argv: Sequence[str]) -> None:
    """Raise :class:`ConfigError` for an override that makes Hydra build something foreign, or for
    flags Hydra would refuse with a traceback."""

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
    for override in overrides:
        key = override.key_or_group
        if not key.startswith("hydra.") and key != "hydra":
            continue
        for path, value in _leaves(key, _values(override)):
            _check(path, value, override.input_line)


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
