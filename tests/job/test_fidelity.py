"""Fidelity signals as an early, cheap look (issue 49 point 4): the run's pick changes and option KL, or a teacher-forced
text's top-1 agreement, token KL and NLL change, after its first chunk of answers and in the report, beside the
reference's A/A replicate of the same statistics; and never a verdict. Pipeline logic on the scripted backend, whose
``backend.jitter`` moves every log-likelihood (and every top-k log-probability) by a deterministic amount."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from runner.job.flow import run
from tests.conftest import compose

ARC = ["backend=fake", "task=arc_easy", "task.num_samples=24", "tracking=none", "cache=off", "cache.chunk_size=20"]
PPL = ["backend=fake", "task=perplexity", "task.min_tokens=50", "task.num_samples=12", "tracking=none", "cache=off",
       "cache.chunk_size=5", "stats.paired_test=t"]


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _picks(row: dict) -> int:
    lls = row["meta"]["loglikelihoods"]
    return max(range(len(lls)), key=lambda i: lls[i])


def test_the_early_look_counts_the_first_chunks_pick_changes_beside_the_replicate(tmp_path, caplog):
    refs = tmp_path / "refs"
    run(compose([*ARC, "reference.mode=record", "reference.noise=replicate", f"reference.dir={refs}",
                 "backend.replicate_jitter=3.0", f"output_dir={tmp_path / 'rec'}"]))
    with caplog.at_level(logging.INFO, logger="runner"):
        run(compose([*ARC, f"reference.dir={refs}", "backend.jitter=3.0", f"output_dir={tmp_path / 'check'}"]))
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("early look after")]
    a, b = _rows(tmp_path / "rec" / "samples.jsonl"), _rows(tmp_path / "check" / "samples.jsonl")
    # the first chunk of 20 requests: the leading questions whose options fit in it whole (ARC has 3 to 5 options)
    head, total = 0, 0
    while total + len(a[head]["meta"]["loglikelihoods"]) <= 20:
        total += len(a[head]["meta"]["loglikelihoods"])
        head += 1
    changed = sum(_picks(x) != _picks(y) for x, y in zip(a[:head], b[:head]))
    assert line.startswith(f"early look after the first {head} of 24 samples: {changed} of {head} picks changed")
    assert "(A/A: shift=0,jitter=3: " in line and line.endswith("a look, not a verdict")
    (plan,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("early look: ")]
    assert plan.startswith("early look: picks changed at ") and plan.endswith("(a look that plans, never a verdict)")
    everything = sum(_picks(x) != _picks(y) for x, y in zip(a, b))
    assert f"fidelity:    {everything} of 24 picks changed" in (tmp_path / "check" / "report.txt").read_text()


def test_the_perplexity_fidelity_beside_its_replicate_and_the_verdict_the_same_without_it(tmp_path, caplog):
    refs = tmp_path / "refs"
    run(compose([*PPL, "reference.mode=record", "reference.noise=replicate", f"reference.dir={refs}",
                 "backend.replicate_jitter=0.5", f"output_dir={tmp_path / 'rec'}"]))
    recorded = _rows(tmp_path / "rec" / "samples.jsonl")
    assert all(isinstance(r["meta"]["top_tokens"], str) for r in recorded)
    with caplog.at_level(logging.INFO, logger="runner"):
        run(compose([*PPL, f"reference.dir={refs}", "backend.jitter=0.5", f"output_dir={tmp_path / 'with'}"]))
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("early look after")]
    assert line.startswith("early look after the first 5 of 12 samples: top-1 agreement ")
    assert "(A/A: shift=0,jitter=0.5: top-1 agreement " in line
    report = json.loads((tmp_path / "with" / "report.json").read_text())
    tokens = report["noise"]["fidelity"]["tokens"]
    # the same jitter on both sides: the run's figures are the replicate's, every text compared
    (rep,) = report["noise"]["replicates"]
    assert tokens["n"] == 12 and tokens == rep["tokens"]
    assert 0 < tokens["top1_agreement"]["mean"] < 1 and tokens["token_kl"]["mean"] > 0

    # the same run against an entry whose rows keep no records, and with the early look off: the same verdict
    entry = refs / "samples" / "perplexity"
    (rows_file,) = entry.glob("*.jsonl")
    stripped = [{k: v for k, v in r.items() if k not in ("loglikelihoods", "top_tokens")} for r in _rows(rows_file)]
    bare = tmp_path / "bare"
    (bare / "samples" / "perplexity").mkdir(parents=True)
    (bare / "samples" / "perplexity" / rows_file.name).write_text("".join(json.dumps(r) + "\n" for r in stripped))
    text = (refs / "perplexity.yaml").read_text()
    sha = [x.split(": ")[1] for x in text.splitlines() if "samples_sha256" in x][0]
    import hashlib

    (bare / "perplexity.yaml").write_text(
        text.replace(sha, hashlib.sha256((bare / "samples" / "perplexity" / rows_file.name).read_bytes()).hexdigest()))
    run(compose([*PPL, f"reference.dir={bare}", "backend.jitter=0.5", f"output_dir={tmp_path / 'without'}"]))
    run(compose([*PPL, f"reference.dir={refs}", "backend.jitter=0.5", "reference.early_look=false",
                 f"output_dir={tmp_path / 'off'}"]))
    without = json.loads((tmp_path / "without" / "report.json").read_text())
    off = json.loads((tmp_path / "off" / "report.json").read_text())
    assert without["noise"]["fidelity"] is None
    assert report["decision"] == without["decision"] == off["decision"]
    assert report["decision"]["verdict"] and report["decision"]["p_value"] is not None
