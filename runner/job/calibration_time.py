"""How long a job's quantized model takes to build before it loads: the calibration time it should expect, from
earlier builds in MLflow, or from the spec's calibration size, the model's size and a measured rate
(:mod:`runner.quant.cost`) for a spec simulated on this CPU."""

from __future__ import annotations

from runner.backends.models import resolve_model_source
from runner.contract.errors import UserError
from runner.job.history import earlier_runs
from runner.job.state import Job
from runner.quant import cost
from runner.quant.algos import needs_calibration


def quantization_seconds(job: Job) -> tuple[float | None, str]:
    """The calibration time the job should expect, and where the figure comes from: the median of earlier builds
    of the same model, quant and backend (any task); else, for a spec simulated on this CPU, its calibration size
    x the model's size x a rate (the median of earlier builds of any model on this host, or the prior); None for
    a spec without calibration, or when nothing can be said."""
    if not (job.quant.quant_algo or job.quant.kv_cache_quant_algo):
        return None, ""
    runs, why = earlier_runs(job.config, job, same_task=False)
    built = [r.data.metrics["quant_calib_time_s"] for r in runs or []
             if r.data.tags.get("backend.quant_cache") == "miss" and "quant_calib_time_s" in r.data.metrics]
    if built:
        return sorted(built)[len(built) // 2], f"median of {len(built)} earlier builds"
    if not simulated_on_cpu(job) or not needs_calibration(job.quant):
        return None, why or "no earlier build measured"
    measured, count = cost.rate_from_runs(earlier_builds(job))
    return cost.calibration_seconds(job.quant, model_size(job), measured, count)


def earlier_builds(job: Job) -> list[dict[str, float]]:
    """The metrics of earlier builds of the same quant on the same backend, any model (their calibration rates)."""
    runs, _ = earlier_runs(job.config, job, same_task=False, same_model=False)
    return [dict(r.data.metrics) for r in runs or [] if r.data.tags.get("backend.quant_cache") == "miss"]


def model_size(job: Job) -> int | None:
    """The linear parameters of the job's checkpoint, read from its config.json without loading it."""
    try:
        source = resolve_model_source(job.model.name, job.model.hf_id, job.model.path, job.model.embedded)
    except UserError:
        return None
    return cost.model_parameters(source.location)


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
