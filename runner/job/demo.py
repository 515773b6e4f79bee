"""The reference entries the embedded demo reads (``make demo``: ``experiment=embedded_gate``; ``make
demo-release``: ``experiment=embedded_release`` and the gate policy it names).

Each job of those experiments' sweeps is composed as ``python -m runner experiment=E quant=Q task=T`` would
compose it, and its reference key is found as ``runner.plan`` finds it (the task's protocol and sampling
parts, ``reference.against``): a record job whose key is one of them, in the project's own references/
directory, would change what the demo compares against. Only record jobs replacing an entry there ask.
"""

from __future__ import annotations

import functools
import logging
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from runner.config.gate import apply_policy
from runner.config.schemas import RunnerConfig
from runner.config.store import register_schemas
from runner.contract.build import build
from runner.contract.reasoning import key_parts
from runner.contract.spec import AccuracySpec
from runner.references import store

DEMO_EXPERIMENTS = ("embedded_gate", "embedded_release")
"""The committed experiments the README and the Makefile run as the demo."""


@dataclass(frozen=True)
class DemoJob:
    experiment: str
    overrides: tuple[str, ...]  # quant=Q task=T
    task: str  # the reference file's name (task.name)
    model: str
    key: AccuracySpec  # the entry it is judged against


def readers(ref_dir: str | os.PathLike[str], task: str, model: str, spec: AccuracySpec) -> list[DemoJob]:
    """The demo's jobs judged against the entry of ``(task, model, spec)`` in ``ref_dir``: none unless
    ``ref_dir`` is the project's own references/ directory (the one the demo reads)."""
    if Path(ref_dir).resolve() != store.default_reference_dir().resolve():
        return []
    return [j for j in demo_jobs() if (j.task, j.model, j.key) == (task, model, spec)]


def describe(jobs: list[DemoJob]) -> str:
    """``experiment=embedded_gate (3 jobs: quant=none task=mmlu_0shot, ...)`` for each experiment."""
    counts = Counter(j.experiment for j in jobs)
    return "; ".join(f"experiment={e} ({counts[e]} job{'s' if counts[e] > 1 else ''}: "
                     + ", ".join(" ".join(j.overrides) for j in jobs if j.experiment == e) + ")" for e in counts)


@functools.lru_cache(maxsize=1)
def demo_jobs() -> tuple[DemoJob, ...]:
    """Every job of the demo's sweeps with the entry it reads (the committed config files do not change while
    a process runs: composed once)."""
    jobs = []
    for experiment in DEMO_EXPERIMENTS:
        sweep = _composed([f"experiment={experiment}"], hydra=True).hydra.sweeper.params or {}
        points = [[]]
        for key, value in sweep.items():
            parsed = OverridesParser.create().parse_overrides([f"{key}={value}"])[0]
            values = list(parsed.sweep_string_iterator()) if parsed.is_sweep_override() \
                else [parsed.get_value_element_as_str()]
            points = [[*p, f"{key}={v}"] for p in points for v in values]
        for point in points:
            jobs.append(_job(experiment, tuple(point)))
    return tuple(jobs)


def _job(experiment: str, point: tuple[str, ...]) -> DemoJob:
    cfg = _composed([f"experiment={experiment}", *point])
    runner_log = logging.getLogger("runner")
    level = runner_log.level
    runner_log.setLevel(logging.WARNING)  # the policy's INFO lines describe the demo's jobs, not this one
    try:
        apply_policy(cfg)
    finally:
        runner_log.setLevel(level)
    config = OmegaConf.to_object(cfg)
    assert isinstance(config, RunnerConfig)
    task, quant = config.task, config.quant
    extra = build(task, "task").extra_acc_spec()
    # the dtype is known once a model loads: the demo's entries are keyed on "auto", as runner.plan asks
    spec = AccuracySpec(dtype="auto", quant_algo=quant.quant_algo, kv_cache_quant_algo=quant.kv_cache_quant_algo,
                        extra_acc_spec=",".join(p for p in (extra, *key_parts(task)) if p) or None)
    return DemoJob(experiment, point, task.name, config.model.hf_id, store.judged_key(spec, config.reference.against))


def _composed(overrides: list[str], hydra: bool = False) -> DictConfig:
    """The config ``python -m runner OVERRIDES`` composes, from inside a running app or outside one."""
    register_schemas()
    overrides = [*overrides, "output_dir=."]
    if GlobalHydra.instance().is_initialized():
        return compose("config", overrides=overrides, return_hydra_config=hydra)
    with initialize_config_module(config_module="conf", version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=hydra)
