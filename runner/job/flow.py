"""One evaluation job: ``run(cfg) -> Outcome``, the flow of the steps this package names. A plain function;
it never reads Hydra's global state.

The Hydra config is checked and converted to typed objects here, once; every step below takes those.
The order respects the user's time: everything that can fail without the model first (:mod:`prepare`),
then load -> reference -> samples -> answer -> decide -> record -> publish. Results are written to the
output directory before they go to the tracker, so a tracker failure at the end loses nothing.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from runner.config.gate import apply_policy
from runner.config.schemas import RunnerConfig
from runner.config.validate import check_job
from runner.contract.fingerprint import fingerprint
from runner.contract.secrets import redact_tree
from runner.files.paths import write_atomic
from runner.files.redaction import redact_saved_configs
from runner.contract.errors import EndpointError
from runner.job import indicators
from runner.job.answer import answer
from runner.job.decide import acceptance_gates, advise, decide
from runner.job.expect import expectation
from runner.job.extension_check import check_job as check_extension
from runner.job.fidelity import plan_note, run_fidelity
from runner.job.load import load
from runner.job.noise import check_tolerance as check_floor, measured as measured_noise
from runner.job.looks import monitor_for
from runner.job.prepare import prepare
from runner.job.publish import publish
from runner.job.record import record, warn_at_chance
from runner.job.replicate import measure as measure_replicates
from runner.job.reference import find_reference
from runner.job.samples import select_samples
from runner.job.state import Job, Outcome
from runner.reports.outputs import write_failure, write_samples
from runner.reports.text import summary_line
from runner.stats.rules.extension import ExtensionResult
from runner.stats.settings import margin_points
from runner.stats.data.verdicts import INCONCLUSIVE
from runner.stats.data.tolerance import check_binary_range
from runner.stats.settings import resolve_tolerance
from runner.tracking.naming import run_identity
from runner.tracking.provenance import flatten
from runner.tracking.trackers import first_look_run_id, parent_run_id
from runner.job.warn import warn

log = logging.getLogger("runner")


def typed(cfg: DictConfig) -> RunnerConfig:
    """The composed config, checked for unknown keys and ranges, as the typed objects of its schemas; a release
    policy's entry for the task (``gate=...``) is written into it first, so it is logged with the job."""
    apply_policy(cfg)
    check_job(cfg)
    config = OmegaConf.to_object(cfg)
    assert isinstance(config, RunnerConfig)
    if config.model.path and OmegaConf.is_interpolation(cfg.model, "hf_id"):
        log.info("model identity from the checkpoint %s: hf_id=%s (the reference key), name=%s",
                 config.model.path, config.model.hf_id, config.model.name)
    return config


def asked_num_samples(cfg: DictConfig, config: RunnerConfig) -> int | None:
    """The n the run was asked for (the command line, an experiment or a gate policy set ``task.num_samples``);
    None when it is still the schema's interpolation of the task's default, so the reference's n applies."""
    return None if OmegaConf.is_interpolation(cfg.task, "num_samples") else config.task.num_samples


def run(cfg: DictConfig) -> Outcome:
    config = typed(cfg)
    job = prepare(config)
    job.asked_num_samples = asked_num_samples(cfg, config)
    resolved = redact_tree(OmegaConf.to_container(cfg, resolve=True))  # URL secrets stay out of files and MLflow
    # what the task resolved when it loaded (task=lm_eval: metric auto -> its name), as the job uses it
    resolved["task"] |= {k: getattr(config.task, k) for k in ("metric", "higher_is_better", "cluster_key")}
    write_atomic(job.out_dir / "config.yaml", OmegaConf.to_yaml(resolved), 0o644)
    redact_hydra_files(job.out_dir)
    stats = config.stats
    look = (len(stats.extend or []) + 1, stats.extensions + 1) if stats.extensions else None
    run_name, tags = run_identity(config.model, config.quant, config.task, config.backend.name, config.reference.mode,
                                  parent_run_id(), look, first_look_run_id())
    job.tracker.start(run_name, flatten(resolved), tags)
    try:
        outcome = evaluate(job)
    except BaseException as err:
        job.tracker.set_tags({"error": f"{type(err).__name__}: {err}"[:5000]})
        write_failure(job.out_dir, err, job.tracker.run_id)
        job.tracker.log_artifacts(job.out_dir)
        job.tracker.end("FAILED" if not isinstance(err, KeyboardInterrupt) else "KILLED")
        raise
    job.tracker.end("FINISHED")
    print(summary_line(outcome.decision, outcome.exit_status, outcome.output_dir, job.tracker.where()), flush=True)
    return outcome


