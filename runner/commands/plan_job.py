"""What ``python -m runner.plan OVERRIDES`` plans with: the task's test parameters and the reference entry a run
of those overrides would be judged against, found before any model loads.

When no entry matches, the plan still holds the task's n and test parameters (a baseline is recorded at that n),
with the lookup's error beside it: ``python -m runner.plan`` prints the sample size and says what to record.

A task that reads its rows from a packaged copy by default (MMLU, GPQA offline) keys its references with
``dataset=packaged``; upstream's entries are keyed on the benchmark's own dataset. The planner asks about the
benchmark's own dataset first unless the overrides name a source, so ``task=mmlu model=llama31_8b quant=fp8``
finds upstream's entry, and falls back to the packaged copy's key (the embedded model's entries).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from runner.contract.errors import ConfigError, ReferenceError_, UserError
from runner.contract.reasoning import key_parts
from runner.contract.spec import AccuracySpec
from runner.references.store import Reference
from runner.stats.data.hypothesis import HypothesisParams, check_params


@dataclass(frozen=True)
class PlannedJob:
    task: str
    model: str
    metric: str
    reference: Reference | None  # None: no entry matches (``missing`` says why)
    spec: AccuracySpec
    dataset: str  # which dataset source the matched entry is keyed on, in words
    params: HypothesisParams | None = None  # the test's parameters: the entry's, else the task's (the n a run uses)
    missing: ReferenceError_ | None = None  # why no entry matched
    method: str = "auto"  # stats.method of the job

    @property
    def test(self) -> HypothesisParams:
        """The parameters the job is judged with: the matched entry's, else the task's."""
        if self.params is not None:
            return self.params
        assert self.reference is not None
        return self.reference.params


def task_defaults(task: str) -> tuple[str, HypothesisParams]:
    """The task's metric and test parameters, read from the composed Hydra config."""
    from hydra import compose, initialize_config_module  # lazy: --help stays cheap
    from runner.config.store import register_schemas  # lazy: --help stays cheap

    register_schemas()
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"task={task}"])
    t = cfg.task
    check_params(t.alpha, t.beta, t.sigma, t.num_samples, t.higher_is_better, where=f"conf/task/{task}.yaml")
    return str(t.metric), HypothesisParams(t.alpha, t.beta, t.sigma, t.num_samples, t.higher_is_better)


def planned_job(overrides: list[str], missing_ok: bool = False) -> PlannedJob:
    """The entry ``python -m runner OVERRIDES`` would be judged against, with the task's parameters and the
    entry's overrides; the requested spec carries the task's reference-key parts (``extra_acc_spec``).
    No entry matching raises the lookup's error, or with ``missing_ok`` plans with the task's parameters."""
    from hydra import compose, initialize_config_module  # lazy: --help stays cheap
    from hydra.errors import HydraException  # lazy: --help stays cheap
    from runner.config.store import register_schemas  # lazy: --help stays cheap
    from runner.contract.build import build  # lazy: --help stays cheap
    from runner.job.flow import asked_num_samples, typed  # lazy: --help stays cheap
    from runner.references.store import default_reference_dir, judged_key, lookup  # lazy: --help stays cheap

    register_schemas()
    try:
        with initialize_config_module(config_module="conf", version_base="1.3"):
            cfg = compose("config", overrides=[*overrides, "output_dir=."])
    except HydraException as err:
        raise ConfigError("these overrides do not compose", where="the command line", given=" ".join(overrides),
                          fix=" ".join(str(err).split())[:400]) from None
    config = typed(cfg)
    t = config.task
    built = build(t, "task")  # a task whose metric and direction come from its definition (task=lm_eval) writes them first
    check_params(t.alpha, t.beta, t.sigma, t.num_samples, t.higher_is_better, where="task")
    defaults = HypothesisParams(t.alpha, t.beta, t.sigma, t.num_samples, t.higher_is_better)
    ref_dir = Path(config.reference.dir) if config.reference.dir else default_reference_dir()
    tries = [(t, f"task.dataset.source={t.dataset.source}")]
    if t.dataset.source == "auto" and not t.dataset.local_path and t.dataset.hub_id:
        own = replace(t, dataset=replace(t.dataset, source="hub"))
        tries = [(own, f"the benchmark's own ({t.dataset.hub_id}; task.dataset.source=packaged plans the packaged "
                       "copy's entry)"), (t, "the packaged copy (no entry is keyed on the benchmark's own dataset)")]
    asked = asked_num_samples(cfg, config)
    baseline = "; reference.against=baseline: the unquantized entry" if config.reference.against == "baseline" else ""
    first: ReferenceError_ | None = None
    missed: tuple[ReferenceError_, AccuracySpec, str] | None = None  # the run's own key's miss: what it would record
    unreachable: UserError | None = None  # the benchmark's own dataset, when it cannot be read (offline)
    for task, dataset in tries:
        try:
            # the benchmark's own dataset may be out of reach (offline): the packaged copy's key is tried next
            extra = (built if task is t else build(task, "task")).extra_acc_spec()
            # the dtype is known once a model loads: "auto" matches entries of any dtype, as upstream's lookup does
            spec = AccuracySpec(dtype="auto", quant_algo=config.quant.quant_algo,
                                kv_cache_quant_algo=config.quant.kv_cache_quant_algo,
                                extra_acc_spec=",".join(p for p in (extra, *key_parts(task)) if p) or None)
            spec = judged_key(spec, config.reference.against)
            found = lookup(ref_dir, t.name, t.metric, config.model.hf_id, spec, defaults)
        except ReferenceError_ as err:
            first = first or err
            if task is t:
                missed = (err, spec, dataset)
            continue
        except UserError as err:
            if task is t:
                raise
            unreachable = err
            continue
        if asked is not None:  # an n the run sets wins over the entry's, as in a run
            found = replace(found, params=replace(found.params, num_samples=t.num_samples))
        return PlannedJob(t.name, config.model.hf_id, t.metric, found, spec, dataset + baseline,
                          method=config.stats.method)
    if first is None and unreachable is not None:
        raise unreachable
    assert first is not None
    if not missing_ok or missed is None:
        raise first
    err, spec, dataset = missed
    return PlannedJob(t.name, config.model.hf_id, t.metric, None, spec, dataset + baseline, defaults, err,
                      config.stats.method)
