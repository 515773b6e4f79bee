"""Trackers: MLflow (default) or none. The job logs through this small interface only.

The MLflow tracker checks that its store is reachable BEFORE any model is loaded, so a
mistyped server address costs seconds, not an evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional

from runner.errors import TrackingError


@dataclass
class MlflowTrackingConfig:
    _target_: str = "runner.tracking.trackers.MlflowTracker"
    name: str = "mlflow"
    tracking_uri: Optional[str] = None  # None: $MLFLOW_TRACKING_URI, else sqlite:///<cwd>/mlflow.db
    experiment: str = "runner"
    connect_timeout_s: float = 10.0


@dataclass
class NoTrackingConfig:
    _target_: str = "runner.tracking.trackers.NullTracker"
    name: str = "none"


PARENT_ENV = "RUNNER_SWEEP_PARENT_RUN_ID"
"""Set by a sweep's callback for its jobs: the MLflow parent run they nest under."""


def parent_run_id() -> str | None:
    """The sweep's parent run id when this job belongs to a tracked sweep (an id only locates a run)."""
    return os.environ.get(PARENT_ENV) or None


def default_tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


EXPERIMENT_KIND_TAG = "mlflow.experimentKind"


def mark_model_experiment(experiment: Any, uri: str) -> None:
    """MLflow 3's UI opens an untagged experiment as a GenAI (traces) one; runner experiments hold
    model evaluations, so they are tagged to open on the runs table, where runs are compared."""
    if EXPERIMENT_KIND_TAG not in (experiment.tags or {}):
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=uri).set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG,
                                                          "custom_model_development")


class NullTracker:
    """Logs nothing; the run's output directory still holds the report and per-sample outputs."""

    name = "none"
    run_id: str | None = None

    def __init__(self, config: Any = None) -> None:
        self.config = config

    def check(self) -> None: ...

    def start(self, run_name: str, params: dict[str, Any], tags: dict[str, str]) -> None: ...

    def log_metrics(self, metrics: dict[str, float]) -> None: ...

    def set_tags(self, tags: dict[str, str]) -> None: ...

    def log_artifacts(self, directory: Path) -> None: ...

    def end(self, status: str) -> None: ...

    def where(self) -> str:
        return "tracking=none: nothing was logged to MLflow"


class MlflowTracker:
    name = "mlflow"

    def __init__(self, config: Any) -> None:
        self.config = config
        self.uri = config.tracking_uri or default_tracking_uri()
        self.run_id: str | None = None
        self.experiment_id: str | None = None

    def check(self) -> None:
        """Fail fast when the tracking store cannot be reached."""
        if self.uri.startswith(("http://", "https://")):
            url = self.uri.rstrip("/") + "/health"
            try:
                with urllib.request.urlopen(url, timeout=self.config.connect_timeout_s) as response:
                    if response.status != 200:
                        raise urllib.error.URLError(f"HTTP {response.status}")
            except (urllib.error.URLError, OSError, ValueError) as err:
                raise TrackingError(
                    "the MLflow tracking server cannot be reached; nothing was evaluated",
                    where="tracking.tracking_uri / MLFLOW_TRACKING_URI", given=f"{self.uri} ({err})",
                    fix="start the server (mlflow server --host 127.0.0.1 --port 5000), fix the address, "
                    "or run with tracking=none",
                ) from None
        elif self.uri.startswith("sqlite:///"):
            db = Path(self.uri.removeprefix("sqlite:///"))
            if not db.parent.is_dir() or not os.access(db.parent, os.W_OK):
                raise TrackingError("the MLflow sqlite store's directory is missing or not writable",
                                    where="tracking.tracking_uri", given=self.uri,
                                    fix="point it at a writable directory, or run with tracking=none")

    def start(self, run_name: str, params: dict[str, Any], tags: dict[str, str]) -> None:
        import logging

        import mlflow

        logging.getLogger("mlflow").setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)
        mlflow.set_tracking_uri(self.uri)
        experiment = mlflow.set_experiment(self.config.experiment)
        mark_model_experiment(experiment, self.uri)
        self.experiment_id = experiment.experiment_id
        run = mlflow.start_run(run_name=run_name, tags=tags)
        self.run_id = run.info.run_id
        items = list(params.items())
        for start in range(0, len(items), 100):
            mlflow.log_params(dict(items[start:start + 100]))

    def log_metrics(self, metrics: dict[str, float]) -> None:
        import mlflow

        mlflow.log_metrics(metrics)

    def set_tags(self, tags: dict[str, str]) -> None:
        import mlflow

        mlflow.set_tags(tags)

    def log_artifacts(self, directory: Path) -> None:
        import mlflow

        mlflow.log_artifacts(str(directory))

    def end(self, status: str) -> None:
        import mlflow

        if mlflow.active_run() is not None:
            mlflow.end_run(status=status)

    def where(self) -> str:
        if self.uri.startswith(("http://", "https://")):
            return f"MLflow run {self.run_id}: {self.uri.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{self.run_id}"
        return (f"MLflow run {self.run_id} in {self.uri} (experiment '{self.config.experiment}'); "
                f"browse with: mlflow ui --backend-store-uri {self.uri}")
