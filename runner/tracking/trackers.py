"""Trackers: MLflow (default) or none. The job logs through this small interface only.

The MLflow tracker checks that its store is reachable BEFORE any model is loaded, so a
mistyped server address costs seconds, not an evaluation.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import sqlite3
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Protocol, TypeVar
from urllib.parse import urlsplit

from runner.contract.errors import TrackingError
from runner.contract.secrets import redact_text, redact_tree, redact_url
from runner.files.locking import file_lock
from runner.tracking.view import ADDRESS_QUERY, ensure_runs_view


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


FIRST_LOOK_ENV = "RUNNER_FIRST_LOOK_RUN_ID"
"""Set by ``runner.extend`` for the look it runs: look 1's MLflow run, which the later looks nest under."""


def first_look_run_id() -> str | None:
    """Look 1's run id when this job is a later look of an extended run (an id only locates a run)."""
    return os.environ.get(FIRST_LOOK_ENV) or None


def parent_run_id() -> str | None:
    """The sweep's parent run id when this job belongs to a tracked sweep (an id only locates a run)."""
    return os.environ.get(PARENT_ENV) or None


def default_tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
HOST_TAG, PID_TAG = "runner.host", "runner.pid"
KILLED_NOTE = "the process that ran this job ended without closing its run (killed?): marked KILLED by a later run"
URI_SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks")


def process_tags() -> dict[str, str]:
    """Which process holds a run, so a later run can tell a dead job's run from a live one."""

    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}


def sqlite_path(uri: str) -> Path | None:
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def open_experiment(uri: str, name: str) -> Any:
    """Point MLflow at ``uri`` and get (or create) experiment ``name``.

    A fresh sqlite file is initialised under a file lock: MLflow runs its schema migration on first
    use, and two processes doing it at once can leave the store broken for good. Runs of this host
    left RUNNING by a process that no longer exists are marked KILLED here."""

    import mlflow

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    mlflow.set_tracking_uri(uri)
    db = sqlite_path(uri)
    if db is None:
        experiment = mlflow.set_experiment(name)
    else:

        with file_lock(db.parent / f".{db.name}.lock"):
            experiment = mlflow.set_experiment(name)
    mark_model_experiment(experiment, uri)
    close_dead_runs(uri, experiment.experiment_id)
    return experiment


def runs_table_url(ui: str, experiment_id: str | None) -> str:
    """The page of the MLflow UI at ``ui`` that lists an experiment's runs as a table, in the classic view with
    the decision's columns (:mod:`runner.tracking.view`; MLflow 3 opens its home page, and an experiment on
    its overview tab, otherwise)."""
    return f"{ui.rstrip('/')}/#/experiments/{experiment_id}/runs?{ADDRESS_QUERY}"


UI_ENV = "RUNNER_MLFLOW_UI"
"""Where ``mlflow ui`` answers for a local store (default ``http://127.0.0.1:5000``, mlflow ui's own default)."""


def ui_address(uri: str) -> str:
    """Where the MLflow UI of ``uri`` answers: the server itself, or, for a local store, ``$RUNNER_MLFLOW_UI``
    (default ``http://127.0.0.1:5000``)."""
    if uri.startswith(("http://", "https://")):
        return uri
    return (os.environ.get(UI_ENV) or "http://127.0.0.1:5000").rstrip("/")


def browse_hint(uri: str) -> str:
    """The command that serves a local store's UI at :func:`ui_address` (its host and port); "" for a server."""
    if uri.startswith(("http://", "https://")):
        return ""
    parts = urlsplit(ui_address(uri))
    return (f"mlflow ui --backend-store-uri {uri} --host {parts.hostname or '127.0.0.1'} --port {parts.port or 5000} "
            f"(another address: {UI_ENV}=http://HOST:PORT)")


