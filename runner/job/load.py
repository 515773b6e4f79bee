"""Step 2, with the model loaded: read back what it is (the effective spec), refuse a spec other than
the one asked for, and tell the tracker what was loaded."""

from __future__ import annotations

import logging
from dataclasses import replace

from runner.contract.errors import ConfigError
from runner.contract.reasoning import key_parts
from runner.contract.spec import AccuracySpec
from runner.contract.task_config import QuantConfig
from runner.job.state import Job, Loaded
from runner.tracking.naming import backend_details_for_tracking

log = logging.getLogger("runner")


def load(job: Job) -> Loaded:
    """The backend is entered; its effective spec plus the task's protocol deviations is the reference key."""
    info = job.backend.info()
    check_effective_spec(job.quant, info.spec)
    job.evaluator.bind_backend(info)
    # the task's protocol, its sampling and chat-template arguments, then the backend's
    parts = (job.evaluator.extra_acc_spec(), *key_parts(job.task), info.spec.extra_acc_spec)
    spec = replace(info.spec, extra_acc_spec=",".join(p for p in parts if p) or None)
    if info.spec_declared:
        job.notes.append(f"accuracy spec declared in the config, not read back from the model: {spec.describe()}")
    log.info("loaded %s on %s: effective spec %s", info.model_path, info.device, spec.describe())
    detail_tags, detail_metrics = backend_details_for_tracking(info.details)
    job.tracker.set_tags({f"version.{k}": v for k, v in info.versions.items()} | detail_tags
                         | {"device": info.device, "effective_dtype": spec.dtype, "extra_acc_spec": str(spec.extra_acc_spec)})
    job.tracker.log_metrics(detail_metrics)
    return Loaded(info, spec)


def check_effective_spec(quant: QuantConfig, effective: AccuracySpec) -> None:
    """Rule: the reference key is what was loaded; if it differs from what was asked, stop."""
    asked = (quant.quant_algo, quant.kv_cache_quant_algo)
    got = (effective.quant_algo, effective.kv_cache_quant_algo)
    if asked != got:
        raise ConfigError(
            "the loaded model's accuracy spec differs from the requested one",
            where=f"quant={quant.name}", given=f"loaded quant_algo={got[0]}, kv_cache_quant_algo={got[1]}",
            allowed=f"quant_algo={asked[0]}, kv_cache_quant_algo={asked[1]}",
            fix="choose the quant option that matches the checkpoint, or point model.path at the right checkpoint",
        )
