"""Step 3: the reference entry of the effective spec (or of the unquantized baseline), its test
parameters, and its per-sample scores when a paired test can use them. Statistics never read files:
this step loads what they need."""

from __future__ import annotations

import logging
from dataclasses import replace

from runner.contract.spec import AccuracySpec
from runner.job import demo
from runner.job.state import Job
from runner.references import samples as reference_samples, store as references
from runner.references.store import Reference
from runner.stats.data.hypothesis import HypothesisParams
from runner.job.warn import warn

log = logging.getLogger("runner")


def check_recording(job: Job, spec: AccuracySpec) -> list[str]:
    """Record mode, before anything is evaluated: the entry about to be written may replace one only as
    ``reference.overwrite``/``overwrite_demo`` allow; the notes say what later runs will see differently."""
    task, model, settings = job.task, job.model.hf_id, job.config.reference
    replaced = references.registered_entry(job.ref_dir, task.name, model, spec) is not None
    readers = demo.readers(job.ref_dir, task.name, model, spec) if replaced else []
    rec = references.Recording(task.name, task.metric, model, spec, job.defaults.num_samples, task.default_num_samples,
                               demo.describe(readers) if readers else None)
    return references.check_replacement(job.ref_dir, rec, settings.overwrite, settings.overwrite_demo)


def find_reference(job: Job, spec: AccuracySpec) -> tuple[Reference | None, HypothesisParams]:
    """The matched entry (None unless ``reference.mode=check``) and the parameters of its test."""
    settings = job.config.reference
    if job.mode == "record":
        for note in check_recording(job, spec):
            warn(job, note)
    if job.mode != "check":
        return None, job.defaults
    key = references.judged_key(spec, settings.against)
    if settings.against == "baseline":
        job.notes.append(f"compared with the unquantized baseline reference [{key.describe()}]")
    reference = references.lookup(job.ref_dir, job.task.name, job.task.metric, job.model.hf_id, key, job.defaults)
    job.reference = reference
    if reference.note:
        job.notes.append(f"reference note ({reference.path.name}, entry {reference.index}): {reference.note}")
    recorded = reference.recorded or {}
    if job.config.stats.method != "unpaired" and recorded.get("samples"):
        job.reference_rows = reference_samples.load_rows(job.ref_dir, str(recorded["samples"]),
                                                         recorded.get("samples_sha256"))
    log.info("reference %s = %.4f (%s, entry %d)", job.task.metric, reference.value, reference.path, reference.index)
    params = reference.params
    if job.asked_num_samples is not None and params.num_samples != job.asked_num_samples:
        job.reference_num_samples = params.num_samples  # an n the user set wins over the entry's
        params = replace(params, num_samples=job.asked_num_samples)
    return reference, params
