"""Step 5: every request answered in bulk (through the generation cache when it is on) and scored; with
a sequential monitor, one bulk call per look until a boundary is crossed. One progress bar counts the
job's requests: answers read from the cache and answers the backend computes, whichever call or thread
they arrive in."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, Sequence

from runner.cache import generations
from runner.contract.backend import Answerer, BackendInfo
from runner.contract.evaluator import Evaluator, Sample, ScoredSample
from runner.contract.indicators import INDICATORS, plain, same_facts, sample_indicators
from runner.contract.progress import Progress
from runner.contract.reasoning import apply_sampling, strip_thinking
from runner.contract.requests import GenerationRequest, LoglikelihoodRequest, Response
from runner.job.decide import decision_at
from runner.job.fidelity import early_look, first_chunk
from runner.job.indicators import without_failures
from runner.stats.conclusion import Monitor
from runner.job.state import Job
from runner.references.store import Reference
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.decision import Decision
from runner.tracking.trackers import Tracker

log = logging.getLogger("runner")


def answer(job: Job, info: BackendInfo, samples: list[Sample], monitor: Monitor | None = None,
           reference: Reference | None = None, params: HypothesisParams | None = None
           ) -> tuple[list[ScoredSample], float, dict[str, Any] | None]:
    """The scored samples, the seconds spent answering and scoring them, and the cache's counts."""
    limits = replace(job.limits, guided_decoding=info.details.get("guided_decoding", "none"))
    settings = generations.settings_context(job.quant, job.config.backend, type(job.backend).answer_neutral_settings,
                                            limits, job.chat)
    cache = generations.open_for_job(job.config.cache, job.model.revision, settings, info)
    started = time.monotonic()
    per_sample = job_requests(job.evaluator, samples, job.task.sampling)  # all first: the bar shows the total
    progress = Progress(sum(len(r) for r in per_sample), job.backend.progress)
    job.backend.track(progress)
    answerer: Answerer = job.backend if cache is None else generations.CachedBackend(
        job.backend, cache, job.config.cache.chunk_size, progress)
    try:
        scored = answer_looks(job, answerer, samples, per_sample, monitor, reference, params)
    finally:
        job.backend.track(None)
        progress.close()
    eval_time_s = time.monotonic() - started  # requests answered and scored (model loading excluded)
    return scored, eval_time_s, log_cache(cache, job.tracker)


def job_requests(evaluator: Evaluator, samples: Sequence[Sample], sampling: Any) -> list[list[Any]]:
    """Each sample's requests, the task's ``sampling`` applied to every generation request."""
    return [[apply_sampling(r, sampling) if isinstance(r, GenerationRequest) else r for r in evaluator.requests(s)]
            for s in samples]


def answer_looks(job: Job, answerer: Answerer, samples: list[Sample], per_sample: list[list[Any]],
                 monitor: Monitor | None, reference: Reference | None, params: HypothesisParams | None
                 ) -> list[ScoredSample]:
    """All samples scored at once, or one look at a time until the monitor stops."""
    if monitor is None:
        head = early_look_size(job, per_sample)
        if head is None:
            return score_all(job.evaluator, answerer, samples, per_sample, job.task.strip_thinking)
        scored = score_all(job.evaluator, answerer, samples[:head], per_sample[:head], job.task.strip_thinking)
        early_look(job, scored, len(samples))
        return scored + score_all(job.evaluator, answerer, samples[head:], per_sample[head:], job.task.strip_thinking)
    assert reference is not None and params is not None
    scored: list[ScoredSample] = []
    for n_k in monitor.sizes:
        scored += score_all(job.evaluator, answerer, samples[len(scored):n_k], per_sample[len(scored):n_k],
                            job.task.strip_thinking)
        look = monitor.observe(decision_of_look(job, reference, samples[:len(scored)], scored, params), len(scored))
        log.info("sequential look %d: n=%d Z=%s bounds [%.3f, %.3f]%s", len(monitor.looks), look.n,
                 "n/a" if look.z is None else f"{look.z:.3f}", look.futility, look.efficacy,
                 f" -> stop ({monitor.stopped})" if monitor.stopped else "")
        if monitor.stopped:
            break
    return scored


def decision_of_look(job: Job, reference: Reference, samples: list[Sample], scored: list[ScoredSample],
                     params: HypothesisParams) -> Decision:
    """A look's decision on the samples neither arm failed, as the run's final decision leaves them out
    (:func:`runner.job.indicators.without_failures`): a failed answer never counts as a wrong one."""
    samples, scored, _ = without_failures(job, samples, scored)
    return decision_at(job, reference, samples, scored, job.evaluator.aggregate(scored),
                       replace(params, num_samples=len(scored)))


def early_look_size(job: Job, per_sample: Sequence[Sequence[Any]]) -> int | None:
    """The samples of the first chunk of requests, when the run can look at its fidelity after them: a reference
    whose rows kept option log-likelihoods, ``reference.early_look`` on, and samples left after the chunk."""
    rows = job.reference_rows or {}
    if not job.config.reference.early_look or not any(r.loglikelihoods is not None for r in rows.values()):
        return None
    head = first_chunk(per_sample, job.config.cache.chunk_size)
    return head if head < len(per_sample) else None


def score_all(evaluator: Evaluator, answerer: Answerer, samples: Sequence[Sample],
              per_sample: Sequence[Sequence[Any]], strip: bool = False) -> list[ScoredSample]:
    """Send each kind of the samples' requests (``per_sample``, the evaluator's) to ``answerer`` in one
    call, then let the evaluator score; with ``strip`` (the task's ``strip_thinking``) a reasoning block is
    cut from each generated text first (:mod:`runner.contract.reasoning`)."""
    flat = [r for reqs in per_sample for r in reqs]
    responses: list[Response | None] = [None] * len(flat)
    for kind, method in ((GenerationRequest, answerer.generate), (LoglikelihoodRequest, answerer.loglikelihood)):
        idx = [i for i, r in enumerate(flat) if isinstance(r, kind)]
        if idx:
            for i, out in zip(idx, method([flat[i] for i in idx])):  # type: ignore[arg-type]
                responses[i] = same_facts(out, strip_thinking(out)) if strip and isinstance(out, str) else out
    grouped, pos = [], 0
    for reqs in per_sample:
        grouped.append(responses[pos:pos + len(reqs)])
        pos += len(reqs)
    scored = evaluator.score_batch(samples, [[plain(r) for r in g] for g in grouped])  # type: ignore[arg-type,misc]
    return [with_indicators(evaluator, s, resp) for s, resp in zip(scored, grouped)]


def with_indicators(evaluator: Evaluator, scored: ScoredSample, responses: Sequence[Any]) -> ScoredSample:
    """``scored`` with its indicators in its meta (:mod:`runner.contract.indicators`), where it generated text."""
    found = sample_indicators(responses, evaluator.answer_unparsed(scored))
    return scored if found is None else replace(scored, meta=scored.meta | {INDICATORS: found})


def log_cache(cache: generations.BoundCache | None, tracker: Tracker) -> dict[str, Any] | None:
    """Say how much the generation cache answered (log line and tracker metrics)."""
    if cache is None:
        log.info("generation cache: off")
        return None
    total = cache.hits + cache.misses
    log.info("generation cache: %d hits, %d misses (%.0f%% answered from %s)", cache.hits, cache.misses,
             100.0 * cache.hits / total if total else 0.0, cache.store.path)
    tracker.log_metrics({"cache_hits": float(cache.hits), "cache_misses": float(cache.misses)})
    return {"hits": cache.hits, "misses": cache.misses, "path": str(cache.store.path)}