def close_dead_runs(uri: str, experiment_id: str) -> list[str]:
    """Mark KILLED the RUNNING runs of this host whose process is gone (a SIGKILLed job)."""

    import psutil
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    host = socket.gethostname().replace("'", "")
    closed = []
    for run in client.search_runs([experiment_id], filter_string=(
            f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = '{host}'"), max_results=200):
        pid = run.data.tags.get(PID_TAG, "")
        if pid.isdigit() and _alive(psutil, int(pid), run.info.start_time / 1000.0):
            continue
        client.set_tag(run.info.run_id, "error", KILLED_NOTE)
        client.set_terminated(run.info.run_id, status="KILLED")
        closed.append(run.info.run_id)
    return closed


def _alive(psutil: Any, pid: int, run_started: float) -> bool:
    """The run's process still exists (the same process: one started before the run, not a reused pid)."""
    try:
        return psutil.Process(pid).create_time() <= run_started + 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def mark_model_experiment(experiment: Any, uri: str) -> None:
    """Runner experiments hold model evaluations: tagged as such for MLflow UIs that read the experiment's kind
    (3.17's takes the GenAI / machine-learning mode from the address instead:
    :data:`runner.tracking.view.ADDRESS_QUERY`), and given the saved view that shows the decision's columns."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    if EXPERIMENT_KIND_TAG not in (experiment.tags or {}):
        client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, "custom_model_development")
    ensure_runs_view(client, experiment)


class Tracker(Protocol):
    """Where a job's params, metrics, tags, tables and artifacts go (MLflow, or nowhere)."""

    name: str
    run_id: str | None

    def check(self) -> None: ...

    def start(self, run_name: str, params: dict[str, Any], tags: dict[str, str]) -> None: ...

    def log_metrics(self, metrics: dict[str, float]) -> None: ...

    def set_tags(self, tags: dict[str, str]) -> None: ...

    def log_artifacts(self, directory: Path) -> None: ...

    def log_table(self, data: dict[str, list[Any]], name: str) -> None: ...

    def log_dataset(self, data: dict[str, list[Any]], name: str, source: str) -> None: ...

    def set_description(self, text: str, headline: str = "") -> None: ...

    def end(self, status: str) -> None: ...

    def where(self) -> str: ...


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

    def log_table(self, data: dict[str, list[Any]], name: str) -> None: ...

    def log_dataset(self, data: dict[str, list[Any]], name: str, source: str) -> None: ...

    def set_description(self, text: str, headline: str = "") -> None: ...

    def where(self) -> str:
        return "tracking=none: nothing was logged to MLflow"


F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def store_errors(uri: str, what: str) -> Iterator[None]:
    """The tracking store's own failures (a full disk under a sqlite store, a database that refuses a write, a
    server's error) as a :class:`TrackingError`; the job's files are written before anything is tracked."""
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import SQLAlchemyError  # lazy: comes with mlflow, as slow to import

    try:
        yield
    except (MlflowException, SQLAlchemyError, sqlite3.Error, OSError) as err:
        raise TrackingError(f"the MLflow store failed while {what}; the job's own files are in its directory",
                            where=f"tracking.tracking_uri={redact_url(uri)}",
                            given=redact_text(f"{type(err).__name__}: {' '.join(str(err).split())}")[:400],
                            fix="free space or fix the store (a full disk, a read-only file, a server error), or run "
                                "with tracking=none") from None


def tracked(what: str) -> Callable[[F], F]:
    """A tracker method whose store errors become a :class:`TrackingError` (:func:`store_errors`)."""
    def wrap(method: F) -> F:
        @functools.wraps(method)
        def call(self: "MlflowTracker", *args: Any, **kwargs: Any) -> Any:
            with store_errors(self.uri, what):
                return method(self, *args, **kwargs)
        return call  # type: ignore[return-value]
    return wrap


class MlflowTracker:
    name = "mlflow"

    def __init__(self, config: Any) -> None:
        self.config = config
        self.uri = config.tracking_uri or default_tracking_uri()
        self.run_id: str | None = None
        self.experiment_id: str | None = None

    def check(self) -> None:
        """Fail fast when the tracking store cannot be reached."""
        if not str(self.config.experiment or "").strip():
            raise TrackingError("the MLflow experiment needs a name", where="tracking.experiment",
                                given=repr(self.config.experiment), fix="set tracking.experiment=NAME (default: runner)")
        if self.uri.startswith(("http://", "https://")):
            url = self.uri.rstrip("/") + "/health"
            try:
                with urllib.request.urlopen(url, timeout=self.config.connect_timeout_s) as response:
                    if response.status != 200:
                        raise urllib.error.URLError(f"HTTP {response.status}")
            except (urllib.error.URLError, OSError, ValueError) as err:
                raise TrackingError(
                    "the MLflow tracking server cannot be reached; nothing was evaluated",
                    where="tracking.tracking_uri / MLFLOW_TRACKING_URI", given=redact_text(f"{self.uri} ({err})"),
                    fix="start the server (mlflow server --host 127.0.0.1 --port 5000), fix the address, "
                    "or run with tracking=none",
                ) from None
        elif (db := sqlite_path(self.uri)) is not None:
            if db.is_dir() or not db.name:
                raise TrackingError("the MLflow sqlite store must be a file, and this is a directory",
                                    where="tracking.tracking_uri / MLFLOW_TRACKING_URI", given=redact_url(self.uri),
                                    fix=f"name a file, e.g. sqlite:///{db / 'mlflow.db'}, or run with tracking=none")
            if not db.parent.is_dir() or not os.access(db.parent, os.W_OK) or (db.exists() and not os.access(db, os.W_OK)):
                raise TrackingError("the MLflow sqlite store's directory is missing or not writable",
                                    where="tracking.tracking_uri / MLFLOW_TRACKING_URI", given=redact_url(self.uri),
                                    fix="point it at a writable directory, or run with tracking=none")
        elif self.uri.lower().startswith("sqlite:"):
            rest = self.uri.split(":", 1)[1].lstrip("/")
            raise TrackingError("an MLflow sqlite URI takes three slashes before a relative path, four before an absolute one",
                                where="tracking.tracking_uri / MLFLOW_TRACKING_URI", given=redact_url(self.uri),
                                allowed="sqlite:///relative/path/mlflow.db or sqlite:////absolute/path/mlflow.db",
                                fix=f"write sqlite:///{rest or 'mlflow.db'}, or run with tracking=none")
        else:
            scheme = self.uri.partition(":")[0].split("+")[0].lower() if "://" in self.uri else ""
            if scheme not in URI_SCHEMES:
                raise TrackingError(
                    "this MLflow tracking URI is not one the runner can log to",
                    where="tracking.tracking_uri / MLFLOW_TRACKING_URI", given=redact_url(self.uri),
                    allowed="http(s)://host:port (an MLflow server), sqlite:///path/to/mlflow.db, "
                    "or a database URI (postgresql://, mysql://, mssql://), databricks",
                    fix="use sqlite:///<dir>/mlflow.db for a local store (MLflow's file store ./mlruns is "
                    "deprecated), or run with tracking=none")
            if scheme in ("postgresql", "mysql", "mssql"):
                check_database_driver(self.uri)

    @tracked("opening the run")
    def start(self, run_name: str, params: dict[str, Any], tags: dict[str, str]) -> None:
        import mlflow

        experiment = open_experiment(self.uri, self.config.experiment)
        self.experiment_id = experiment.experiment_id
        # no URL secret in the run's name, params or tags, whatever the caller passed
        run = mlflow.start_run(run_name=redact_text(run_name), tags=redact_tree(tags | process_tags()))
        self.run_id = run.info.run_id
        items = list(redact_tree(params).items())
        for start in range(0, len(items), 100):
            mlflow.log_params(dict(items[start:start + 100]))

    @tracked("logging metrics")
    def log_metrics(self, metrics: dict[str, float]) -> None:
        import mlflow

        mlflow.log_metrics(metrics)

    @tracked("setting tags")
    def set_tags(self, tags: dict[str, str]) -> None:
        import mlflow

        mlflow.set_tags(redact_tree(tags))

    @tracked("logging artifacts")
    def log_artifacts(self, directory: Path) -> None:
        import mlflow

        mlflow.log_artifacts(str(directory))

    @tracked("logging a table")
    def log_table(self, data: dict[str, list[Any]], name: str) -> None:
        """A table artifact (``name``.json) that MLflow's artifact view shows as a sortable table."""
        import mlflow

        mlflow.log_table(data=data, artifact_file=f"{name}.json")

    @tracked("logging the dataset")
    def log_dataset(self, data: dict[str, list[Any]], name: str, source: str) -> None:
        """The evaluated samples as the run's input dataset (MLflow's Datasets column and tab)."""
        import mlflow
        import pandas as pd

        from mlflow.data.code_dataset_source import CodeDatasetSource

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            # MLflow resolves a plain source string to a file, URL or Hub dataset and fails on a label such as
            # "packaged": the source is stated as a tag of a code source instead
            dataset = mlflow.data.from_pandas(pd.DataFrame(data), source=CodeDatasetSource({"source": source}), name=name)
        mlflow.log_input(dataset, context="evaluation")

    @tracked("setting the description")
    def set_description(self, text: str, headline: str = "") -> None:
        """The run's description (MLflow renders it as markdown on the run page): ``headline`` first, in bold, where
        the page opens, then ``text`` as a block."""
        import mlflow

        top = f"**{redact_text(headline)}**\n\n" if headline else ""
        mlflow.set_tag("mlflow.note.content", (top + f"```\n{redact_text(text)}\n```")[:5000])

    @tracked("ending the run")
    def end(self, status: str) -> None:
        import mlflow

        if mlflow.active_run() is not None:
            mlflow.end_run(status=status)

    def where(self) -> str:
        uri = redact_url(self.uri)
        if uri.startswith(("http://", "https://")):
            return f"MLflow run {self.run_id}: {uri.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{self.run_id}"
        return (f"MLflow run {self.run_id} in {uri} (experiment '{self.config.experiment}'); "
                f"browse with: {browse_hint(uri)}, then the runs table at "
                f"{runs_table_url(ui_address(uri), self.experiment_id)}")


def check_database_driver(uri: str) -> None:
    """The database driver a ``postgresql://`` (``mysql://``, ``mssql://``) tracking URI needs is importable:
    SQLAlchemy, which MLflow connects through, names and imports it."""
    from sqlalchemy.engine import make_url  # lazy: comes with mlflow, slow to import; only for a database store
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError  # lazy: as above

    where = "tracking.tracking_uri / MLFLOW_TRACKING_URI"
    try:
        make_url(uri).get_dialect().import_dbapi()
    except ImportError as err:
        raise TrackingError("the database driver this MLflow tracking URI needs is not installed", where=where,
                            given=f"{redact_url(uri)} (missing python package: {err.name})",
                            fix=f"pip install the driver ({err.name}), name an installed one in the scheme "
                                "(postgresql+pg8000://...), or run with tracking=none") from None
    except (ArgumentError, NoSuchModuleError, ValueError) as err:
        raise TrackingError("this MLflow database URI cannot be read", where=where,
                            given=f"{redact_url(uri)} ({redact_text(str(err))[:200]})",
                            fix="write dialect[+driver]://user@host/database, or run with tracking=none") from None
