"""The files a job writes for machines: report.json, samples.jsonl and, when it stops, failure.json."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from runner.contract.backend import BackendInfo
from runner.contract.spec import AccuracySpec
from runner.contract.task_config import ModelConfig, TaskConfig
from runner.contract.secrets import redact_text
from runner.files.paths import write_atomic
from runner.stats.decision import Decision


def write_failure(out_dir: Path, err: BaseException, run_id: str | None) -> None:
    """``failure.json`` in the job's directory: what a sweep summary lists for a job that did not finish."""
    write_atomic(out_dir / "failure.json", json.dumps(
        {"error": redact_text(f"{type(err).__name__}: {err}")[:5000], "mlflow_run_id": run_id}, indent=2) + "\n", 0o644)


def write_samples(path: Path, scored: list[Any]) -> None:
    write_atomic(path, "".join(json.dumps({"sample_id": s.sample_id, "prediction": s.prediction, "target": s.target,
                                           "score": s.score, "meta": s.meta, "prompt": s.prompt}) + "\n"
                               for s in scored), 0o644)


def report_payload(task: TaskConfig, model: ModelConfig, spec: AccuracySpec, metrics: dict[str, float], evaluated: int,
                   decision: Decision | None, info: BackendInfo, notes: list[str], cache_stats: Any, run_id: str | None,
                   eval_time_s: float, score_bounds: tuple[float, float] | None = None) -> dict[str, Any]:
    """report.json: the decision as written everywhere, and what was evaluated with what; ``score_bounds``: the
    range every per-sample score of the task lies in (None: unbounded), which runner.compare's betting test needs."""
    return {"task": task.name, "metric": task.metric, "model": model.hf_id, "spec": asdict(spec), "metrics": metrics,
            "score_bounds": list(score_bounds) if score_bounds is not None else None,
            "num_evaluated": evaluated, "decision": decision.to_dict() if decision else None,
            "verdict": decision.outcome if decision else None,
            "unpaired_test": decision.verdict.to_dict() if decision else None,
            "paired": decision.paired.to_dict() if decision and decision.paired else None,
            "decided_by": decision.rule if decision else None,
            "passed": decision.all_passed if decision else None,
            "advice": decision.advice.to_dict() if decision and decision.advice else None,
            "backend": asdict(info), "notes": notes, "generation_cache": cache_stats,
            "mlflow_run_id": run_id, "eval_time_s": round(eval_time_s, 2)}
