"""Step 8: report.txt, report.json and results.json in the output directory first, then the tracker: the
same figures everywhere, and nothing lost when the tracker fails."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from runner.contract.errors import EXIT_OK
from runner.contract.evaluator import CORPUS_ITEM, ScoredSample
from runner.contract.printable import printable
from runner.contract.secrets import redact_text, redact_tree
from runner.files.paths import write_atomic
from runner.job.fidelity import run_fidelity
from runner.job.warn import console_notes
from runner.job.state import Job, Loaded, Outcome
from runner.references import samples as reference_samples
from runner.references.noise import host_of, replicates_of
from runner.reports.lm_eval import results_json
from runner.reports.noise import NoiseView, noise_tags
from runner.reports.outputs import report_payload
from runner.reports.text import report_text
from runner.stats.numerics import cluster_variance as clustering
from runner.stats.numerics.corpus_bootstrap import bootstrap_sigma
from runner.stats.decision import Decision
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.noise import Replicate
from runner.tracking import tables
from runner.tracking.naming import breakdown_table, readable_tags, tracked_metrics

log = logging.getLogger("runner")


def reference_entry(job: Job) -> dict[str, Any] | None:
    """The entry the run was judged against, as ``runner.extend`` checks a later look still uses it."""
    ref = job.reference
    if ref is None:
        return None
    recorded = ref.recorded or {}
    return {"file": ref.path.name, "dir": str(ref.path.parent), "index": ref.index, "value": ref.value,
            "num_samples": ref.params.num_samples, "samples": recorded.get("samples"),
            "samples_sha256": recorded.get("samples_sha256"), "seed": recorded.get("seed")}


def corpus_standard_error(job: Job, scored: list[ScoredSample]) -> float | None:
    """The bootstrap standard error of a corpus metric (lm-eval's rule for non-mean aggregations), resampled as the
    decision resamples (``stats.corpus_bootstrap_iters``, ``stats.bootstrap_seed``, clusters where the job clusters);
    None for a mean metric or fewer than two samples."""
    corpus, stats = job.evaluator.corpus_metric(), job.config.stats
    if corpus is None or len(scored) < 2:
        return None
    key = job.task.cluster_key if stats.cluster == "auto" else None
    labels = clustering.labels_of(scored, key) if key else None
    sigma = bootstrap_sigma([s.meta[CORPUS_ITEM] for s in scored], corpus, stats.corpus_bootstrap_iters,
                            stats.bootstrap_seed, [labels[s.sample_id] for s in scored] if labels else None)
    return sigma / math.sqrt(len(scored))


def noise_view(job: Job, decision: Decision | None, scored: list[ScoredSample],
               replicates: list[Replicate]) -> NoiseView | None:
    """What the reports say on where the reference and this run were measured and the noise (None: a run with
    neither a reference nor a recording, ``reference.mode=skip``)."""
    if job.mode == "record":
        return NoiseView(job.host, replicates=replicates, recording=True)
    if job.reference is None:
        return None
    paired = decision.paired if decision is not None else None
    flips = sum(paired.discordant) if paired is not None and paired.discordant is not None else None
    return NoiseView(job.host, host_of(job.reference.recorded), replicates_of(job.reference),
                     paired.n if paired is not None else len(scored), observed=flips,
                     fidelity=run_fidelity(job.reference_rows or {}, scored))


def publish(job: Job, loaded: Loaded, scored: list[ScoredSample], metrics: dict[str, float], params: HypothesisParams,
            decision: Decision | None, record_path: Path | None, eval_time_s: float,
            cache_stats: dict[str, Any] | None, replicates: list[Replicate] | None = None) -> Outcome:
    task, score = job.task, metrics[job.task.metric]
    view = noise_view(job, decision, scored, replicates)
    checked = decision.indicators if decision is not None else None
    lines = [*(view.lines() if view else ()), *(checked.lines() if checked is not None else ())]

    def report(notes: list[str]) -> str:
        return printable(redact_text(report_text(task, job.model, loaded.spec, score, len(scored), params, decision,
                                                 job.mode, notes, lines)))

    text = report(job.notes)
    write_atomic(job.out_dir / "report.txt", text + "\n", 0o644)
    payload = redact_tree(report_payload(task, job.model, loaded.spec, metrics, len(scored), decision, loaded.info,
                                         job.notes, cache_stats, job.tracker.run_id, eval_time_s,
                                         job.evaluator.score_bounds()))
    payload["reference_entry"] = reference_entry(job)
    payload["host"] = dict(job.host)
    payload["noise"] = view.to_dict() if view else None
    payload["indicators"] = checked.to_dict() if checked is not None else None
    write_atomic(job.out_dir / "report.json", json.dumps(payload, indent=2, default=str) + "\n", 0o644)
    results = redact_tree(results_json(task, job.model, loaded.spec, metrics, [s.score for s in scored], loaded.info,
                                       eval_time_s, payload["decision"], corpus_standard_error(job, scored)))
    results["runner"] |= {"host": dict(job.host), "noise": payload["noise"], "indicators": payload["indicators"]}
    write_atomic(job.out_dir / "results.json", json.dumps(results, indent=2, default=str) + "\n", 0o644)
    print(report(console_notes(job)), flush=True)  # what was said as a warning is not printed twice
    job.tracker.log_metrics(tracked_metrics(score, metrics, len(scored), eval_time_s, params, decision))
    job.tracker.set_tags(readable_tags(decision, score) | (noise_tags(view) if view else {})
                         | ({"indicators": "; ".join(checked.reasons()) or "no more often than the reference"}
                            if checked is not None and checked.tests else {}))
    job.tracker.set_description(text, headline=(f"{decision.verdict_line()}: {task.metric} {score:.4g}"
                                                if decision is not None else f"no verdict: {task.metric} {score:.4g}"))
    try:
        log_tables(job, scored, metrics)
    except Exception as err:  # views for the UI: the results are on disk and logged below; never fail the job
        log.warning("could not log the tables to the tracker (%s: %s)", type(err).__name__, err)
    job.tracker.log_artifacts(job.out_dir)
    status = decision.exit_status if decision is not None else EXIT_OK
    return Outcome(status, score, metrics, loaded.spec, job.out_dir, decision, job.tracker.run_id, record_path, job.notes)


def log_tables(job: Job, scored: list[ScoredSample], metrics: dict[str, float]) -> None:
    """Per-sample results, breakdowns and the samples that moved against the reference, as tables."""
    job.tracker.log_dataset(tables.dataset_rows(scored), f"{job.task.name}-{len(scored)}",
                            job.evaluator.source_used or job.task.name)
    job.tracker.log_table(tables.samples_table(scored), "samples")
    breakdown = breakdown_table(metrics)
    if breakdown:
        job.tracker.log_table(breakdown, "breakdown")
    recorded = (job.reference.recorded or {}) if job.reference is not None else {}
    if recorded.get("samples"):
        flipped = tables.flipped_table(reference_samples.load(job.ref_dir, recorded["samples"]), scored,
                                       job.task.higher_is_better)
        if flipped:
            job.tracker.log_table(flipped, "flipped_samples")
