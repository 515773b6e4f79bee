"""The runs table a runner experiment opens on in MLflow's UI: the decision's columns, without clicks.

MLflow 3.17's runs table shows Source, Models and Dataset until someone picks columns in its Columns
menu, and the UI's sidebar mode (GenAI or machine learning) comes from the browser, not from the
experiment. Two things the UI reads make the address a job prints open on the verdict columns:

* a saved view, the experiment tag ``mlflow.sharedViewState.<id>`` holding ``{name, createdAt, updatedAt,
  state}`` (``state``: the table's JSON state, its ``selectedColumns`` here), listed in the Runs tab's
  Views menu and opened by ``?viewStateShareKey=<id>``;
* ``?workflowType=machine_learning``, which opens the classic (not GenAI) experiment page.
"""

from __future__ import annotations

import json
import time
from typing import Any

VIEW_ID = "runner-verdicts"
VIEW_NAME = "Verdicts"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_ID}"
"""MLflow's prefix for a saved runs-table view, and this view's id."""

COLUMNS = (("tags", "verdict"), ("tags", "sweep_verdict"), ("tags", "score"), ("tags", "reference"), ("tags", "delta"),
           ("tags", "p_value"), ("tags", "decided_by"), ("tags", "noise"), ("attributes", "Dataset"))
"""The columns the view shows, in order: the tags a job logs under these names (runner.tracking.naming): the
verdict in words (the job's own, at its task's alpha), the job's verdict within its sweep after the
family-wise correction ("-" outside a sweep), the deciding rule's score and reference on the samples it used,
their difference and its p-value, rounded for reading (metrics of the same names keep full precision), the rule
that decided, the noise line (the reference's A/A floor and what differs between its host and this run's:
runner.reports.noise); and the evaluated samples."""

WIDTHS = (95, 115, 75, 90, 80, 90, 110, 200)
"""Pixel widths of the first columns of :data:`COLUMNS` (the rest take MLflow's default)."""

ADDRESS_QUERY = f"workflowType=machine_learning&viewStateShareKey={VIEW_ID}"
"""The query that opens an experiment's runs table in the classic view with :data:`COLUMNS` shown."""


def column_key(kind: str, name: str) -> str:
    """A runs-table column as the UI names it (``metrics.`score```)."""
    return f"{kind}.`{name}`"


def view_state() -> dict[str, Any]:
    """The table state the view restores: its columns, in :data:`COLUMNS`' order, a name column wide enough for
    ``<model>/<quant>-<task>`` and value columns narrow enough that all five figures fit beside it on a laptop
    screen (also with MLflow's assistant panel open)."""
    keys = [column_key(kind, name) for kind, name in COLUMNS]
    name = column_key("attributes", "Run Name")
    widths = {name: 290} | {column_key(kind, label): width for (kind, label), width in zip(COLUMNS, WIDTHS)}
    return {"selectedColumns": keys, "columnOrder": [name, *keys], "columnWidths": widths}


def view_tag_value(now_ms: int | None = None) -> str:
    """The experiment tag's value: the saved-view envelope MLflow's UI parses."""
    stamp = int(time.time() * 1000) if now_ms is None else now_ms
    return json.dumps({"name": VIEW_NAME, "createdAt": stamp, "updatedAt": stamp,
                       "state": json.dumps(view_state(), separators=(",", ":"))}, separators=(",", ":"))


def saved_state(tag_value: str | None) -> dict[str, Any] | None:
    """The table state held by a saved-view tag (None when absent or not one)."""
    try:
        return json.loads(json.loads(tag_value or "")["state"])
    except (ValueError, KeyError, TypeError):
        return None


def ensure_runs_view(client: Any, experiment: Any) -> None:
    """Tag ``experiment`` with the verdict view when it has none: a person's edits to it (and the experiment's
    other tags and views) stay as they are."""
    if VIEW_TAG not in (experiment.tags or {}):
        client.set_experiment_tag(experiment.experiment_id, VIEW_TAG, view_tag_value())
