"""``dry_run=true``: what a job (or each job of a sweep) would do, without loading a model.

Every check that needs no model runs (the same :func:`runner.job.prepare.prepare` as a real job), the seeded
samples are drawn, and the line says how many samples, how many of their requests the generation
cache already holds (matched on the model's files, quant spec, backend settings, limits and chat
format: versions and device are known only once the model loads, so the count is what a rerun on
the same host would find), and an estimate of the time from the throughput of earlier runs of the
same model, quant, task and backend in MLflow.

A task whose subset depends on the model's tokens (perplexity keeps documents of ``min_tokens``) is
drawn with the backend's tokenizer alone (:meth:`Backend.tokenizer_counter`), so its requests are
counted too; only a backend that cannot count tokens without its model leaves them uncounted.
"""

from __future__ import annotations

import logging
from runner.backends.models import resolve_model_source
from runner.cache import generations
from runner.config.schemas import RunnerConfig
from runner.contract.errors import UserError
from runner.contract.requests import Request
from runner.contract.spec import AccuracySpec
from runner.job.calibration_time import duration, quantization_seconds
from runner.job.history import evaluation_rate
from runner.job.prepare import prepare
from runner.job.state import Job
from runner.references import store as references

log = logging.getLogger("runner")


def dry_run(cfg: RunnerConfig, position: str = "", asked_num_samples: int | None = None) -> str:
    """The job's line: n, cached requests, estimated time; printed and returned. ``asked_num_samples``: the n the
    run set (:func:`runner.job.flow.asked_num_samples`); None, as for a real job, takes the reference entry's."""
    job = prepare(cfg)
    head = f"{position}{cfg.quant.name}-{cfg.task.name} ({cfg.model.hf_id}, backend={cfg.backend.name}): "
    uncounted = use_tokenizer(job)
    n, whose = job_num_samples(job, asked_num_samples)
    try:
        samples = job.evaluator.samples(n, cfg.seed)
    except UserError:  # the subset depends on the model's tokenizer (length filters): known once it loads
        line = (head + f"n={n}{whose} (drawn by the model's token counts once it loads); cache: not counted"
                f"{uncounted}; estimate: {estimate_seconds(cfg, job, n, None, 0)}{calibration(job)}")
        print(line, flush=True)
        return line
    requests = [r for s in samples for r in job.evaluator.requests(s)]
    cached = cached_requests(cfg, job, requests)
    estimate = estimate_seconds(cfg, job, len(samples), cached, len(requests))
    line = (head + f"n={len(samples)}{whose}, {len(requests)} requests; cache: "
            + ("off" if cached is None else f"{cached} of {len(requests)} stored")
            + f"; estimate: {estimate}{calibration(job)}")
    print(line, flush=True)
    return line


def calibration(job: Job) -> str:
    """The quantized model's build, said before it is paid ("" for a spec that builds nothing to speak of)."""
    seconds, words = quantization_seconds(job)
    if seconds is None:
        return ""
    return f"; calibration: ~{duration(seconds)} unless the quantized model is cached ({words})"


def job_num_samples(job: Job, asked: int | None) -> tuple[int, str]:
    """The n the real job would draw, and whose it is: the n the run set; else, when judged against a reference,
    the matching entry's n (looked up as ``runner.plan`` looks it up: the dtype is known once the model loads,
    so any dtype's entry matches); else the task's."""
    if asked is not None or job.mode != "check":
        return job.defaults.num_samples, ""
    config = job.config
    baseline = config.reference.against == "baseline"
    spec = AccuracySpec(dtype="auto", quant_algo=None if baseline else job.quant.quant_algo,
                        kv_cache_quant_algo=None if baseline else job.quant.kv_cache_quant_algo,
                        extra_acc_spec=job.evaluator.extra_acc_spec())
    try:
        entry = references.lookup(job.ref_dir, job.task.name, job.task.metric, job.model.hf_id, spec, job.defaults)
    except UserError:
        return job.defaults.num_samples, " (the task's; no reference entry matches before the model loads)"
    if entry.params.num_samples == job.defaults.num_samples:
        return entry.params.num_samples, ""
    return entry.params.num_samples, f" (the reference entry's: {entry.path.name}, entry {entry.index})"


def use_tokenizer(job: Job) -> str:
    """Hand the task the backend's tokenizer-only counter, as a real job hands it the loaded model's;
    returns why the counts are unavailable ("" when they are, or when the backend counts no tokens)."""
    if not job.backend.capabilities.token_counter:
        return ""
    try:
        counter = job.backend.tokenizer_counter()
    except Exception as err:  # a tokenizer that cannot load without the model (a Hub id offline...): say so, go on
        return f" (the tokenizer did not load without the model: {type(err).__name__}: {str(err)[:160]})"
    if counter is None:
        return f" (backend={job.config.backend.name} counts tokens only with its model loaded)"
    job.evaluator.use_token_counter(counter)
    return ""


def cached_requests(cfg: RunnerConfig, job: Job, requests: list[Request]) -> int | None:
    """How many of ``requests`` the generation cache holds under a context of this job (None: cache off)."""
    if not cfg.cache.enabled:
        return None
    path = generations.cache_path(cfg.cache)
    if not path.is_file():
        return 0
    source = resolve_model_source(job.model.name, job.model.hf_id, job.model.path, job.model.embedded)
    models = [generations.model_fingerprint(location, job.model.revision)  # what the backend loads, or names
              for location in (source.location, job.model.path or job.model.hf_id)]
    wanted = generations.settings_context(job.quant, cfg.backend, type(job.backend).answer_neutral_settings,
                                          job.limits, job.chat)
    limits = wanted.pop("limits")
    limits.pop("guided_decoding")  # the backend decides it once loaded
    store = generations.GenerationCache(path)
    best = 0
    try:
        for context_id, doc in store.contexts():
            if doc.get("model") not in models or any(doc.get(k) != v for k, v in wanted.items()):
                continue
            if {k: v for k, v in (doc.get("limits") or {}).items() if k != "guided_decoding"} != limits:
                continue
            view = generations.BoundCache(store, context_id)
            keys = [view.key(r) for r in requests]
            found = store.get_many(sorted(set(keys)))
            best = max(best, sum(k in found for k in keys))
    finally:
        store.close()
    return best


def estimate_seconds(cfg: RunnerConfig, job: Job, n: int, cached: int | None, total: int) -> str:
    """Seconds per computed sample of earlier FINISHED runs of the same model/quant/task/backend, times the
    samples still to compute (model loading not included). A run that answered part of its requests from the
    cache computed only the rest: its time is divided by the samples it computed (its cache misses' share);
    a run answered wholly from the cache measured nothing."""
    rate, words = evaluation_rate(cfg, job)
    if rate is None:
        return words
    todo = n if cached is None or not total else n * (total - cached) / total
    return f"~{rate * todo:.0f} s of evaluation ({rate:.2f} s/sample, {words})"
