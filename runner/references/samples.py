"""Per-sample reference scores, stored content-addressed next to the reference YAML.

A recorded reference keeps every sample's score under ``references/samples/<task>/<sha>.jsonl``
and names that file (and its sha256) in the entry's ``recorded`` mapping. This is what a
paired test needs, and it works on hosts that cannot reach the MLflow server the reference
was recorded with. The file name is the hash of its content, so a file never changes once
referenced.

Each row holds the sample id, its score at full precision (a rounded score would make an identical
rerun of a continuous metric look different) and the sha256 of the prompt the sample was asked
with, so a paired test can check it compares answers to the same questions. A task with a corpus metric
also stores each sample's corpus item (``item``), which the paired corpus bootstrap pools; a task that generates
text stores each sample's indicators (``indicators``: prompt cut, token limit reached, answer unparsed, backend failed).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.contract import top_tokens
from runner.contract.errors import ReferenceError_
from runner.contract.indicators import read as read_indicators


def prompt_hash(prompt: str) -> str:
    """The fingerprint of a sample's prompt stored with its reference score."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class SampleRow:
    score: float
    prompt_sha256: str | None  # None in files recorded before prompt hashes were stored
    item: Any = None  # the sample's corpus item, for a task with a corpus metric
    loglikelihoods: tuple[float, ...] | None = None  # a log-likelihood task's scored options, in request order
    # the sample's indicators (prompt cut, token limit, unparsed, failed: runner.contract.indicators); None: recorded
    # before they were kept, or a task that generates no text: unknown, never guessed
    indicators: Mapping[str, bool | None] | None = None
    top_tokens: str | None = None  # a teacher-forced text's per-position top-k record (runner.contract.top_tokens)


def store(ref_dir: Path, task: str, rows: Iterable[tuple[str, float, str]],
          items: Mapping[str, Any] | None = None,
          loglikelihoods: Mapping[str, Sequence[float]] | None = None,
          indicators: Mapping[str, Mapping[str, bool | None]] | None = None,
          top_tokens: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Write ``(sample_id, score, prompt)`` rows (the prompt as its hash), with each sample's corpus item from
    ``items`` when the task has a corpus metric, its options' log-likelihoods from ``loglikelihoods`` when it
    scores them, its ``indicators`` when it generates text and its per-position top-k record from ``top_tokens``
    when it keeps one; return (path relative to ``ref_dir``, sha256 of the file)."""
    items, loglikelihoods, indicators = items or {}, loglikelihoods or {}, indicators or {}
    top_tokens = top_tokens or {}
    body = "".join(json.dumps({"sample_id": sid, "score": float(score), "prompt_sha256": prompt_hash(prompt)}
                              | ({"item": items[sid]} if sid in items else {})
                              | ({"loglikelihoods": [float(v) for v in loglikelihoods[sid]]}
                                 if sid in loglikelihoods else {})
                              | ({"indicators": dict(indicators[sid])} if sid in indicators else {})
                              | ({"top_tokens": top_tokens[sid]} if sid in top_tokens else {})) + "\n"
                   for sid, score, prompt in rows)
    digest = hashlib.sha256(body.encode()).hexdigest()
    relative = Path("samples") / task / f"{digest[:20]}.jsonl"
    target = Path(ref_dir) / relative
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        partial.write_text(body)
        os.replace(partial, target)
    return relative.as_posix(), digest


def load(ref_dir: Path, relative: str, sha256: str | None = None) -> dict[str, float]:
    """The stored scores by sample id; the content must still hash to ``sha256`` when given."""
    return {sid: row.score for sid, row in load_rows(ref_dir, relative, sha256).items()}


def load_rows(ref_dir: Path, relative: str, sha256: str | None = None) -> dict[str, SampleRow]:
    """The stored rows by sample id; the content must still hash to ``sha256`` when given."""
    root = Path(ref_dir).resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root / "samples"):
        raise ReferenceError_("a reference entry points at a per-sample file outside the references' samples directory",
                              where=f"{Path(ref_dir)} (entry field 'samples')", given=relative,
                              allowed=f"a path under {root / 'samples'}",
                              fix="restore the entry from version control, or record the reference again")
    if not path.is_file():
        raise ReferenceError_("the reference's per-sample scores file is missing", where=str(path),
                              fix="restore it from version control, or record the reference again")
    body = path.read_bytes()
    if sha256 and hashlib.sha256(body).hexdigest() != sha256:
        raise ReferenceError_("the reference's per-sample scores file was modified", where=str(path),
                              given=hashlib.sha256(body).hexdigest(), allowed=sha256,
                              fix="restore the original file, or record the reference again")
    rows: dict[str, SampleRow] = {}
    try:
        for line in body.decode().splitlines():
            if line.strip():
                row = json.loads(line)
                if str(row["sample_id"]) in rows:
                    raise ReferenceError_("a sample appears twice in the reference's per-sample scores file",
                                          where=str(path), given=f"sample_id {row['sample_id']}",
                                          allowed="one row per sample, as a recording writes it",
                                          fix="restore it from version control, or record the reference again")
                lls = row.get("loglikelihoods")
                rows[str(row["sample_id"])] = SampleRow(float(row["score"]), row.get("prompt_sha256"), row.get("item"),
                                                        None if lls is None else tuple(float(v) for v in lls),
                                                        read_indicators(row.get("indicators")),
                                                        top_record(row.get("top_tokens")))
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise ReferenceError_("the reference's per-sample scores file is malformed", where=str(path),
                              given=f"{type(err).__name__}: {err}"[:300],
                              fix="restore it from version control, or record the reference again") from None
    return rows


def top_record(value: Any) -> str | None:
    """A row's top-k record, checked to decode (a ValueError, reported as a malformed file, when it does not)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"top_tokens is a {type(value).__name__}, not an encoded record")
    top_tokens.decode(value)
    return value


@dataclass(frozen=True)
class RunProvenance:
    """What the new run evaluated, to check that the reference's per-sample scores are comparable."""

    seed: int
    dataset_source: str | None


def pairing_problem(recorded: dict[str, Any], rows: dict[str, Any], scored: Sequence[Any], run: RunProvenance) -> str | None:
    """Why the reference's per-sample scores cannot be paired with this run's (None: they can).

    Pairs must be the same samples: ids in common, the same seed and dataset source, and every
    common sample asked with the same prompt (its hash is stored with the reference score)."""
    seed = recorded.get("seed")
    if seed is not None and int(seed) != int(run.seed):
        return f"the reference was recorded with seed={seed} and this run uses seed={run.seed}"
    source = recorded.get("dataset_source")
    if source and run.dataset_source and str(source) != str(run.dataset_source):
        return f"the reference was recorded on dataset source '{source}' and this run reads '{run.dataset_source}'"
    common = [s for s in scored if s.sample_id in rows]
    if not common:
        return (f"no sample id of this run is among the reference's {len(rows)} "
                "(another subset, seed or dataset)")
    if any(rows[s.sample_id].prompt_sha256 is None for s in common):
        return "the reference's per-sample file stores no prompt hashes (recorded by an older runner): record it again"
    differ = sum(rows[s.sample_id].prompt_sha256 != prompt_hash(s.prompt) for s in common)
    if differ:
        return f"{differ} of the {len(common)} common samples were asked with a different prompt than the reference's"
    return None
