"""The job's history in MLflow: earlier FINISHED runs of the same model, quant, backend (and task), and the
evaluation rate they measured. What the dry run and a job's first lines estimate from."""

from __future__ import annotations

from typing import Any

from runner.config.schemas import RunnerConfig
from runner.job.state import Job
from runner.tracking.trackers import sqlite_path


def earlier_runs(cfg: RunnerConfig, job: Job, same_task: bool = True,
                 same_model: bool = True) -> tuple[list[Any] | None, str]:
    """Earlier FINISHED runs of the same quant and backend (and model, and task) in the job's MLflow store, newest
    first; None with the reason in words when there is no store to read."""
    if cfg.tracking.name != "mlflow":
        return None, "no history (tracking=none)"
    uri = job.tracker.uri
    db = sqlite_path(uri)
    if db is not None and not db.is_file():  # no store yet: nothing to read, and a dry run creates nothing
        return None, "no earlier run to measure from"
    try:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name(cfg.tracking.experiment)
        if experiment is None:
            return None, "no earlier run to measure from"
        task = f" and tags.task = '{cfg.task.name}'" if same_task else ""
        model = f" and tags.model = '{cfg.model.hf_id}'" if same_model else ""
        return client.search_runs([experiment.experiment_id], max_results=20, order_by=["attributes.start_time DESC"],
                                  filter_string=(f"attributes.status = 'FINISHED'{model} "
                                                 f"and tags.quant = '{cfg.quant.name}'{task} "
                                                 f"and tags.backend = '{cfg.backend.name}'")), ""
    except Exception as err:  # an estimate is a courtesy: never a reason to fail the job or the dry run
        return None, f"unavailable ({type(err).__name__})"


def evaluation_rate(cfg: RunnerConfig, job: Job) -> tuple[float | None, str]:
    """The median seconds per computed sample of earlier runs of the same model/quant/task/backend, and where it
    comes from in words (or why there is none)."""
    runs, why = earlier_runs(cfg, job)
    if runs is None:
        return None, why
    rates = [rate for rate in (seconds_per_computed_sample(r.data.metrics) for r in runs) if rate is not None]
    if not rates:
        if runs:
            return None, f"no earlier run computed answers ({len(runs)} answered wholly from the cache)"
        return None, "no earlier run to measure from"
    return sorted(rates)[len(rates) // 2], f"median of {len(rates)} earlier runs"


def seconds_per_computed_sample(metrics: dict[str, float]) -> float | None:
    """An earlier run's evaluation time per sample it computed: ``eval_time_s`` over ``num_evaluated`` times
    the share of its requests that missed the cache (all of them when it logged no cache counts); None
    when it computed nothing or logged no time."""
    evaluated, seconds = metrics.get("num_evaluated"), metrics.get("eval_time_s")
    if not evaluated or seconds is None:
        return None
    hits, misses = metrics.get("cache_hits", 0.0), metrics.get("cache_misses")
    computed_share = 1.0 if misses is None or hits + misses == 0 else misses / (hits + misses)
    if computed_share == 0:
        return None
    return seconds / (evaluated * computed_share)
