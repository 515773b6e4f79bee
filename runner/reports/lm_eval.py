"""``results.json`` in lm-evaluation-harness's shape, so dashboards that read lm-eval output read ours.

lm-eval keys a task's figures as ``results[task]["<metric>,<filter>"]`` with ``"<metric>_stderr,<filter>"``
beside it; the runner has no filters, so the filter is ``none``. Values keep the runner's scale (the
scale of TensorRT-LLM's references: accuracy in percent), which ``runner.scale`` says.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Sequence

from runner.contract.backend import BackendInfo
from runner.contract.spec import AccuracySpec
from runner.contract.task_config import ModelConfig, TaskConfig


def stderr(scores: Sequence[float]) -> float | None:
    """Standard error of the mean of per-sample scores (None below two samples)."""
    n = len(scores)
    if n < 2:
        return None
    mean = sum(scores) / n
    return math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1) / n)


def results_json(task: TaskConfig, model: ModelConfig, spec: AccuracySpec, metrics: dict[str, float],
                 per_sample: Sequence[float], info: BackendInfo, eval_time_s: float, decision: dict[str, Any] | None,
                 standard_error: float | None = None) -> dict[str, Any]:
    """``standard_error``: the task metric's, when it is not the mean of ``per_sample`` (a corpus metric's
    bootstrap standard error); else the standard error of that mean."""
    name = task.name
    figures: dict[str, Any] = {"alias": name}
    for metric, value in metrics.items():
        figures[f"{metric},none"] = value
    figures[f"{task.metric}_stderr,none"] = standard_error if standard_error is not None else stderr(per_sample)
    task_config = {k: v for k, v in dataclasses.asdict(task).items() if k != "_target_"}
    return {
        "results": {name: figures},
        "configs": {name: task_config},
        "versions": {name: "runner"},
        "n-shot": {name: int(getattr(task, "num_fewshot", 0) or 0)},
        "higher_is_better": {name: {task.metric: bool(task.higher_is_better)}},
        "n-samples": {name: {"original": int(task.num_samples), "effective": len(per_sample)}},
        "config": {"model": info.name, "model_args": f"pretrained={info.model_path}", "device": info.device,
                   "dtype": spec.dtype, "quant_algo": spec.quant_algo, "kv_cache_quant_algo": spec.kv_cache_quant_algo},
        "model_name": model.hf_id,
        "date": time.time(),
        "total_evaluation_time_seconds": f"{eval_time_s:.2f}",
        "versions_of_libraries": dict(info.versions),
        "runner": {"scale": "the metric's own scale (accuracy in percent, as TensorRT-LLM's references)",
                   "spec": dataclasses.asdict(spec), "decision": decision},
    }
