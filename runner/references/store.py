"""Reference scores in TensorRT-LLM's YAML schema: reading and looking them up.

``references/<task>.yaml`` maps a Hugging Face model id to a list of entries. Each entry names
the accuracy spec it was measured under (absent keys take their defaults: ``dtype: auto``,
everything else ``None``), the metric value, and optionally per-entry overrides of the test
(``alpha``, ``beta``, ``sigma``, ``num_samples``, ``higher_is_better``), an explicit floor
(``threshold_override``, the name of newer upstream tables, or ``threshold``, this runner's older name
for the same thing: it replaces the computed threshold) and ``reference_note`` (free text shown in the
report). Lookup uses TensorRT-LLM's rule: the FIRST entry whose value for every
spec key equals the query wins, so files from that repository drop in unchanged.

When the runner records a reference (:mod:`runner.references.recording`) it adds one key upstream
never reads, ``recorded:`` (provenance), which keeps the file loadable by TensorRT-LLM's harness.
"""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from runner.contract.errors import ReferenceError_
from runner.contract.spec import SPEC_KEYS, AccuracySpec
from runner.stats.data.hypothesis import HypothesisParams, check_params

OVERRIDE_KEYS = ("alpha", "beta", "sigma", "num_samples", "higher_is_better")
"""Entry keys that replace the task's statistical defaults for that entry only."""
THRESHOLD_KEYS = ("threshold_override", "threshold")
"""Entry keys holding an explicit floor (upstream's newer name first); both mean the same rule."""
PROVENANCE_KEY = "recorded"
"""The one key the runner adds to an entry; lookup never reads it."""


@dataclass
class ReferenceConfig:
    mode: str = "check"  # check | record | skip
    # None: the project's references/ for the embedded model, your own (my-references/, or $RUNNER_REFERENCES_DIR)
    # for any other model (runner.references.store.reference_dir)
    dir: Optional[str] = None
    against: str = "spec"  # spec: the entry of the effective spec | baseline: the unquantized entry
    overwrite: bool = False  # record mode: replace an entry registered for the same spec (refused otherwise)
    # record mode: also replace an entry of the project's references/ that the embedded demo reads (refused otherwise)
    overwrite_demo: bool = False
    # record mode: none | replicate (score the same samples again under the backend's perturbations, batch size 1 and
    # the other dtype auto can choose, and store the A/A shift with the entry: runner/job/replicate.py)
    noise: str = "none"
    # the replicate's samples: the first N of the recording's (a seeded draw, as every subset); None: all of them
    replicate_samples: Optional[int] = None
    # how the entry's measured noise enters a continuous paired rule: auto (whenever the entry has a replicate) |
    # host_differs (only when this run's host fingerprint differs from the entry's) | off (runner/job/noise.py)
    floor: str = "auto"
    # a run against an entry with option log-likelihoods or top-k records: answer the first chunk of requests
    # (cache.chunk_size) as its own call and log the fidelity to the reference after it (runner/job/answer.py)
    early_look: bool = True


def default_reference_dir() -> Path:
    """The project's ``references/`` directory, next to the ``runner`` package."""
    return Path(__file__).resolve().parents[2] / "references"


USER_DIR_ENV = "RUNNER_REFERENCES_DIR"
"""Locates your own references directory (default: ``my-references/`` beside the project's ``references/``)."""


def user_reference_dir() -> Path:
    """Where references of your own models live unless ``reference.dir`` says otherwise: ``$RUNNER_REFERENCES_DIR``,
    else ``my-references/`` at the project's root (ignored by git there: the project's tracked files change
    only when ``reference.dir=references`` asks for it)."""
    configured = os.environ.get(USER_DIR_ENV)
    return Path(configured).expanduser() if configured else default_reference_dir().parent / "my-references"


def reference_dir(configured: str | None, task: str, model: str, recording: bool, embedded: bool) -> Path:
    """The directory a job reads its reference from, or records it into.

    ``reference.dir`` when set. Otherwise the embedded demo model's references stay in the project's
    ``references/`` (the demo reads them); any other model records into :func:`user_reference_dir`, and is
    checked there once that directory registers it for the task, else against the project's entries (the
    upstream tables' models)."""
    if configured:
        return Path(configured)
    if embedded:
        return default_reference_dir()
    mine = user_reference_dir()
    if recording or registers(mine, task, model):
        return mine
    return default_reference_dir()


def registers(ref_dir: Path, task: str, model: str) -> bool:
    """Whether ``ref_dir``'s file for ``task`` holds at least one entry of ``model``."""
    path = reference_path(ref_dir, task)
    if not path.is_file():
        return False
    data = _load(path)
    return bool(data and _entries(data, model, path))


