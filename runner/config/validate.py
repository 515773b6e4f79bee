"""Checks of the composed job that its schemas cannot express: unknown keys, value ranges, metrics, corrections.

Hydra's ``+key=value`` adds a key even under a typed group or at the top (``+foo=1``), so a typo
(``+task.num_sample=16``) would be carried along and ignored; every node typed by a dataclass schema,
the top-level job included, may hold only the schema's fields. Sizes and lengths must be positive and
seeds non-negative; sigma 0 (the exact rule: every sample must pass) is refused for a task whose schema
says its scores are statistical. ``task.metric`` must be one the task computes (its schema's ``METRICS``,
else its default): an unknown name would be reported as the score under a made-up name. The sweep's
correction and alpha are checked in a single job too, where they would otherwise be ignored until a
sweep used them.
"""

from __future__ import annotations

import dataclasses
import os

from omegaconf import DictConfig, OmegaConf

from runner.contract.errors import ConfigError
from runner.files.writable import check_output_file
from runner.stats.multiple_testing import validate as validate_correction

POSITIVE = ("task.default_num_samples", "task.num_samples", "task.max_input_len", "task.max_output_len",
            "task.max_batch_size", "cache.chunk_size", "quant.group_size", "quant.calib_num_samples", "quant.calib_batch_size",
            "quant.calib_max_seq_length", "quant.calib_max_batch_tokens", "backend.max_batch_size", "backend.max_num_tokens",
            "backend.tensor_parallel_size", "backend.pipeline_parallel_size")
NON_NEGATIVE = ("seed", "task.num_fewshot", "quant.calib_seed", "stats.bootstrap_seed", "backend.num_threads")
SEEDS = ("seed", "quant.calib_seed", "stats.bootstrap_seed")
MAX_SEED = 2**32 - 1
"""numpy's generators take seeds below 2**32; a larger one would fail after the model loaded."""
SKIPPED = ("hydra",)
REQUIRED_NAMES = ("task.lm_eval_task",)
"""Required settings whose schema default is empty rather than ``???``: Hydra resolves the run directory, which
names the task, before the job starts, and a ``???`` there would end in its traceback instead of this message."""


def check_job(cfg: DictConfig) -> None:
    """Raise :class:`ConfigError` for the first unknown key or out-of-range value."""
    _check_top_level_keys(cfg)
    _check_missing(cfg, "")
    for key in cfg.keys():
        if key not in SKIPPED and isinstance(cfg.get(key), DictConfig):
            check_known_keys(cfg[key], str(key))
    for key in POSITIVE:
        _check_int(cfg, key, 1, "a whole number >= 1")
    for key in NON_NEGATIVE:
        _check_int(cfg, key, 0, "a whole number >= 0")
    for key in SEEDS:
        _check_int(cfg, key, 0, f"a whole number from 0 to {MAX_SEED}", MAX_SEED)
    _check_threads(cfg)
    _check_durations(cfg, "")
    _check_sigma(cfg)
    _check_metric(cfg)
    _check_report_paths(cfg)
    sweep = cfg.get("sweep")
    if isinstance(sweep, DictConfig):
        validate_correction(sweep.get("correction"), sweep.get("alpha"))
        validate_correction(sweep.get("go_correction"), None, "sweep.go_correction")


def _check_top_level_keys(cfg: DictConfig) -> None:
    schema = OmegaConf.get_type(cfg)
    if schema is None or not dataclasses.is_dataclass(schema):
        return
    known = {f.name for f in dataclasses.fields(schema)} | set(SKIPPED)
    unknown = sorted(str(k) for k in cfg.keys() if k not in known)
    if unknown:
        raise ConfigError("unknown key at the top level of the config", where=unknown[0], given=", ".join(unknown),
                          allowed=", ".join(sorted(known - set(SKIPPED))),
                          fix="check the spelling and the group (task.x, backend.x...); `+` adds keys, "
                          "a plain key=value changes one that exists")


def check_known_keys(node: DictConfig, where: str) -> None:
    schema = OmegaConf.get_type(node)
    if schema is not None and dataclasses.is_dataclass(schema):
        known = {f.name for f in dataclasses.fields(schema)}
        unknown = sorted(str(k) for k in node.keys() if k not in known)
        if unknown:
            raise ConfigError("unknown key under a typed config group", where=f"{where}.{unknown[0]}",
                              given=", ".join(f"{where}.{k}" for k in unknown),
                              allowed=", ".join(sorted(known - {"_target_"})),
                              fix="check the spelling; `+` adds keys, a plain key=value changes one that exists")
    for key in node.keys():
        child = node._get_node(key)
        if isinstance(child, DictConfig) and not child._is_none() and not child._is_missing():
            check_known_keys(child, f"{where}.{key}")


