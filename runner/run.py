"""One evaluation job: ``run(cfg) -> Outcome``. Plain function; never reads Hydra global state.

The steps, in the order that respects the user's time: everything that can fail without the model
is checked first (:func:`prepare`: config, capabilities, libraries, the tracking store); then the
model is loaded and its effective spec read back (:func:`load`), the reference is looked up with
it (:func:`find_reference`), the samples are chosen (:func:`select_samples`), answered in bulk
through the generation cache (:func:`answer`), decided (:func:`decide`), recorded if asked
(:func:`record`) and published (:func:`publish`). Results are written to the output directory
before they go to the tracker, so a tracker failure at the end loses nothing.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from runner import report
from runner.backends.base import ChatFormat, TaskLimits
from runner.build import build_object
from runner.config.validate import check_job
from runner.errors import EXIT_OK, ConfigError
from runner.exports.lm_eval import results_json
from runner.backends.models import resolve_model_source
from runner.model_identity import check_architecture
from runner.paths import check_name, write_atomic
from runner.pipeline import score_all
from runner.provenance import flatten, project_commit
from runner.spec import AccuracySpec
from runner.stats.decision import Decision, RunProvenance, decide_against
from runner.stats.settings import validate as validate_stats
from runner.stats import claims as claim_rules
from runner.stats.extension import ExtensionResult
from runner.stats.unpaired import HypothesisParams, check_params
from runner.looks import monitor_for
from runner.stats.verdicts import INCONCLUSIVE, Tolerance, resolve_tolerance
from runner.tracking.trackers import parent_run_id

log = logging.getLogger("runner")
REFERENCE_MODES = ("check", "record", "skip")
REFERENCE_AGAINST = ("spec", "baseline")


@dataclass
class Outcome:
    """What a job produced; ``exit_status`` is what the command line exits with."""

    exit_status: int
    score: float
    metrics: dict[str, float]
    spec: AccuracySpec
    output_dir: Path
    decision: Decision | None = None
    run_id: str | None = None
    reference_file: Path | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Job:
    """Everything built from the config before the model loads."""

    cfg: DictConfig
    task: Any
    model: Any
    quant: Any
    evaluator: Any
    backend: Any
    tracker: Any
    out_dir: Path
    ref_dir: Path
    defaults: HypothesisParams
    limits: TaskLimits
    chat: ChatFormat
    notes: list[str] = field(default_factory=list)
    reference: Any = None  # the matched reference entry, once looked up
    tolerance: Tolerance | None = None  # the GO claim's, once the reference is known

    @property
    def mode(self) -> str:
        return self.cfg.reference.mode


@dataclass
class Loaded:
    info: Any  # BackendInfo
    spec: AccuracySpec  # the effective spec with the task's protocol deviations: the reference key


def run(cfg: DictConfig) -> Outcome:
    job = prepare(cfg)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    run_name, tags = report.run_identity(cfg, parent_run_id())
    job.tracker.start(run_name, flatten(resolved), tags)
    try:
        outcome = evaluate(job)
    except BaseException as err:
        job.tracker.set_tags({"error": f"{type(err).__name__}: {err}"[:5000]})
        report.write_failure(job.out_dir, err, job.tracker.run_id)
        job.tracker.log_artifacts(job.out_dir)
        job.tracker.end("FAILED" if not isinstance(err, KeyboardInterrupt) else "KILLED")
        raise
    job.tracker.end("FINISHED")
    print(report.summary_line(outcome.decision, outcome.exit_status, outcome.output_dir, job.tracker.where()), flush=True)
    return outcome


def prepare(cfg: DictConfig) -> Job:
    """Build and check everything that needs no model: a mistake here costs the user no compute."""
    from runner.cache import generations
    from runner.references import store as references

    check_job(cfg)
    if cfg.reference.mode not in REFERENCE_MODES:
        raise ConfigError("unknown reference mode", where="reference.mode", given=cfg.reference.mode,
                          allowed=", ".join(REFERENCE_MODES))
    if cfg.reference.against not in REFERENCE_AGAINST:
        raise ConfigError("unknown reference target", where="reference.against", given=cfg.reference.against,
                          allowed=", ".join(REFERENCE_AGAINST))
    task = OmegaConf.to_object(cfg.task)
    model = OmegaConf.to_object(cfg.model)
    quant = OmegaConf.to_object(cfg.quant)
    for where, name in (("task.name", task.name), ("model.name", model.name), ("quant.name", quant.name)):
        check_name(name, where)
    if model.path:
        resolve_model_source(model.name, model.hf_id, model.path, None)  # a missing directory, before anything else
    check_architecture(model)
    if model.path and OmegaConf.is_interpolation(cfg.model, "hf_id"):
        log.info("model identity from the checkpoint %s: hf_id=%s (the reference key), name=%s",
                 model.path, model.hf_id, model.name)
    validate_stats(cfg.stats)
    check_params(task.alpha, task.beta, task.sigma, task.num_samples, task.higher_is_better, where="task")
    defaults = HypothesisParams(task.alpha, task.beta, task.sigma, task.num_samples, task.higher_is_better)
    limits = TaskLimits(task.max_input_len, task.max_output_len, task.max_batch_size,
                        getattr(task, "guided_decoding", "none"))
    chat = ChatFormat(task.apply_chat_template, task.system_prompt)
    evaluator = build_object(cfg.task)
    backend = build_object(cfg.backend, model=model, quant=quant, limits=limits, chat=chat)
    if evaluator.uses_loglikelihood and not backend.capabilities.loglikelihood:
        raise ConfigError("this backend cannot score log-likelihood requests", where=f"backend={cfg.backend.name}",
                          given=f"task={task.name} with log-likelihood scoring",
                          fix="; or ".join(f for f in (evaluator.loglikelihood_fix, backend.capabilities.loglikelihood_fix) if f))
    backend.preflight()
    tracker = build_object(cfg.tracking)
    tracker.check()
    generations.preflight(cfg)
    ref_dir = Path(cfg.reference.dir) if cfg.reference.dir else references.default_reference_dir()
    if cfg.reference.mode != "skip":
        references.preflight(ref_dir, task.name, model.hf_id, writing=cfg.reference.mode == "record")
    out_dir = prepare_output_dir(Path(cfg.output_dir))
    write_atomic(out_dir / "config.yaml", OmegaConf.to_yaml(OmegaConf.to_container(cfg, resolve=True)), 0o644)
    job = Job(cfg, task, model, quant, evaluator, backend, tracker, out_dir, ref_dir, defaults, limits, chat)
    if model.trust_remote_code:
        note = (f"model.trust_remote_code=true: Python code shipped with the checkpoint ({model.path or model.hf_id}) "
                "runs in this process; use it only for checkpoints you trust")
        log.warning(note)
        job.notes.append(note)
    return job


def prepare_output_dir(out_dir: Path) -> Path:
    """The job's output directory, created and checked writable before any model loads."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ConfigError("the output directory cannot be written", where="output_dir (hydra.run.dir)",
                          given=f"{out_dir} ({err.strerror or err})",
                          fix="choose a writable place with output_dir=DIR or hydra.run.dir=DIR") from None
    return out_dir