@dataclass(frozen=True)
class Reference:
    """One matched entry, with the test parameters that apply to it."""

    task: str
    model: str
    spec: AccuracySpec
    value: float
    params: HypothesisParams  # the task's defaults with this entry's overrides applied
    threshold: float | None  # explicit floor from the entry, replacing the computed one
    note: str | None
    path: Path
    index: int  # position of the entry in the model's list
    recorded: Mapping[str, Any] | None = None  # provenance written by reference.mode=record

    @property
    def samples_measured(self) -> int | None:
        """The n the value was measured on (``recorded.num_samples``, written by reference.mode=record); None
        for an entry that does not record it (upstream's files)."""
        n = (self.recorded or {}).get("num_samples")
        return int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 1 and n == int(n) else None


def metric_key(metric: str) -> str:
    """The entry key holding the metric value: ``accuracy`` or the metric name in lower case."""
    key = metric.lower()
    return "accuracy" if key == "accuracy" else key


def reference_path(ref_dir: str | os.PathLike[str], task: str) -> Path:
    return Path(ref_dir) / f"{task}.yaml"


def _record_hint(task: str, model: str) -> str:
    return (
        f"record {model}'s reference once: rerun a trusted configuration (e.g. the unquantized model, quant=none) "
        f"as `python -m runner task={task} <your overrides> reference.mode=record`; then gate quantized builds against it with "
        "reference.against=baseline, or run with reference.mode=skip for a score without a verdict"
    )


def _entry_spec(entry: Mapping[str, Any]) -> AccuracySpec:
    return AccuracySpec(**{k: entry.get(k, AccuracySpec.default_for(k)) for k in SPEC_KEYS})


def _matches(entry: Mapping[str, Any], query: Mapping[str, Any]) -> bool:
    """TensorRT-LLM's rule: every query key equals the entry's value or its default."""
    return all(entry.get(k, AccuracySpec.default_for(k)) == v for k, v in query.items())


def _broken_link(path: Path) -> None:
    """A reference file that is a symlink leading nowhere: said as such (recording would replace the link)."""
    try:
        os.stat(path)
        loop = False
    except OSError as err:
        loop = err.errno == errno.ELOOP
    what = "a symlink loop" if loop else "a symlink to a missing file"
    raise ReferenceError_(f"the reference file is {what}", where=str(path), given=f"{path} -> {os.readlink(path)}",
                          allowed="a YAML file, or a symlink to one",
                          fix="point the link at the reference file, remove it, or set reference.dir elsewhere")


def _load(path: Path) -> dict[str, Any] | None:
    """The parsed file (plain containers), or None when it does not exist."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    if path.is_symlink() and not path.exists():
        _broken_link(path)
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReferenceError_("the reference file cannot be read", where=str(path),
                              given=f"{type(exc).__name__}: {exc}"[:300],
                              fix="make it a readable UTF-8 YAML file, or point reference.dir elsewhere") from None
    try:
        data = YAML(typ="safe", pure=True).load(text)
    except YAMLError as exc:
        raise ReferenceError_(
            "the reference file is not valid YAML",
            where=str(path),
            given=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            fix="fix the syntax (the schema is `<hf model id>: [ {spec keys..., accuracy: N}, ... ]`)",
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ReferenceError_(
            "the reference file must map model ids to lists of entries",
            where=str(path),
            given=type(data).__name__,
        )
    return data


def _entries(data: Mapping[str, Any], model: str, path: Path) -> list[Mapping[str, Any]]:
    entries = data.get(model)
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ReferenceError_(
            f"the entries of '{model}' must be a YAML list",
            where=str(path),
            given=type(entries).__name__,
            allowed="a list of mappings, one per accuracy spec",
        )
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ReferenceError_(
                f"entry {i} of '{model}' is not a mapping",
                where=str(path),
                given=repr(entry),
                allowed="a mapping of spec keys, the metric value and optional overrides",
            )
    return entries


def _registered(path: Path, data: dict[str, Any] | None, task: str, model: str) -> list[Mapping[str, Any]]:
    """The model's entries; a missing file or model is an error that says how to record one."""
    if data is None:
        raise ReferenceError_(f"no reference file for task '{task}'", where=str(path), fix=_record_hint(task, model))
    if model not in data:
        registered = ", ".join(sorted(map(str, data))) or "(none)"
        raise ReferenceError_(f"model '{model}' has no references for task '{task}'", where=str(path), given=model,
                              allowed=f"models registered in this file: {registered}", fix=_record_hint(task, model))
    return _entries(data, model, path)


