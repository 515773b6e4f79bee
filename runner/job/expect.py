"""Before a job loads its model: how long it is expected to take, said on the console and in its report when
that is more than a minute, so that nobody waits half an hour unwarned.

The figures are the dry run's (:mod:`runner.job.dry_run`): the median seconds per computed sample of earlier runs
of the same model, quant, task and backend in MLflow, times the n this job evaluates; for a quantized spec, plus
the median calibration time of earlier builds of the same model and spec (a cached quantized model loads in
about a second). Simulated quantization on a CPU that no earlier run measured is said as such, with the costs
measured in docs/own-model.md, since it is slow and nothing else would warn.
"""

from __future__ import annotations

from runner.job.dry_run import earlier_runs, evaluation_rate, job_num_samples
from runner.job.state import Job

LONG_S = 60.0
"""A job expected to take longer than this says so before it starts."""


def expectation(job: Job) -> str | None:
    """The line to show before the model loads, or None for a job expected to be short (or unknown and not a
    simulated quantization on CPU)."""
    n, _ = job_num_samples(job, job.asked_num_samples)
    rate, rate_words = evaluation_rate(job.config, job)
    build, build_words = quantization_seconds(job)
    parts, total = [], 0.0
    if rate is not None:
        total += rate * n
        parts.append(f"evaluation ~{duration(rate * n)} for {n} samples ({rate:.2f} s/sample, {rate_words}; less "
                     "when the generation cache holds answers)")
    if build is not None:
        total += build
        parts.append(f"quantization ~{duration(build)} unless the quantized model is cached ({build_words})")
    if total > LONG_S:
        return (f"expected: about {duration(total)} before the verdict, model loading not included: "
                + "; ".join(parts) + "; set task.num_samples=N for a shorter run")
    if rate is None and simulated_on_cpu(job):
        return (f"quant={job.quant.name} is simulated on this CPU (fake-quantization around every linear layer) and no "
                f"earlier run measured it ({rate_words}): evaluation takes about 1.2-2x as long as quant=none, and a "
                "spec that calibrates adds 1 to 6 minutes for a 135M model on 2 cores (docs/own-model.md, "
                "\"What CPU runs cost\"); once one run is logged, dry_run=true estimates the next")
    return None


def quantization_seconds(job: Job) -> tuple[float | None, str]:
    """The median calibration time of earlier runs of the same model, quant and backend (any task) that built
    the quantized model (a cache miss); None for an unquantized spec or when none did."""
    if not (job.quant.quant_algo or job.quant.kv_cache_quant_algo):
        return None, ""
    runs, why = earlier_runs(job.config, job, same_task=False)
    built = [r.data.metrics["quant_calib_time_s"] for r in runs or []
             if r.data.tags.get("backend.quant_cache") == "miss" and "quant_calib_time_s" in r.data.metrics]
    if not built:
        return None, why or "no earlier build measured"
    return sorted(built)[len(built) // 2], f"median of {len(built)} earlier builds"


def simulated_on_cpu(job: Job) -> bool:
    """A quantized spec on the hf backend, which simulates it with ModelOpt, on a CPU."""
    if job.config.backend.name != "hf" or not (job.quant.quant_algo or job.quant.kv_cache_quant_algo):
        return False
    device = str(getattr(job.config.backend, "device", "auto"))
    if device != "auto":
        return device == "cpu"
    import torch

    return not torch.cuda.is_available()


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
