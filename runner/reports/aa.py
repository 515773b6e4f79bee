"""``python -m runner.compare RUN_A RUN_B --aa``: two runs of one model as an A/A replicate.

The same record ``reference.noise=replicate`` stores at record time (:mod:`runner.stats.numerics.noise`), built from any two
job directories of the same model and task (another host, dtype, batch size, thread count or server concurrency),
and optionally written into a references file as the entry's ``recorded.noise``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.contract.errors import UserError
from runner.contract.evaluator import LOGLIKELIHOODS, TOP_TOKENS
from runner.contract.fingerprint import describe, describe_differences, differences
from runner.contract.spec import AccuracySpec
from runner.references.noise import attach, noise_block
from runner.stats.data.noise import Replicate
from runner.stats.numerics.noise import replicate


@dataclass(frozen=True)
class JobRun:
    """What a job directory tells about its run: the model, task, effective spec, host and per-sample rows."""

    where: Path
    model: str
    task: str
    spec: AccuracySpec
    host: dict[str, str]
    rows: dict[str, dict[str, Any]]


def read_job(path: Path) -> JobRun:
    """A job's output directory (report.json and samples.jsonl); anything else is refused with what to give."""
    report, samples = path / "report.json", path / "samples.jsonl"
    if not report.is_file() or not samples.is_file():
        raise UserError("--aa compares two job output directories", where=str(path),
                        given="no report.json and samples.jsonl there",
                        allowed="a job's output directory (the path its 'outputs:' line printed)",
                        fix="give the directories of two runs of the same model and task")
    try:
        payload = json.loads(report.read_text(encoding="utf-8"))
        rows = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines() if line.strip()]
        spec = AccuracySpec(**payload["spec"])
        found = {str(r["sample_id"]): r for r in rows}
        model, task = str(payload["model"]), str(payload["task"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UserError("the job's report.json or samples.jsonl cannot be read", where=str(path),
                        given=f"{type(err).__name__}: {err}"[:300], fix="give the files a job wrote, unmodified") from None
    host = payload.get("host")
    return JobRun(path, model, task, spec, {str(k): str(v) for k, v in host.items()} if isinstance(host, dict) else {},
                  found)


def aa_replicate(a: JobRun, b: JobRun) -> Replicate:
    """B against A, paired on the samples both answered; refused unless one model and one task."""
    for what, x, y in (("model", a.model, b.model), ("task", a.task, b.task)):
        if x != y:
            raise UserError(f"an A/A replicate compares two runs of one {what}", where=f"{a.where} vs {b.where}",
                            given=f"{x} vs {y}", fix="give two runs of the same model on the same task")
    ids = [sid for sid in a.rows if sid in b.rows]
    if len(ids) < 2:
        raise UserError("the two runs share fewer than 2 samples", where=f"{a.where} vs {b.where}",
                        given=f"{len(ids)} common sample ids", fix="run both on the same samples (seed, n, dataset)")
    x, y = [a.rows[i] for i in ids], [b.rows[i] for i in ids]
    has_ll = all(isinstance(r.get("meta", {}).get(LOGLIKELIHOODS), list) for r in x + y)
    has_top = all(isinstance(r.get("meta", {}).get(TOP_TOKENS), str) for r in x + y)
    name = "runs: " + describe_differences(differences(a.host, b.host)) if a.host and b.host else "runs: hosts unknown"
    return replicate(name, [float(r["score"]) for r in x], [float(r["score"]) for r in y],
                     sum(p.get("prediction") != q.get("prediction") for p, q in zip(x, y)),
                     [r["meta"][LOGLIKELIHOODS] for r in x] if has_ll else None,
                     [r["meta"][LOGLIKELIHOODS] for r in y] if has_ll else None, {"a": a.host, "b": b.host},
                     a_tokens=[r["meta"][TOP_TOKENS] for r in x] if has_top else None,
                     b_tokens=[r["meta"][TOP_TOKENS] for r in y] if has_top else None)


def run_aa(path_a: str, path_b: str, write_reference: str | None) -> str:
    """The A/A record of two job directories, as text; with ``write_reference`` (a references directory) also written
    as the ``recorded.noise`` of A's entry (its model and effective spec) in ``<dir>/<task>.yaml``."""
    a, b = read_job(Path(path_a)), read_job(Path(path_b))
    found = aa_replicate(a, b)
    lines = [f"A/A replicate of {a.model} on {a.task} ({found.n} paired samples)",
             f"A measured on: {describe(a.host) if a.host else 'not recorded'}",
             f"B measured on: {describe(b.host) if b.host else 'not recorded'}",
             f"differs:       {describe_differences(differences(a.host, b.host)) if a.host and b.host else 'unknown'}",
             f"replicate:     {found.describe()}",
             f"floor:         {found.floor:.4g} (the largest mean shift either way the replicate does not rule out)"]
    if write_reference:
        written = attach(write_reference, a.task, a.model, a.spec, noise_block("runs", [found]))
        lines.append(f"written: recorded.noise of {a.model} [{a.spec.describe()}] in {written}")
    return "\n".join(lines)