def preflight(ref_dir: str | os.PathLike[str], task: str, model: str, writing: bool) -> None:
    """Before any model loads: the task's reference file parses and, to check, registers the model;
    to record (``writing``), the file or its directory can be written. A bad references file never
    costs an evaluation."""
    if Path(ref_dir).exists() and not Path(ref_dir).is_dir():
        raise ReferenceError_("reference.dir is not a directory", where="reference.dir", given=f"{ref_dir} (a file)",
                              allowed="the directory that holds <task>.yaml reference files",
                              fix="give the directory, not a file in it (e.g. reference.dir="
                                  f"{Path(ref_dir).parent})")
    path = reference_path(ref_dir, task)
    data = _load(path)
    if not writing:
        _registered(path, data, task, model)
        return
    if data is not None:
        _entries(data, model, path)
    target = path if path.exists() else _nearest_existing(path.parent)
    if not os.access(target, os.W_OK) or (target != path and not target.is_dir()):
        raise ReferenceError_("the reference cannot be recorded: its file or directory is not writable",
                              where=str(path), given=f"{target} is not a writable {'file' if target == path else 'directory'}",
                              fix="fix the permissions, or set reference.dir to a writable directory")


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def registered_entry(ref_dir: str | os.PathLike[str], task: str, model: str,
                     spec: AccuracySpec) -> Mapping[str, Any] | None:
    """The entry of ``model`` registered for exactly ``spec`` (the one recording would replace), or None."""
    path = reference_path(ref_dir, task)
    data = _load(path)
    entries = _entries(data, model, path) if data else []
    query = spec.as_query()
    return next((e for e in entries if _matches(e, query)), None)


@dataclass(frozen=True)
class Recording:
    """What a record job is about to write, checked before anything is evaluated."""

    task: str
    metric: str
    model: str
    spec: AccuracySpec
    planned: int  # the n it evaluates, written as the entry's num_samples (later runs against it take it)
    default: int  # the task's default n
    demo: str | None = None  # the embedded demo's jobs that read this entry, in words; None: no demo job does


def check_replacement(ref_dir: str | os.PathLike[str], rec: Recording, overwrite: bool,
                      overwrite_demo: bool = False) -> list[str]:
    """Record mode, once the effective spec is known and before anything is evaluated: an entry of the
    same spec is replaced only with ``overwrite``, an entry the embedded demo reads only with
    ``overwrite_demo`` as well; the notes say what later runs will see differently (their n, the demo)."""
    path = reference_path(ref_dir, rec.task)
    entry = registered_entry(ref_dir, rec.task, rec.model, rec.spec)
    fixed_before = None if entry is None else entry.get("num_samples", rec.default)
    notes = []
    if entry is not None:
        recorded = entry.get(PROVENANCE_KEY) or {}
        old_n = recorded.get("num_samples", entry.get("num_samples"))
        key = metric_key(rec.metric)
        old = f"{key}={entry.get(key)}" + (f" at n={old_n}" if old_n else "") \
            + (f", recorded {recorded['date']}" if recorded.get("date") else "")
        where = f"{path} ({rec.model}, {rec.spec.describe()})"
        demo = f"; the embedded demo reads it: {rec.demo}" if rec.demo else ""
        if not overwrite:
            raise ReferenceError_(
                "a reference is already registered for this model and spec; recording would replace it",
                where=where, given=f"the registered entry: {old}{demo}",
                fix="keep it (reference.mode=check gates against it), or replace it on purpose with "
                    + ("reference.overwrite=true reference.overwrite_demo=true, or record into a directory of your "
                       "own with reference.dir=DIR" if rec.demo else "reference.overwrite=true"))
        if rec.demo and not overwrite_demo:
            raise ReferenceError_(
                "this entry is the embedded demo's reference (make demo, make demo-release): replacing it would "
                "change what every later demo run compares against", where=where,
                given=f"the registered entry: {old}{demo}",
                fix="record into a directory of your own (reference.dir=DIR, and the same reference.dir=DIR for the "
                    "runs checked against it), or replace the demo's entry on purpose with reference.overwrite=true "
                    "reference.overwrite_demo=true")
        note = f"replacing the reference {old} of {rec.model} [{rec.spec.describe()}]"
        if isinstance(old_n, (int, float)) and rec.planned < old_n:
            note += f"; WARNING: the new measurement plans fewer samples ({rec.planned}) than the one it replaces ({old_n})"
        notes.append(note)
        if rec.demo:
            notes.append(f"WARNING: this entry is the embedded demo's reference; {rec.demo} will be judged against "
                         "the new value (reference.overwrite_demo=true)")
    if fixed_before is not None and fixed_before != rec.planned:
        notes.append(f"WARNING: later runs judged against this entry evaluate num_samples={rec.planned}, not the "
                     f"{fixed_before} the entry fixed until now (the task's default is {rec.default}); a run sets "
                     "its own n with task.num_samples=N")
    elif rec.planned != rec.default:
        notes.append(f"WARNING: this entry fixes num_samples={rec.planned} for later runs judged against it: they "
                     f"evaluate {rec.planned} samples, not the task's default {rec.default}, unless they set "
                     "task.num_samples=N")
    return notes


