"""One job per GPU group in a sweep: how many GPUs are visible, and which a job gets."""

from __future__ import annotations

import logging
import os
from typing import Any

from omegaconf import OmegaConf

from runner.contract.build import target_class

log = logging.getLogger("runner")
GPU_COUNT_RESOLVER = "runner.gpu_count"


def visible_gpu_count() -> int:
    """The GPUs this process may use (0 without torch or CUDA). torch counts them through NVML, which
    does not initialise CUDA, so ``CUDA_VISIBLE_DEVICES`` can still be narrowed afterwards."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


def gpu_count() -> int:
    """``${runner.gpu_count:}``: how many jobs to run at once for one job per GPU (1 without a GPU,
    so the same launcher preset runs the sweep one job at a time on a CPU host)."""
    return max(visible_gpu_count(), 1)


def register_resolvers() -> None:
    """Make the runner's OmegaConf resolvers known (``conf/hydra/launcher/joblib_gpu.yaml`` uses
    ``runner.gpu_count``). Called by the entry points, like the schemas; idempotent."""
    if not OmegaConf.has_resolver(GPU_COUNT_RESOLVER):
        OmegaConf.register_new_resolver(GPU_COUNT_RESOLVER, gpu_count)


def gpus_for_job(job_num: int, count: int, visible: str | None, per_job: int = 1) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` value for job ``job_num``, or None to leave the variable as it is.

    ``count`` GPUs are visible, ``visible`` is the current variable (None: unset, all GPUs) and a job
    needs ``per_job`` of them (tensor x pipeline parallel). Job k gets group ``k mod (count // per_job)``
    of the visible ones, named as the variable names them (ids or UUIDs). Nothing changes when only
    one group fits, or when the variable already holds no more than one job's GPUs: a scheduler
    (SLURM, a container) chose them, or an earlier job of this worker process did, and CUDA, once
    initialised in a process, keeps the devices it saw first."""
    if count < 2:
        return None
    named = [d.strip() for d in visible.split(",") if d.strip()] if visible is not None else []
    ids = named[:count] if named else [str(i) for i in range(count)]
    groups = len(ids) // max(per_job, 1)
    if groups < 2:
        return None
    first = (job_num % groups) * per_job
    return ",".join(ids[first:first + per_job])


def spread_over_gpus(backend: Any, job_num: int) -> str | None:
    """One job per GPU, so parallel launchers (``hydra/launcher=joblib_gpu``: n_jobs = GPU count) do
    not all land on the first GPU. Called before the job imports anything that initialises CUDA.

    The backend class says what it needs (:meth:`runner.contract.backend.Backend.gpu_needs`):
    - a device key (backend=hf) with ``backend.device=auto``: job k runs on ``cuda:(k mod count)``;
      the device is returned, for the caller to write into the job's config (hence logged with the run);
    - every visible GPU (the TensorRT-LLM backends, which spawn worker processes): job k gets its
      own ``CUDA_VISIBLE_DEVICES`` of ``per_job`` GPUs (:func:`gpus_for_job`), which this process
      and its children inherit;
    - no GPU: nothing is set."""
    needs = target_class(backend._target_, "backend").gpu_needs(backend)
    if needs.per_job == 0:
        return None  # no GPU: an HTTP client, say
    if needs.device_key:
        if backend.device != "auto":
            return None
        count = visible_gpu_count()
        if count <= 1:
            return None
        device = f"cuda:{job_num % count}"
        log.info("sweep job %d runs on %s (%d GPUs visible)", job_num, device, count)
        return device
    devices = gpus_for_job(job_num, visible_gpu_count(), os.environ.get("CUDA_VISIBLE_DEVICES"), needs.per_job)
    if devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = devices
        log.info("sweep job %d runs with CUDA_VISIBLE_DEVICES=%s", job_num, devices)
    return None