def evaluate(job: Job) -> Outcome:
    with job.backend:
        loaded = load(job)
        reference, params = find_reference(job, loaded.spec)
        samples = select_samples(job, params, reference is not None)
        if reference is not None and job.tolerance is None:
            job.tolerance = resolve_tolerance(job.cfg.stats, job.task, reference.value)
        samples, monitor = monitor_for(job, reference, params, samples)
        scored, eval_time_s, cache_stats = answer(job, loaded.info, samples, monitor, reference, params)
        metrics = job.evaluator.aggregate(scored)
        report.write_samples(job.out_dir / "samples.jsonl", scored)
        params = replace(params, num_samples=max(len(scored), 1))  # the statistics use what was evaluated
        decision = decide(job, reference, samples[:len(scored)], scored, metrics, params, monitor)
        if decision is not None and decision.outcome == INCONCLUSIVE and (
                monitor is None or isinstance(decision.sequential, ExtensionResult)):
            advise(job, decision)
    record_path = record(job, loaded, scored, metrics) if job.mode == "record" else None
    return publish(job, loaded, scored, metrics, params, decision, record_path, eval_time_s, cache_stats)


def load(job: Job) -> Loaded:
    """The model is loaded (``with backend`` entered); read back what it is and tell the tracker."""
    info = job.backend.info()
    _check_effective_spec(job.quant, info.spec)
    job.evaluator.bind_backend(info)
    parts = (job.evaluator.extra_acc_spec(), info.spec.extra_acc_spec)  # the task's protocol, then the backend's
    spec = replace(info.spec, extra_acc_spec=",".join(p for p in parts if p) or None)
    if info.spec_declared:
        job.notes.append(f"accuracy spec declared in the config, not read back from the model: {spec.describe()}")
    log.info("loaded %s on %s: effective spec %s", info.model_path, info.device, spec.describe())
    detail_tags, detail_metrics = report.backend_details_for_tracking(info.details)
    job.tracker.set_tags({f"version.{k}": v for k, v in info.versions.items()} | detail_tags
                         | {"device": info.device, "effective_dtype": spec.dtype, "extra_acc_spec": str(spec.extra_acc_spec)})
    job.tracker.log_metrics(detail_metrics)
    return Loaded(info, spec)


