"""Per-sample scores of a finished evaluation, read back from where it left them: what ``runner.compare`` compares.

Three sources give the same :class:`RunSamples`:

* a run directory of ours (a job's output directory): ``samples.jsonl`` (one row per sample: ``sample_id``,
  ``score`` on the task's scale, ``prompt``, see :mod:`runner.reports.outputs`), the task's metric and direction
  and the seed from ``config.yaml``, the dataset source from ``report.json``'s effective spec;
* a ``samples_<task>_<date>.jsonl`` file of lm-evaluation-harness (``lm_eval --log_samples``): one row per
  document and filter with ``doc_id``, ``doc_hash``, ``prompt_hash``, ``target_hash``, ``filter``, the names of
  the task's metrics in ``metrics`` and each metric's value at the top level; the prompt is the first request's
  first argument (``arguments.gen_args_0.arg_0``), from which lm-eval computes ``prompt_hash``;
* an MLflow run of a job (its artifacts are the job's output directory), downloaded once.

A metric whose every per-sample value is 0/1 (lm-eval's ``acc``) is read in percent points, the scale of the
job's scores and of TensorRT-LLM's references, so margins and tolerances mean the same everywhere.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runner.contract.errors import UserError
from runner.files.regular import read_regular_text
from runner.contract.evaluator import CORPUS_ITEM, ROW, row_label

LM_EVAL_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.jsonl$")
MLFLOW_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
TRACKING_ENV = "MLFLOW_TRACKING_URI"
SAMPLES = "samples.jsonl"


@dataclass(frozen=True)
class RunSample:
    """One sample's score and what identifies the question it answered."""

    sample_id: str
    score: float
    prompt: str | None  # None when the source did not keep it
    target_hash: str | None = None  # lm-eval's hash of the target (None for our runs)
    doc_hash: str | None = None  # lm-eval's hash of the document
    row: str | None = None  # the dataset's row for a person (meta ROW; an lm-eval document's own id, or its index)


@dataclass
class RunSamples:
    """The per-sample scores of one run and its provenance, whatever wrote them."""

    where: str  # what the user gave (a path or an MLflow run id)
    kind: str  # "runner run" | "lm-eval samples" | "MLflow run"
    task: str | None
    metric: str
    samples: dict[str, RunSample]
    higher_is_better: bool | None = None  # None: the source does not say
    seed: int | None = None
    dataset_source: str | None = None
    tolerance: float | None = None  # the tolerance its job decided with (report.json), if any
    score_bounds: tuple[float, float] | None = None  # the task's score range its job recorded (report.json), if any
    alpha: float | None = None  # the task's alpha its job ran with (config.yaml), if any
    notes: list[str] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return sum(s.score for s in self.samples.values()) / len(self.samples)

    def describe(self) -> str:
        return f"{self.kind} {self.where} ({self.task or 'task unknown'}, {self.metric}, {len(self.samples)} samples)"


def read_run(source: str, metric: str | None = None, filter_name: str | None = None,
             tracking_uri: str | None = None) -> RunSamples:
    """A run directory, an lm-eval samples file or an MLflow run id; a :class:`UserError` for anything else."""
    path = Path(source).expanduser()
    if path.is_dir():
        return read_run_dir(path, metric, source)
    if path.is_file():
        return read_lm_eval(path, metric, filter_name)
    if MLFLOW_RUN_ID.match(source):
        return read_mlflow(source, metric, tracking_uri)
    raise UserError("no such run", where=source, given="neither an existing path nor an MLflow run id",
                    allowed="a job's output directory, an lm-eval samples_<task>_<date>.jsonl file, "
                            "or a 32-character MLflow run id",
                    fix="check the path (a job prints it on its 'outputs:' line)")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        for number, line in enumerate(read_regular_text(path).splitlines(), 1):  # a FIFO would block
            if line.strip():
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError(f"line {number} is not a JSON object")
                rows.append(row)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise UserError("cannot read the per-sample file", where=str(path), given=f"{type(err).__name__}: {err}"[:300],
                        allowed="JSON lines, one object per sample",
                        fix="give the samples file a job or lm_eval --log_samples wrote, unmodified") from None
    if not rows:
        raise UserError("the per-sample file holds no sample", where=str(path),
                        fix="give the samples file of a run that evaluated at least one sample")
    return rows