def redact_hydra_files(out_dir: Path) -> None:
    """Hydra saved the composed config and the overrides (``.hydra/``) before the job ran: rewrite them
    with URL credentials and secret query parameters redacted (:mod:`runner.contract.secrets`)."""
    redact_saved_configs(out_dir / ".hydra")


def check_scale(job: Job, reference: float) -> None:
    """Before any request: a tolerance or margin outside a 0/100 metric's range (the reference's per-sample scores
    tell the scale) is refused, not met by a traceback or a certain verdict after the run."""
    rows = job.reference_rows or {}
    if job.tolerance is not None and rows and all(r.score in (0.0, 100.0) for r in rows.values()):
        where = f"stats.margin, or the tolerance ({job.tolerance.source})"
        check_binary_range(job.tolerance.points, margin_points(job.config.stats, reference), where)


def expect(job: Job) -> None:
    """Before the model loads: a job expected to take more than a minute says how long (:mod:`runner.job.expect`)."""
    note = expectation(job)
    if note:
        warn(job, note)


def evaluate(job: Job) -> Outcome:
    check_extension(job)  # a reference that cannot pair an extension's looks: before the model loads
    expect(job)
    with job.backend:
        loaded = load(job)
        job.host = fingerprint(loaded.info, job.backend.host_fields())
        replicating = job.mode == "record" and job.config.reference.noise == "replicate"
        perturbations = job.backend.perturbations() if replicating else []
        reference, params = find_reference(job, loaded.spec)
        job.noise = measured_noise(job)
        samples = select_samples(job, params, reference is not None)
        if reference is not None and job.tolerance is None:
            job.tolerance = resolve_tolerance(job.config.stats, job.task, reference.value)
            check_scale(job, reference.value)
            check_floor(job)
        samples, monitor = monitor_for(job, reference, params, samples)
        scored, eval_time_s, cache_stats = answer(job, loaded.info, samples, monitor, reference, params)
        job.gates = acceptance_gates(job)
        write_samples(job.out_dir / "samples.jsonl", scored)  # every sample, the failed ones too
        samples, scored, failures = indicators.exclude_failures(job, samples[:len(scored)], scored)
        metrics = job.evaluator.aggregate(scored)
        params = replace(params, num_samples=max(len(scored), 1))  # the statistics use what was evaluated
        marks = indicators.measured(job, samples, scored, metrics, failures) if reference is not None else None
        decision = decide(job, reference, samples, scored, metrics, params, monitor, marks)
        if decision is not None and decision.outcome == INCONCLUSIVE and (decision.indicators is None or not
                decision.indicators.blocks) and (monitor is None or isinstance(decision.sequential, ExtensionResult)):
            advise(job, decision)  # more samples cannot undo a truncation
            plan = plan_note(job, run_fidelity(job.reference_rows or {}, scored))
            if plan:
                job.notes.append(f"fidelity: {plan}")
    if job.mode == "record" and failures is not None and failures.over_cap:
        raise EndpointError("the backend failed on too many samples to record a reference",
                            where="stats.max_failed_share", given=failures.describe(),
                            fix="check the server or backend (its log says why) and record again; samples.jsonl "
                                "in the output directory keeps every answer")
    if job.mode == "record":
        warn_at_chance(job, samples[:len(scored)], metrics)
    replicates = measure_replicates(job, perturbations, samples, scored) if replicating else []
    record_path = record(job, loaded, scored, metrics, replicates) if job.mode == "record" else None
    return publish(job, loaded, scored, metrics, params, decision, record_path, eval_time_s, cache_stats, replicates)