def find_reference(job: Job, spec: AccuracySpec) -> tuple[Any, HypothesisParams]:
    """The reference entry of the effective spec (or of the unquantized baseline), and its test parameters."""
    from runner.references import store as references

    if job.mode == "record":
        note = references.check_replacement(job.ref_dir, job.task.name, job.task.metric, job.model.hf_id, spec,
                                            job.cfg.reference.overwrite, job.defaults.num_samples)
        if note:
            log.warning(note)
            job.notes.append(note)
    if job.mode != "check":
        return None, job.defaults
    key = spec
    if job.cfg.reference.against == "baseline":
        key = replace(spec, quant_algo=None, kv_cache_quant_algo=None)
        job.notes.append(f"compared with the unquantized baseline reference [{key.describe()}]")
    reference = references.lookup(job.ref_dir, job.task.name, job.task.metric, job.model.hf_id, key, job.defaults)
    job.reference = reference
    log.info("reference %s = %.4f (%s, entry %d)", job.task.metric, reference.value, reference.path.name, reference.index)
    return reference, reference.params


def select_samples(job: Job, params: HypothesisParams, checked: bool) -> list[Any]:
    """The seeded subset; says before any request is sent when its size differs from what was asked."""
    if job.backend.capabilities.token_counter:
        job.evaluator.use_token_counter(job.backend.count_tokens)  # length filters in the model's tokens
    samples = job.evaluator.samples(params.num_samples, job.cfg.seed)
    for note in report.sample_count_notes(job.task.num_samples, params.num_samples, len(samples), checked):
        log.warning(note)
        job.notes.append(note)
    log.info("evaluating %d %s samples (seed %d)", len(samples), job.task.name, job.cfg.seed)
    return samples


def answer(job: Job, info: Any, samples: list[Any], monitor: Any = None, reference: Any = None,
           params: HypothesisParams | None = None) -> tuple[list[Any], float, dict[str, Any] | None]:
    """Every request answered in bulk, through the generation cache when it is on, and scored.

    With a sequential monitor, each look answers the next prefix of ``samples`` in one bulk call and
    stops once a boundary is crossed."""
    from runner.cache import generations

    limits = replace(job.limits, guided_decoding=info.details.get("guided_decoding", "none"))
    cache = generations.open_for_job(job.cfg, info, limits, job.chat)
    answerer = job.backend if cache is None else generations.CachedBackend(job.backend, cache, job.cfg.cache.chunk_size)
    started = time.monotonic()
    if monitor is None:
        scored = score_all(job.evaluator, answerer, samples)
    else:
        scored = []
        for n_k in monitor.sizes:
            scored += score_all(job.evaluator, answerer, samples[len(scored):n_k])
            metrics = job.evaluator.aggregate(scored)
            prefix = replace(params, num_samples=len(scored))
            look = monitor.observe(_decision(job, reference, samples[:len(scored)], scored, metrics, prefix), len(scored))
            log.info("sequential look %d: n=%d Z=%s bounds [%.3f, %.3f]%s", len(monitor.looks), look.n,
                     "n/a" if look.z is None else f"{look.z:.3f}", look.futility, look.efficacy,
                     f" -> stop ({monitor.stopped})" if monitor.stopped else "")
            if monitor.stopped:
                break
    eval_time_s = time.monotonic() - started  # requests answered and scored (model loading excluded)
    return scored, eval_time_s, _log_cache(cache, job.tracker)