def _number(value: Any, where: str) -> float:
    if isinstance(value, (bool, int, float)) and math.isfinite(float(value)):
        return float(value)
    raise UserError("a per-sample score is not a finite number", where=where, given=repr(value)[:100],
                    allowed="a number on the metric's scale")


def read_run_dir(path: Path, metric: str | None, where: str) -> RunSamples:
    """A job's output directory: ``samples.jsonl`` with ``config.yaml`` and ``report.json`` beside it."""
    samples_file = path / SAMPLES
    if not samples_file.is_file():
        raise UserError("not a run directory with per-sample scores", where=str(path), given=f"no {SAMPLES}",
                        allowed="a job's output directory (report.txt, report.json, samples.jsonl)",
                        fix="give the directory a job printed on its 'outputs:' line")
    config = _yaml(path / "config.yaml")
    report = _json(path / "report.json")
    task = _mapping(config.get("task"), path / "config.yaml", "task")
    decision = _mapping(report.get("decision"), path / "report.json", "decision")
    spec = _mapping(report.get("spec"), path / "report.json", "spec")
    task_metric = str(task.get("metric") or "score")
    if metric is not None and metric != task_metric:
        raise UserError("unknown metric for this run", where=f"--metric for {path}", given=metric,
                        allowed=f"{task_metric} (a job keeps per-sample scores of its task's metric only)")
    samples: dict[str, RunSample] = {}
    for row in _jsonl(samples_file):
        if "sample_id" not in row or "score" not in row:
            raise UserError("a row of the run's samples.jsonl has no sample_id or score", where=str(samples_file),
                            given=", ".join(sorted(row))[:200], fix="give the samples file a job wrote, unmodified")
        sid = _sample_id(row["sample_id"], samples_file, "sample_id")
        if sid in samples:
            raise UserError("a sample appears twice in the run's samples.jsonl", where=str(samples_file),
                            given=f"sample_id {sid}", allowed="one row per sample, as a job writes it",
                            fix="give the samples file a job wrote, unmodified (a row appended twice would "
                                "count one answer as two, or let the last one win)")
        meta = _mapping(row.get("meta"), samples_file, f"meta of sample {sid}")
        if CORPUS_ITEM in meta:
            raise UserError("this run's metric is a corpus metric, which runner.compare cannot decide",
                            where=str(samples_file), given=f"task.metric={task_metric} (aggregated over the corpus)",
                            allowed="runs whose metric is a mean per sample (accuracy, exact match, ROUGE)",
                            fix="record run A as a reference (reference.mode=record) and check B against it: the job "
                                "decides a corpus metric with the paired corpus bootstrap")
        prompt = row.get("prompt")
        label = meta.get(ROW)
        samples[sid] = RunSample(sid, _number(row["score"], f"{samples_file}, sample {sid}"),
                                 prompt if isinstance(prompt, str) else None, row=str(label) if label else None)
    hib = task.get("higher_is_better")
    tolerance = decision.get("tolerance")
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))):
        raise UserError("the run's report.json holds a tolerance that is not a number", where=f"{path / 'report.json'}, "
                        "decision.tolerance", given=repr(tolerance)[:100], allowed="a number of the metric's points",
                        fix="give the report.json a job wrote, unmodified, or pass --tolerance")
    return RunSamples(where, "runner run", str(task.get("name") or report.get("task") or "") or None, task_metric,
                      samples, hib if isinstance(hib, bool) else None,
                      int(config["seed"]) if isinstance(config.get("seed"), int) else None,
                      _dataset_source(spec), tolerance, _bounds(report.get("score_bounds"), path / "report.json"),
                      _alpha(task.get("alpha")))


