"""What a job writes for people and machines: the report text, report.json, samples.jsonl, failure.json,
and the MLflow run's name, tags and metrics."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from runner.paths import write_atomic
from runner.provenance import project_commit
from runner.spec import AccuracySpec
from runner.stats.decision import Decision
from runner.stats.unpaired import HypothesisParams
from runner.stats.verdicts import CODES, WORDS


def run_identity(cfg: Any, parent_run_id: str | None) -> tuple[str, dict[str, str]]:
    """The MLflow run name and tags of a job; inside a sweep, the tag that nests it under the parent run."""
    tags = {
        "model": cfg.model.hf_id, "model_name": cfg.model.name, "task": cfg.task.name, "quant": cfg.quant.name,
        "quant_algo": str(cfg.quant.quant_algo), "kv_cache_quant_algo": str(cfg.quant.kv_cache_quant_algo),
        "backend": cfg.backend.name, "reference_mode": cfg.reference.mode, "runner_commit": project_commit(),
        "trust_remote_code": str(bool(cfg.model.get("trust_remote_code", False))).lower(),
    }
    if parent_run_id:
        tags["mlflow.parentRunId"] = parent_run_id
    return f"{cfg.quant.name}-{cfg.task.name}", tags  # what differs between runs first; the model is a tag


def write_failure(out_dir: Path, err: BaseException, run_id: str | None) -> None:
    """``failure.json`` in the job's directory: what a sweep summary lists for a job that did not finish."""
    write_atomic(out_dir / "failure.json", json.dumps(
        {"error": f"{type(err).__name__}: {err}"[:5000], "mlflow_run_id": run_id}, indent=2) + "\n", 0o644)


def write_samples(path: Path, scored: list[Any]) -> None:
    write_atomic(path, "".join(json.dumps({"sample_id": s.sample_id, "prediction": s.prediction, "target": s.target,
                                           "score": s.score, "meta": s.meta, "prompt": s.prompt}) + "\n"
                               for s in scored), 0o644)


def sample_count_notes(asked: int, planned: int, selected: int, checked: bool) -> list[str]:
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


def report_text(task: Any, model: Any, spec: AccuracySpec, score: float, evaluated: int,
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


def report_payload(task: Any, model: Any, spec: AccuracySpec, metrics: dict[str, float], evaluated: int,
                   decision: Decision | None, info: Any, notes: list[str], cache_stats: Any, run_id: str | None,
                   eval_time_s: float) -> dict[str, Any]:
    """report.json: the decision as written everywhere, and what was evaluated with what."""
    return {"task": task.name, "model": model.hf_id, "spec": asdict(spec), "metrics": metrics,
            "num_evaluated": evaluated, "decision": decision.to_dict() if decision else None,
            "verdict": decision.outcome if decision else None,
            "unpaired_test": decision.verdict.to_dict() if decision else None,
            "paired": decision.paired.to_dict() if decision and decision.paired else None,
            "decided_by": decision.rule if decision else None,
            "passed": decision.all_passed if decision else None,
            "advice": decision.advice.to_dict() if decision and decision.advice else None,
            "backend": asdict(info), "notes": notes, "generation_cache": cache_stats,
            "mlflow_run_id": run_id, "eval_time_s": round(eval_time_s, 2)}


def verdict_word(decision: Decision | None) -> str:
    """The verdict in lower case (``go``, ``no-go``, ``inconclusive``; ``no verdict`` without a reference)."""
    return "no verdict" if decision is None else WORDS[decision.outcome]


def tracked_metrics(score: float, metrics: dict[str, float], evaluated: int, eval_time_s: float,
                    params: HypothesisParams, decision: Decision | None) -> dict[str, float]:
    """The MLflow metrics of a job: the same figures as the report. Breakdowns (``subject/...``) go to
    a table artifact instead (:func:`breakdown_table`), so the runs table keeps a few columns."""
    logged = {"score": score, "num_samples": float(evaluated), "num_evaluated": float(evaluated),
              "eval_time_s": eval_time_s, "theta": params.theta,
              "verdict": float(CODES[verdict_word(decision)])}
    logged |= {k.replace(",", "_"): v for k, v in metrics.items() if "/" not in k}
    if decision is not None:
        logged |= decision.metrics()
        reference = decision.verdict.reference
        logged["delta"] = decision.difference
        if reference:
            logged["delta_pct"] = 100.0 * decision.difference / abs(reference)
        if decision.theta is None:
            logged.pop("theta")
    return logged


def readable_tags(decision: Decision | None) -> dict[str, str]:
    """Tags shown in MLflow's default runs columns: the verdict, and p-values rounded for people
    (the metrics keep full precision)."""
    tags = {"verdict": verdict_word(decision), "decided_by": decision.rule if decision else "none"}
    if decision is not None:
        tags["verdict_reported"] = decision.reported
        if decision.advice is not None:
            tags["to_decide"] = decision.advice.text()[:5000]
        tags["p_value"] = "-" if decision.p_value is None else f"{decision.p_value:.4g}"
        tags["delta"] = f"{decision.difference:+.4g}"
    return tags


def breakdown_table(metrics: dict[str, float]) -> dict[str, list[Any]] | None:
    """``group/name`` metrics (MMLU's per-subject accuracies) as one table: group, name, value."""
    rows = sorted(k for k in metrics if "/" in k)
    if not rows:
        return None
    return {"group": [k.split("/", 1)[0] for k in rows], "name": [k.split("/", 1)[1] for k in rows],
            "value": [metrics[k] for k in rows]}


def summary_line(decision: Decision | None, exit_status: int, output_dir: Path, where: str) -> str:
    if decision is None:
        result = "NO VERDICT"
    else:
        result = f"{decision.verdict_line()} ({decision.test})"
    lines = [f"result: {result} (exit {exit_status})"]
    if decision is not None and decision.advice is not None:
        lines.append(f"to decide: {decision.advice.text()}")
    return "\n".join(lines + [
        f"outputs: {output_dir} (report.txt, report.json, results.json, samples.jsonl)",
        f"tracking: {where}",
    ])