def decide(job: Job, reference: Any, samples: list[Any], scored: list[Any], metrics: dict[str, float],
           params: HypothesisParams, monitor: Any = None) -> Decision | None:
    if reference is None:
        return None
    decision = _decision(job, reference, samples, scored, metrics, params)
    if monitor is not None:
        decision.sequential = monitor.result(decision.passed, decision.p_value)
        decision.passed = decision.sequential.passed
        if decision.claims is not None:
            seq, p = decision.sequential, decision.paired
            if isinstance(seq, ExtensionResult):
                counts = seq.counts
                if seq.reason == "undecided" and seq.extensions_left:
                    job.notes.append(f"{seq.extensions_left} of {seq.planned} planned extension(s) left: "
                                     f"python -m runner.extend {job.out_dir} [N] adds N samples (default: as many as "
                                      "the first look) as the next look")
            else:
                counts = (*p.discordant, p.n) if p is not None and p.discordant is not None else None
            decision.claims = claim_rules.sequential(not seq.passed, *seq.bound(), params.higher_is_better,
                                                     params.alpha, decision.margin, decision.tolerance.points, counts)
    job.notes.extend(decision.notes)
    return decision


def advise(job: Job, decision: Decision) -> None:
    """How many more samples would decide; the backend is still open, so the task can say whether it has them."""
    from runner.stats import advice

    recorded = (job.reference.recorded or {}) if job.reference is not None else {}
    first_look = decision.sequential.looks[0].n if isinstance(decision.sequential, ExtensionResult) else None
    found = advice.for_decision(decision, recorded.get("num_samples") or first_look)
    if found is not None and found.n_total is not None:
        have = len(job.evaluator.samples(found.n_total, job.cfg.seed))
        found = replace(found, available=have if have < found.n_total else None)
    decision.advice = found


def _decision(job: Job, reference: Any, samples: list[Any], scored: list[Any], metrics: dict[str, float],
              params: HypothesisParams) -> Decision:
    ev = job.evaluator
    return decide_against(reference, job.ref_dir, scored, metrics[job.task.metric], params, job.cfg.stats,
                          ev.chance_level(samples), job.task.metric, RunProvenance(job.cfg.seed, ev.source_used),
                          ev.extra_gates(metrics, reference), job.tolerance)


def record(job: Job, loaded: Loaded, scored: list[Any], metrics: dict[str, float]) -> Path:
    """Write the score as the reference of the effective spec, with its per-sample scores and provenance."""
    from runner.references import samples as reference_samples
    from runner.references import recording as references

    task, info, score = job.task, loaded.info, metrics[job.task.metric]
    samples_file, samples_sha = reference_samples.store(
        job.ref_dir, task.name, ((s.sample_id, s.score, s.prompt) for s in scored))
    path = references.record(
        job.ref_dir, task.name, task.metric, job.model.hf_id, loaded.spec, score,
        provenance={
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "backend": info.name, "device": info.device, "versions": dict(info.versions),
            "num_samples": len(scored), "seed": job.cfg.seed, "mlflow_run_id": job.tracker.run_id,
            "runner_commit": project_commit(), "model_source": info.details.get("model_source", ""),
            "dataset_source": job.evaluator.source_used or "",
            "samples": samples_file, "samples_sha256": samples_sha,
        },
        extra={"num_samples": task.num_samples} | job.evaluator.reference_extras(metrics))
    job.notes.append(f"recorded {task.metric}={score:.4f} for {job.model.hf_id} [{loaded.spec.describe()}] in {path}")
    return path


