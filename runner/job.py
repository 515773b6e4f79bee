"""One evaluation job: ``run(cfg) -> Outcome``. Plain function; never reads Hydra global state.

Order matters for the user's time: the tracking store is checked first, the model is loaded
and its effective spec read back, the reference is looked up, and only then is anything
evaluated. Per-sample outputs and the report are written to the output directory before
they are sent to the tracker, so a tracker failure at the end loses nothing.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from runner.backends.base import ChatFormat, GenerationRequest, LoglikelihoodRequest, TaskLimits
from runner.build import build_object
from runner.errors import EXIT_OK, EXIT_REGRESSION, ConfigError
from runner.provenance import flatten, project_commit
from runner.spec import AccuracySpec
from runner.decision import Decision, decide_against, validate as validate_stats
from runner.stats import HypothesisParams

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


def run(cfg: DictConfig) -> Outcome:
    mode = cfg.reference.mode
    if mode not in REFERENCE_MODES:
        raise ConfigError("unknown reference mode", where="reference.mode", given=mode, allowed=", ".join(REFERENCE_MODES))
    if cfg.reference.against not in REFERENCE_AGAINST:
        raise ConfigError("unknown reference target", where="reference.against", given=cfg.reference.against,
                          allowed=", ".join(REFERENCE_AGAINST))
    task = OmegaConf.to_object(cfg.task)
    model = OmegaConf.to_object(cfg.model)
    quant = OmegaConf.to_object(cfg.quant)
    validate_stats(cfg.stats)
    defaults = HypothesisParams(task.alpha, task.beta, task.sigma, task.num_samples, task.higher_is_better)

    evaluator = build_object(cfg.task)
    backend = build_object(
        cfg.backend, model=model, quant=quant,
        limits=TaskLimits(task.max_input_len, task.max_output_len, task.max_batch_size,
                          getattr(task, "guided_decoding", "none")),
        chat=ChatFormat(task.apply_chat_template, task.system_prompt),
    )
    if getattr(evaluator, "uses_loglikelihood", False) and not getattr(backend, "supports_loglikelihood", True):
        raise ConfigError("this backend cannot score log-likelihood requests", where=f"backend={cfg.backend.name}",
                          given=f"task={task.name} with log-likelihood scoring",
                          fix=getattr(evaluator, "loglikelihood_fix", "use task.scoring=generate (upstream's protocol), or backend=hf"))
    if hasattr(backend, "preflight"):
        backend.preflight()
    tracker = build_object(cfg.tracking)
    tracker.check()
    out_dir = Path(cfg.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    (out_dir / "config.yaml").write_text(OmegaConf.to_yaml(resolved))

    run_name, tags = run_identity(cfg)
    tracker.start(run_name, flatten(resolved), tags)
    try:
        outcome = _evaluate(cfg, task, model, quant, defaults, evaluator, backend, tracker, out_dir, mode)
    except BaseException as err:
        tracker.set_tags({"error": f"{type(err).__name__}: {err}"[:5000]})
        write_failure(out_dir, err, tracker.run_id)
        tracker.log_artifacts(out_dir)
        tracker.end("FAILED" if not isinstance(err, KeyboardInterrupt) else "KILLED")
        raise
    tracker.end("FINISHED")
    print(_summary(outcome, tracker), flush=True)
    return outcome


def run_identity(cfg: DictConfig) -> tuple[str, dict[str, str]]:
    """The MLflow run name and tags of a job; inside a sweep, the tag that nests it under the parent run."""
    from runner.sweep import parent_run_id

    tags = {
        "model": cfg.model.hf_id, "model_name": cfg.model.name, "task": cfg.task.name, "quant": cfg.quant.name,
        "quant_algo": str(cfg.quant.quant_algo), "kv_cache_quant_algo": str(cfg.quant.kv_cache_quant_algo),
        "backend": cfg.backend.name, "reference_mode": cfg.reference.mode, "runner_commit": project_commit(),
    }
    parent = parent_run_id()
    if parent:
        tags["mlflow.parentRunId"] = parent
    return f"{cfg.model.name}-{cfg.quant.name}-{cfg.task.name}", tags


def write_failure(out_dir: Path, err: BaseException, run_id: str | None) -> None:
    """``failure.json`` in the job's directory: what a sweep summary lists for a job that did not finish."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "failure.json").write_text(json.dumps(
        {"error": f"{type(err).__name__}: {err}"[:5000], "mlflow_run_id": run_id}, indent=2) + "\n")