def _alpha(value: Any) -> float | None:
    """The task's alpha a job's config.yaml holds, when it is one (0 < alpha < 0.5)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 < float(value) < 0.5
    return float(value) if ok else None


def _bounds(value: Any, path: Path) -> tuple[float, float] | None:
    """The score bounds a job recorded: None (unbounded, or a report written before they were recorded) or
    ``[low, high]``, finite with low < high."""
    if value is None:
        return None
    if (isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                            and math.isfinite(v) for v in value)
            and value[0] < value[1]):
        return (float(value[0]), float(value[1]))
    raise UserError("the run's report.json holds score bounds that are not two finite numbers low < high",
                    where=f"{path}, score_bounds", given=repr(value)[:100], allowed="[low, high], e.g. [0, 100], or null",
                    fix="give the report.json a job wrote, unmodified, or pass --score-bounds LO HI")


def _yaml(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text()) if path.is_file() else None
    except (OSError, yaml.YAMLError):
        loaded = None
    return loaded if isinstance(loaded, dict) else {}


def _json(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        loaded = None
    return loaded if isinstance(loaded, dict) else {}


def _mapping(value: Any, path: Path, key: str) -> dict[str, Any]:
    """``value`` when it is a mapping, ``{}`` when absent; a :class:`UserError` for any other type."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"the run's {path.name} holds a {key} that is not a mapping", where=f"{path}, {key}",
                        given=f"{type(value).__name__}: {value!r}"[:100], allowed="a mapping, as a job writes it",
                        fix=f"give the {path.name} a job wrote, unmodified")
    return value


def _sample_id(value: Any, path: Path, key: str) -> str:
    """A sample id is a string or a whole number (lm-eval's doc_id); anything else is a modified file."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise UserError(f"a per-sample row's {key} is neither a string nor a whole number", where=str(path),
                        given=f"{type(value).__name__}: {value!r}"[:100], allowed="a string or a whole number",
                        fix="give the samples file a job or lm_eval --log_samples wrote, unmodified")
    return str(value)


def _dataset_source(spec: dict[str, Any]) -> str | None:
    """The ``dataset=`` part of the effective spec's ``extra_acc_spec`` (the source the task read)."""
    extra = str(spec.get("extra_acc_spec") or "")
    for part in extra.split(","):
        key, _, value = part.partition("=")
        if key.strip() == "dataset" and value:
            return value.strip()
    return None


def read_lm_eval(path: Path, metric: str | None, filter_name: str | None) -> RunSamples:
    """lm-evaluation-harness's ``samples_<task>_<date>.jsonl`` (or our own ``samples.jsonl`` given as a file)."""
    rows = _jsonl(path)
    if path.name == SAMPLES and all("sample_id" in r for r in rows):
        return read_run_dir(path.parent, metric, str(path))
    if not all("doc_id" in r and "metrics" in r for r in rows):
        raise UserError("not a per-sample file of lm-evaluation-harness or of a job", where=str(path),
                        given=f"fields {', '.join(sorted(rows[0]))[:200]}",
                        allowed="samples_<task>_<date>.jsonl written by lm_eval --log_samples (doc_id, metrics, "
                                "prompt_hash, ...), or a job's samples.jsonl",
                        fix="run lm_eval with --log_samples and give the samples file it wrote")
    for r in rows:
        _sample_id(r["doc_id"], path, "doc_id")
        if not isinstance(r["metrics"], list) or not all(isinstance(m, str) for m in r["metrics"]):
            raise UserError("a row's metrics is not a list of metric names", where=f"{path}, doc_id {r['doc_id']}",
                            given=repr(r["metrics"])[:100], allowed='a list of names, e.g. ["acc", "acc_norm"]',
                            fix="give the samples file lm_eval --log_samples wrote, unmodified")
        if not isinstance(r.get("arguments") or {}, (dict, list)):
            raise UserError("a row's arguments are neither a mapping nor a list", where=f"{path}, doc_id {r['doc_id']}",
                            given=repr(r["arguments"])[:100], allowed="lm-eval's request arguments (gen_args_0, ...)",
                            fix="give the samples file lm_eval --log_samples wrote, unmodified")
    filters = sorted({str(r.get("filter", "none")) for r in rows})
    chosen = _choose("filter", filter_name, filters, path, "--filter")
    rows = [r for r in rows if str(r.get("filter", "none")) == chosen]
    numeric = [m for m in dict.fromkeys(m for r in rows for m in r["metrics"])
               if all(isinstance(r.get(m), (bool, int, float)) for r in rows)]
    name = _choose("metric", metric, numeric, path, "--metric")
    values = {str(r["doc_id"]): _number(r[name], f"{path}, doc_id {r['doc_id']}, {name}") for r in rows}
    binary = set(values.values()) <= {0.0, 1.0}
    samples = {}
    for r in rows:
        sid = str(r["doc_id"])
        if sid in samples:
            raise UserError("a document appears twice for one filter", where=str(path), given=f"doc_id {sid}",
                            fix="give one run's samples file (lm_eval appends to a file of the same name)")
        arguments = r.get("arguments") or {}
        first = (arguments.get("gen_args_0") if isinstance(arguments, dict) else None) or {}
        prompt = first.get("arg_0") if isinstance(first, dict) else None
        samples[sid] = RunSample(sid, values[sid] * (100.0 if binary else 1.0), prompt if isinstance(prompt, str) else None,
                                 r.get("target_hash"), r.get("doc_hash"), row_label(r.get("doc"), sid))
    match = LM_EVAL_NAME.match(path.name)
    notes = [f"{name} read in percent points (0/1 -> 0/100)"] if binary else []
    return RunSamples(str(path), "lm-eval samples", match["task"] if match else None,
                      name if chosen == "none" else f"{name},{chosen}", samples, notes=notes)


