"""How a job appears in MLflow: its run name and tags, the backend's details as tags and metrics,
the metrics and readable tags of its decision, and its breakdown table."""

from __future__ import annotations

from typing import Any

from runner.contract.task_config import ModelConfig, QuantConfig, TaskConfig
from runner.stats.decision import Decision
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics.ztest import theta_of
from runner.stats.data.verdicts import CODES, WORDS
from runner.tracking.provenance import project_commit


def run_identity(model: ModelConfig, quant: QuantConfig, task: TaskConfig, backend: str, reference_mode: str,
                 parent_run_id: str | None) -> tuple[str, dict[str, str]]:
    """The MLflow run name and tags of a job; inside a sweep, the tag that nests it under the parent run."""
    tags = {
        "model": model.hf_id, "model_name": model.name, "task": task.name, "quant": quant.name,
        "quant_algo": str(quant.quant_algo), "kv_cache_quant_algo": str(quant.kv_cache_quant_algo),
        "backend": backend, "reference_mode": reference_mode, "runner_commit": project_commit(),
        "trust_remote_code": str(bool(model.trust_remote_code)).lower(),
    }
    if parent_run_id:
        # an evaluation run nested in a parent: MLflow's runs table shows the parent expanded on first sight
        tags |= {"mlflow.parentRunId": parent_run_id, "mlflow.runType": "evaluation"}
    return run_name(model.name, quant.name, task.name), tags


def run_name(model: str, quant: str, task: str) -> str:
    """``model/quant-task`` (e.g. ``smollm2_135m/w4a16-mmlu``): two models' runs of one task never look alike."""
    return f"{model}/{quant}-{task}"


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


def verdict_word(decision: Decision | None) -> str:
    """The verdict in lower case (``go``, ``no-go``, ``inconclusive``; ``no verdict`` without a reference)."""
    return "no verdict" if decision is None else WORDS[decision.outcome]


def tracked_metrics(score: float, metrics: dict[str, float], evaluated: int, eval_time_s: float,
                    params: HypothesisParams, decision: Decision | None) -> dict[str, float]:
    """The MLflow metrics of a job: the same figures as the report (``score``: the deciding rule's, on the samples
    it used; ``run_score``: the whole run's, as the metric's own name). Breakdowns (``subject/...``) go to
    a table artifact instead (:func:`breakdown_table`), so the runs table keeps a few columns."""
    logged = {"score": score, "num_samples": float(evaluated), "num_evaluated": float(evaluated),
              "eval_time_s": eval_time_s, "theta": theta_of(params),
              "verdict": float(CODES[verdict_word(decision)])}
    logged |= {k.replace(",", "_"): v for k, v in metrics.items() if "/" not in k}
    if decision is not None:
        # score, reference, delta, n, bound and p_value: the deciding rule's, on the samples it used
        logged |= decision.metrics()
        shown = decision.figures()
        if shown.reference:
            logged["delta_pct"] = 100.0 * shown.difference / abs(shown.reference)
        if decision.theta is None:
            logged.pop("theta")
    return logged


def readable_tags(decision: Decision | None, score: float | None = None) -> dict[str, str]:
    """Tags the runs table shows (runner.tracking.view): the verdict, and the deciding rule's score, reference,
    delta and p-value rounded for people (the metrics of the same names keep full precision; without a
    decision, ``score`` is the run's)."""
    tags = {"verdict": verdict_word(decision), "decided_by": decision.rule if decision else "none"}
    if decision is None:
        if score is not None:
            tags["score"] = f"{score:.4g}"
        return tags
    tags["verdict_reported"] = decision.reported
    if decision.advice is not None:
        tags["to_decide"] = decision.advice.text()[:5000]
    shown = decision.figures()
    tags["score"], tags["reference"] = f"{shown.score:.4g}", f"{shown.reference:.4g}"
    tags["p_value"] = "-" if shown.p_value is None else f"{shown.p_value:.4g}"
    tags["delta"] = f"{shown.difference:+.4g}"
    return tags


def breakdown_table(metrics: dict[str, float]) -> dict[str, list[Any]] | None:
    """``group/name`` metrics (MMLU's per-subject accuracies) as one table: group, name, value."""
    rows = sorted(k for k in metrics if "/" in k)
    if not rows:
        return None
    return {"group": [k.split("/", 1)[0] for k in rows], "name": [k.split("/", 1)[1] for k in rows],
            "value": [metrics[k] for k in rows]}