def publish(job: Job, loaded: Loaded, scored: list[Any], metrics: dict[str, float], params: HypothesisParams,
            decision: Decision | None, record_path: Path | None, eval_time_s: float, cache_stats: Any) -> Outcome:
    """report.txt, report.json, then the tracker: the same figures everywhere."""
    task, score = job.task, metrics[job.task.metric]
    text = report.report_text(task, job.model, loaded.spec, score, len(scored), params, decision, job.mode, job.notes)
    write_atomic(job.out_dir / "report.txt", text + "\n", 0o644)
    payload = report.report_payload(task, job.model, loaded.spec, metrics, len(scored), decision, loaded.info,
                                    job.notes, cache_stats, job.tracker.run_id, eval_time_s)
    write_atomic(job.out_dir / "report.json", json.dumps(payload, indent=2, default=str) + "\n", 0o644)
    results = results_json(task, job.model, loaded.spec, metrics, [s.score for s in scored], loaded.info, eval_time_s,
                           payload["decision"])
    write_atomic(job.out_dir / "results.json", json.dumps(results, indent=2, default=str) + "\n", 0o644)
    print(text, flush=True)
    job.tracker.log_metrics(report.tracked_metrics(score, metrics, len(scored), eval_time_s, params, decision))
    job.tracker.set_tags(report.readable_tags(decision))
    job.tracker.set_description(text)
    try:
        log_tables(job, scored, metrics)
    except Exception as err:  # views for the UI: the results are on disk and logged below; never fail the job
        log.warning("could not log the tables to the tracker (%s: %s)", type(err).__name__, err)
    job.tracker.log_artifacts(job.out_dir)
    status = decision.exit_status if decision is not None else EXIT_OK
    return Outcome(status, score, metrics, loaded.spec, job.out_dir, decision, job.tracker.run_id, record_path, job.notes)


def log_tables(job: Job, scored: list[Any], metrics: dict[str, float]) -> None:
    """Per-sample results, breakdowns and the samples that moved against the reference, as tables."""
    from runner.tracking import tables

    job.tracker.log_dataset(tables.dataset_rows(scored), f"{job.task.name}-{len(scored)}",
                            job.evaluator.source_used or job.task.name)
    job.tracker.log_table(tables.samples_table(scored), "samples")
    breakdown = report.breakdown_table(metrics)
    if breakdown:
        job.tracker.log_table(breakdown, "breakdown")
    recorded = (job.reference.recorded or {}) if job.reference is not None else {}
    if recorded.get("samples"):
        from runner.references import samples as reference_samples

        flipped = tables.flipped_table(reference_samples.load(job.ref_dir, recorded["samples"]), scored,
                                       job.task.higher_is_better)
        if flipped:
            job.tracker.log_table(flipped, "flipped_samples")


def _check_effective_spec(quant: Any, effective: AccuracySpec) -> None:
    """Rule: the reference key is what was loaded; if it differs from what was asked, stop."""
    asked = (quant.quant_algo, quant.kv_cache_quant_algo)
    got = (effective.quant_algo, effective.kv_cache_quant_algo)
    if asked != got:
        raise ConfigError(
            "the loaded model's accuracy spec differs from the requested one",
            where=f"quant={quant.name}", given=f"loaded quant_algo={got[0]}, kv_cache_quant_algo={got[1]}",
            allowed=f"quant_algo={asked[0]}, kv_cache_quant_algo={asked[1]}",
            fix="choose the quant option that matches the checkpoint, or point model.path at the right checkpoint",
        )




def _log_cache(cache: Any, tracker: Any) -> dict[str, Any] | None:
    """Say how much the generation cache answered (log line and MLflow metrics)."""
    if cache is None:
        log.info("generation cache: off")
        return None
    total = cache.hits + cache.misses
    log.info("generation cache: %d hits, %d misses (%.0f%% answered from %s)", cache.hits, cache.misses,
             100.0 * cache.hits / total if total else 0.0, cache.store.path)
    tracker.log_metrics({"cache_hits": float(cache.hits), "cache_misses": float(cache.misses)})
    return {"hits": cache.hits, "misses": cache.misses, "path": str(cache.store.path)}