def _check_int(cfg: DictConfig, key: str, low: int, allowed: str, high: int | None = None) -> None:
    value = OmegaConf.select(cfg, key, default=None)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        raise ConfigError("value out of range", where=key, given=repr(value), allowed=allowed,
                          fix=f"set {key} to a value in the allowed range")


MAX_SECONDS = 10**7
"""A duration setting (``*_s``) at most 10^7 s (116 days): more is no limit, and sleeping that long overflows."""


def _check_durations(node: DictConfig, where: str) -> None:
    """Every ``*_s`` number finite, not negative and at most :data:`MAX_SECONDS`."""
    for key in node.keys():
        if key in SKIPPED and not where:
            continue
        path = f"{where}.{key}" if where else str(key)
        child = node._get_node(key)
        if isinstance(child, DictConfig):
            if not child._is_none() and not child._is_missing():
                _check_durations(child, path)
            continue
        value = OmegaConf.select(node, str(key), default=None, throw_on_resolution_failure=False)
        if str(key).endswith("_s") and isinstance(value, (int, float)) and not isinstance(value, bool):
            if not 0 <= value <= MAX_SECONDS:  # NaN fails both comparisons
                raise ConfigError("a duration out of range", where=path, given=repr(value),
                                  allowed=f"0 to {MAX_SECONDS} seconds", fix=f"set {path} to a number of seconds in range")


def _check_threads(cfg: DictConfig) -> None:
    """``backend.num_threads`` at most the cores this process may run on: more threads than cores made a job 60
    times slower, and far more ended in a segmentation fault inside the math library."""
    value = OmegaConf.select(cfg, "backend.num_threads", default=None)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if isinstance(value, int) and not isinstance(value, bool) and value > cores:
        raise ConfigError("more compute threads than this host has cores", where="backend.num_threads",
                          given=str(value), allowed=f"0 (the library's default) to {cores}",
                          fix=f"set backend.num_threads={cores} or leave it unset")


def _check_sigma(cfg: DictConfig) -> None:
    task = cfg.get("task")
    schema = OmegaConf.get_type(task) if isinstance(task, DictConfig) else None
    if schema is None or not dataclasses.is_dataclass(schema) or task.get("sigma") != 0:
        return
    default = {f.name: f.default for f in dataclasses.fields(schema)}.get("sigma")
    if isinstance(default, (int, float)) and default > 0:
        raise ConfigError("sigma 0 turns this statistical task into the exact rule (every sample must pass)",
                          where="task.sigma", given="0", allowed=f"a standard deviation > 0 (this task's default: {default:g})",
                          fix="drop the override; to tolerate a small drop use stats.margin, "
                          "to demand an exact match use a task whose scores are deterministic")


def _check_metric(cfg: DictConfig) -> None:
    task = cfg.get("task")
    schema = OmegaConf.get_type(task) if isinstance(task, DictConfig) else None
    if schema is None or not dataclasses.is_dataclass(schema) or "metric" not in task:
        return
    if getattr(schema, "METRICS_FROM_DEFINITION", False):
        return
    declared = tuple(getattr(schema, "METRICS", ()))
    allowed = declared or ({f.name: f.default for f in dataclasses.fields(schema)}.get("metric"),)
    if task.metric not in allowed:
        raise ConfigError(f"task {task.get('name')} does not compute this metric", where="task.metric",
                          given=repr(task.metric), allowed=", ".join(str(m) for m in allowed),
                          fix="drop the override, or choose one of the allowed metrics")


def _check_report_paths(cfg: DictConfig) -> None:
    """``report.junit`` and ``report.markdown`` are written after the job: a directory or an unwritable place is
    refused now, before any request, not when the results are in."""
    report = cfg.get("report")
    if not isinstance(report, DictConfig):
        return
    for key in ("junit", "markdown"):
        value = report.get(key)
        if value:
            check_output_file(str(value), f"report.{key}")


def _check_missing(node: DictConfig, where: str) -> None:
    """A mandatory value left unset (``???``: ``task=lm_eval`` without ``task.lm_eval_task``) is named, not
    found by a traceback when the config is typed."""
    for key in node.keys():
        path = f"{where}.{key}" if where else str(key)
        if path in SKIPPED:
            continue
        if OmegaConf.is_missing(node, key) or (path in REQUIRED_NAMES and not node.get(key)):
            raise ConfigError("a required setting is not given", where=path, given="nothing",
                              fix=f"add {path}=VALUE to the command line"
                                  + (" (the lm-evaluation-harness task's name, e.g. task.lm_eval_task=arc_easy)"
                                     if path == "task.lm_eval_task" else ""))
        child = node._get_node(key)
        if isinstance(child, DictConfig) and not OmegaConf.is_interpolation(node, key):
            _check_missing(child, path)