def _choose(what: str, asked: str | None, choices: list[str], path: Path, flag: str) -> str:
    """The one ``what`` asked for, or the only one there is; else a message listing the choices."""
    if asked is not None and asked in choices:
        return asked
    if asked is None and len(choices) == 1:
        return choices[0]
    if not choices:
        raise UserError(f"the samples file has no numeric per-sample {what}", where=str(path),
                        fix="compare a task whose per-sample metric is a number (acc, exact_match, ...)")
    raise UserError(f"unknown {what}" if asked is not None else f"choose a {what}: the file has several",
                    where=f"{flag} for {path}", given=asked, allowed=", ".join(choices),
                    fix=f"pass {flag} {choices[0]}")


def read_mlflow(run_id: str, metric: str | None, tracking_uri: str | None) -> RunSamples:
    """A job's MLflow run: its logged output directory, downloaded to a temporary directory."""
    uri = tracking_uri or os.environ.get(TRACKING_ENV)
    if not uri:
        raise UserError("an MLflow run id needs a tracking server", where=run_id, given="no --tracking-uri and no "
                        f"{TRACKING_ENV}", fix=f"pass --tracking-uri http://host:5000 or set {TRACKING_ENV}")
    import mlflow
    from mlflow.exceptions import MlflowException

    target = Path(tempfile.mkdtemp(prefix=f"runner-compare-{run_id[:8]}-"))
    try:
        client = mlflow.MlflowClient(tracking_uri=uri)
        client.get_run(run_id)
        names = [a.path for a in client.list_artifacts(run_id)]
        if SAMPLES not in names:
            raise UserError("the MLflow run has no per-sample scores", where=f"run {run_id} at {uri}",
                            given=f"artifacts: {', '.join(names) or 'none'}"[:300],
                            allowed=f"a run a job logged (its artifacts hold {SAMPLES})",
                            fix="compare the job's output directory instead, or a run logged by the runner")
        for name in (SAMPLES, "config.yaml", "report.json"):
            if name in names:
                client.download_artifacts(run_id, name, str(target))
    except MlflowException as err:
        raise UserError("cannot read the MLflow run", where=f"run {run_id} at {uri}",
                        given=" ".join(str(err).split())[:300], fix="check the run id and the tracking URI") from None
    run = read_run_dir(target, metric, run_id)
    run.kind = "MLflow run"
    return run