def _evaluate(cfg: DictConfig, task: Any, model: Any, quant: Any, defaults: HypothesisParams,
              evaluator: Any, backend: Any, tracker: Any, out_dir: Path, mode: str) -> Outcome:
    from runner import generation_cache, references

    ref_dir = Path(cfg.reference.dir) if cfg.reference.dir else references.default_reference_dir()
    with backend:
        info = backend.info()
        _check_effective_spec(quant, info.spec)
        if hasattr(evaluator, "bind_backend"):  # an evaluator whose protocol depends on what the backend can do
            evaluator.bind_backend(info)
        spec = replace(info.spec, extra_acc_spec=evaluator.extra_acc_spec())
        log.info("loaded %s on %s: effective spec %s", info.model_path, info.device, spec.describe())
        detail_tags, detail_metrics = backend_details_for_tracking(info.details)
        tracker.set_tags({f"version.{k}": v for k, v in info.versions.items()} | detail_tags
                         | {"device": info.device, "effective_dtype": spec.dtype, "extra_acc_spec": str(spec.extra_acc_spec)})
        tracker.log_metrics(detail_metrics)
        reference = None
        params = defaults
        notes: list[str] = []
        if mode == "check":
            key = spec
            if cfg.reference.against == "baseline":
                key = replace(spec, quant_algo=None, kv_cache_quant_algo=None)
                notes.append(f"compared with the unquantized baseline reference [{key.describe()}]")
            reference = references.lookup(ref_dir, task.name, task.metric, model.hf_id, key, defaults)
            params = reference.params
            log.info("reference %s = %.4f (%s, entry %d)", task.metric, reference.value, reference.path.name, reference.index)
        if hasattr(evaluator, "use_token_counter") and hasattr(backend, "count_tokens"):
            evaluator.use_token_counter(backend.count_tokens)  # length filters in the model's tokens (perplexity)
        samples = evaluator.samples(params.num_samples, cfg.seed)
        for note in _sample_count_notes(task.num_samples, params.num_samples, len(samples), reference is not None):
            log.warning(note)
            notes.append(note)
        log.info("evaluating %d %s samples (seed %d) with %s", len(samples), task.name, cfg.seed, info.name)
        gen_cache = generation_cache.open_for_job(
            cfg, info, TaskLimits(task.max_input_len, task.max_output_len, task.max_batch_size,
                                  info.details.get("guided_decoding", "none")),
            ChatFormat(task.apply_chat_template, task.system_prompt))
        started = time.monotonic()
        scored = _score_all(evaluator, backend, samples, gen_cache, cfg.cache.chunk_size)
        eval_time_s = time.monotonic() - started  # requests answered and scored (model loading excluded)
        cache_stats = _log_cache(gen_cache, tracker)
    metrics = evaluator.aggregate(scored)
    score = metrics[task.metric]
    _write_samples(out_dir / "samples.jsonl", scored)

    params = replace(params, num_samples=max(len(scored), 1))  # the statistics use what was evaluated
    decision = None
    if reference is not None:
        from runner.decision import RunProvenance

        gates = evaluator.extra_gates(metrics, reference) if hasattr(evaluator, "extra_gates") else []
        chance = evaluator.chance_level(samples) if hasattr(evaluator, "chance_level") else task.chance_level
        decision = decide_against(reference, ref_dir, scored, score, params, cfg.stats, chance, task.metric,
                                  RunProvenance(cfg.seed, getattr(evaluator, "source_used", None)), gates)
        notes += decision.notes
    record_path = None
    if mode == "record":
        from runner import reference_samples

        samples_file, samples_sha = reference_samples.store(
            ref_dir, task.name, ((s.sample_id, s.score, s.prompt) for s in scored))
        record_path = references.record(
            ref_dir, task.name, task.metric, model.hf_id, spec, score,
            provenance={
                "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                "backend": info.name, "device": info.device, "versions": dict(info.versions),
                "num_samples": len(scored), "seed": cfg.seed, "mlflow_run_id": tracker.run_id,
                "runner_commit": project_commit(), "model_source": info.details.get("model_source", ""),
                "dataset_source": getattr(evaluator, "source_used", None) or "",
                "samples": samples_file, "samples_sha256": samples_sha,
            },
            extra={"num_samples": task.num_samples}
            | (evaluator.reference_extras(metrics) if hasattr(evaluator, "reference_extras") else {}))
        notes.append(f"recorded {task.metric}={score:.4f} for {model.hf_id} [{spec.describe()}] in {record_path}")

    report = _report_text(task, model, spec, score, len(scored), params, decision, mode, notes)
    (out_dir / "report.txt").write_text(report + "\n")
    payload = {"task": task.name, "model": model.hf_id, "spec": asdict(spec), "metrics": metrics,
               "num_evaluated": len(scored), "decision": decision.to_dict() if decision else None,
               "verdict": decision.verdict.to_dict() if decision else None,
               "paired": decision.paired.to_dict() if decision and decision.paired else None,
               "decided_by": decision.rule if decision else None, "passed": decision.all_passed if decision else None,
               "backend": asdict(info), "notes": notes, "generation_cache": cache_stats,
               "mlflow_run_id": tracker.run_id, "eval_time_s": round(eval_time_s, 2)}
    (out_dir / "report.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(report, flush=True)

    logged = {"score": score, "num_samples": float(len(scored)), "num_evaluated": float(len(scored)),
              "eval_time_s": eval_time_s, "theta": params.theta}
    logged |= {k.replace(",", "_"): v for k, v in metrics.items()}
    if decision is not None:
        logged |= decision.metrics()
        if decision.theta is None:
            logged.pop("theta")
    tracker.log_metrics(logged)
    tracker.set_tags({"verdict": "none" if decision is None else ("passed" if decision.all_passed else "regression"),
                      "decided_by": decision.rule if decision else "none"})
    tracker.log_artifacts(out_dir)
    status = EXIT_REGRESSION if decision is not None and not decision.all_passed else EXIT_OK
    return Outcome(status, score, metrics, spec, out_dir, decision, tracker.run_id, record_path, notes)


def _sample_count_notes(asked: int, planned: int, selected: int, checked: bool) -> list[str]:
    """Say, before anything is evaluated, when the number of samples differs from what the user asked."""
    notes = []
    if checked and planned != asked:
        notes.append(f"the reference entry fixes num_samples={planned} (task.num_samples={asked} not used); "
                     "use reference.mode=skip to evaluate another n")
    if selected != planned:
        why = ("the task draws the same number from every stratum (subject), rounding up" if selected > planned
               else "the dataset has fewer samples")
        notes.append(f"{selected} samples are evaluated, not {planned}: {why}; the statistics use n={selected}")
    return notes


def backend_details_for_tracking(details: dict[str, str]) -> tuple[dict[str, str], dict[str, float]]:
    """What the backend did to get the model ready, as searchable MLflow values.

    Every detail becomes a ``backend.<name>`` tag (engine or quantized-model cache hit/miss, engine
    path, calibration data), so the MLflow UI can filter runs by them; the timings (``*_time_s``:
    engine build, ModelOpt calibration, cached-model load) also become metrics, so they can be
    compared and plotted across a sweep."""
    tags = {f"backend.{name}": str(value)[:5000] for name, value in details.items()}
    metrics: dict[str, float] = {}
    for name, value in details.items():
        if name.endswith("_time_s"):
            try:
                metrics[name] = float(value)
            except (TypeError, ValueError):
                continue
    return tags, metrics


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


def _score_all(evaluator: Any, backend: Any, samples: list[Any], cache: Any = None, chunk_size: int = 0) -> list[Any]:
    """Collect every request, send each kind to the backend in one call, then score.

    With a generation cache (``runner.generation_cache``), cached responses are read back and only
    the misses are sent, ``chunk_size`` at a time, each chunk stored as soon as it returns."""
    per_sample = [evaluator.requests(s) for s in samples]
    flat = [r for reqs in per_sample for r in reqs]
    gen_idx = [i for i, r in enumerate(flat) if isinstance(r, GenerationRequest)]
    ll_idx = [i for i, r in enumerate(flat) if isinstance(r, LoglikelihoodRequest)]
    responses: list[Any] = [None] * len(flat)
    for idx, method in ((gen_idx, backend.generate), (ll_idx, backend.loglikelihood)):
        if not idx:
            continue
        batch = [flat[i] for i in idx]
        outs = method(batch) if cache is None else cache.resolve(batch, method, chunk_size)
        for i, out in zip(idx, outs):
            responses[i] = out
    grouped, pos = [], 0
    for reqs in per_sample:
        grouped.append(responses[pos:pos + len(reqs)])
        pos += len(reqs)
    if hasattr(evaluator, "score_batch"):  # scorers that work in parallel (HumanEval executes code)
        return list(evaluator.score_batch(samples, grouped))
    return [evaluator.score(sample, resp) for sample, resp in zip(samples, grouped)]


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


def _write_samples(path: Path, scored: list[Any]) -> None:
    with open(path, "w") as handle:
        for s in scored:
            handle.write(json.dumps({"sample_id": s.sample_id, "prediction": s.prediction, "target": s.target,
                                     "score": s.score, "meta": s.meta, "prompt": s.prompt}) + "\n")


def _report_text(task: Any, model: Any, spec: AccuracySpec, score: float, evaluated: int,
                 params: HypothesisParams, decision: Decision | None, mode: str, notes: list[str]) -> str:
    lines = [
        "=" * 72,
        f"{task.name} | {model.hf_id} | {spec.describe()}",
        f"{task.metric}: {score:.4f} on {evaluated} samples",
    ]
    if decision is not None:
        lines.append(decision.render())
    else:
        lines.append(f"no verdict (reference.mode={mode}); theta at n={params.num_samples}: {params.theta:.4f}")
    lines += [f"note: {n}" for n in notes]
    lines.append("=" * 72)
    return "\n".join(lines)


def _summary(outcome: Outcome, tracker: Any) -> str:
    if outcome.decision is None:
        result = "NO VERDICT"
    else:
        result = ("PASSED" if outcome.decision.all_passed else "REGRESSION DETECTED") + f" ({outcome.decision.test})"
    return "\n".join([
        f"result: {result} (exit {outcome.exit_status})",
        f"outputs: {outcome.output_dir} (report.txt, report.json, samples.jsonl)",
        f"tracking: {tracker.where()}",
    ])