def list_specs(ref_dir: str | os.PathLike[str], task: str, model: str) -> list[AccuracySpec]:
    """Every spec registered for a model, in file order (empty when the file or model is absent)."""
    path = reference_path(ref_dir, task)
    data = _load(path)
    if data is None:
        return []
    return [_entry_spec(e) for e in _entries(data, model, path)]


def judged_key(spec: AccuracySpec, against: str) -> AccuracySpec:
    """The key a run's entry is found under: its own spec, or (``reference.against=baseline``) the unquantized
    baseline's, the same spec without its weight and KV-cache quantization."""
    return replace(spec, quant_algo=None, kv_cache_quant_algo=None) if against == "baseline" else spec


def lookup(
    ref_dir: str | os.PathLike[str],
    task: str,
    metric: str,
    model: str,
    spec: AccuracySpec,
    defaults: HypothesisParams,
) -> Reference:
    """The first entry of ``model`` matching ``spec`` on every spec key, with overrides applied."""
    path = reference_path(ref_dir, task)
    entries = _registered(path, _load(path), task, model)
    query = spec.as_query()
    for index, entry in enumerate(entries):
        if _matches(entry, query):
            return _build(task, metric, model, spec, defaults, path, index, entry)
    registered_specs = "\n".join(f"    - {_entry_spec(e).describe()}" for e in entries) or "    (none)"
    raise ReferenceError_(
        f"no reference of '{model}' for task '{task}' matches the spec {spec.describe()}",
        where=str(path),
        given=spec.describe(),
        allowed="the specs registered for this model:\n" + registered_specs,
        fix=_record_hint(task, model),
    )


def _build(
    task: str,
    metric: str,
    model: str,
    spec: AccuracySpec,
    defaults: HypothesisParams,
    path: Path,
    index: int,
    entry: Mapping[str, Any],
) -> Reference:
    where = f"{path}: '{model}' entry {index} ({_entry_spec(entry).describe()})"
    key = metric_key(metric)
    value = entry.get(key, entry.get("accuracy"))
    if value is None:
        raise ReferenceError_(
            f"the matching reference entry holds no value for metric '{metric}'",
            where=where,
            allowed=f"a numeric '{key}' key" + ("" if key == "accuracy" else " (or 'accuracy')"),
            fix=f"add `{key}: <score>` to the entry or record it with reference.mode=record",
        )
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ReferenceError_(
            f"the reference value for '{key}' is not a finite number",
            where=where,
            given=repr(value),
        )
    merged = {name: entry.get(name, getattr(defaults, name)) for name in OVERRIDE_KEYS}
    check_params(**merged, where=where)
    threshold = _explicit_threshold(entry, where)
    note = entry.get("reference_note")
    return Reference(
        task=task,
        model=model,
        spec=spec,
        value=float(value),
        params=HypothesisParams(**merged),
        threshold=None if threshold is None else float(threshold),
        note=None if note is None else str(note),
        path=path,
        index=index,
        recorded=dict(entry["recorded"]) if isinstance(entry.get("recorded"), Mapping) else None,
    )


def _explicit_threshold(entry: Mapping[str, Any], where: str) -> float | None:
    """The entry's explicit floor (``threshold_override`` or ``threshold``), or None.

    Either key replaces the computed threshold for this entry only; an entry giving both with different
    values is refused rather than silently preferring one."""
    given = {key: entry[key] for key in THRESHOLD_KEYS if entry.get(key) is not None}
    for key, value in given.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ReferenceError_(f"the entry's explicit threshold ({key}) is not a finite number", where=where,
                                  given=repr(value), allowed="a number on the metric's scale",
                                  fix=f"write `{key}: <floor>` or remove the key to use the computed threshold")
    if len(set(map(float, given.values()))) > 1:
        raise ReferenceError_("the entry gives two different explicit thresholds", where=where,
                              given=", ".join(f"{k}={v}" for k, v in given.items()),
                              allowed="one of threshold_override (upstream's name) or threshold",
                              fix="keep one key")
    return float(next(iter(given.values()))) if given else None
