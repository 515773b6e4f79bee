"""Before a job loads its model: how long it is expected to take, said on the console and in its report when
that is more than a minute, so that nobody waits half an hour unwarned.

The figures are the dry run's (:mod:`runner.job.dry_run`): the median seconds per computed sample of earlier runs
of the same model, quant, task and backend in MLflow, times the n this job evaluates; for a quantized spec, plus
the median calibration time of earlier builds of the same model and spec, or, for a spec simulated on this CPU that
no build of this model measured, its calibration size x the model's size x a measured rate (runner.quant.cost).
Simulated quantization on a CPU that no earlier run measured is said as such, since it is slow and nothing else
would warn.
"""

from __future__ import annotations

from runner.job.calibration_time import duration, quantization_seconds, simulated_on_cpu
from runner.job.dry_run import cached_requests, job_num_samples
from runner.job.history import evaluation_rate
from runner.job.state import Job

LONG_S = 60.0
"""A job expected to take longer than this says so before it starts."""


def expectation(job: Job) -> str | None:
    """The line to show before the model loads, or None for a job expected to be short (or unknown and not a
    simulated quantization on CPU)."""
    n, _ = job_num_samples(job, job.asked_num_samples)
    rate, rate_words = evaluation_rate(job.config, job)
    build, build_words = quantization_seconds(job)
    if (rate is not None or simulated_on_cpu(job)) and answered_from_cache(job, n):
        rate = None  # nothing to evaluate: only a build (when the quantized model is not cached) is left to say
        if build is None or build <= LONG_S:
            return None
    parts, total = [], 0.0
    if rate is not None:
        total += rate * n
        parts.append(f"evaluation ~{duration(rate * n)} for {n} samples ({rate:.2f} s/sample, {rate_words}; less "
                     "when the generation cache holds answers)")
    if build is not None:
        total += build
        parts.append(f"calibration ~{duration(build)} unless the quantized model is cached ({build_words})")
    if total > LONG_S:
        return (f"expected: about {duration(total)} before the verdict, model loading not included: "
                + "; ".join(parts) + "; set task.num_samples=N for a shorter run")
    if rate is None and simulated_on_cpu(job):
        return (f"quant={job.quant.name} is simulated on this CPU (fake-quantization around every linear layer) and no "
                f"earlier run measured it ({rate_words}): evaluation takes about 1.2-2x as long as quant=none"
                + (f", after a calibration of ~{duration(build)} unless the quantized model is cached ({build_words})"
                   if build is not None else "")
                + " (docs/own-model.md, \"What CPU runs cost\"); once one run is logged, dry_run=true estimates the next")
    return None


def answered_from_cache(job: Job, n: int) -> bool:
    """Whether the generation cache holds every request of the job's samples (as the dry run counts them); False
    when that cannot be known before the model loads (a draw that needs the model's tokens)."""
    if not job.config.cache.enabled:
        return False
    try:
        samples = job.evaluator.samples(n, job.config.seed)
        requests = [r for s in samples for r in job.evaluator.requests(s)]
        return bool(requests) and cached_requests(job.config, job, requests) == len(requests)
    except Exception:  # noqa: BLE001 - what is said before a job is a courtesy: never a reason to fail it
        return False
