"""Step 4: the task's seeded subset, and a note before any request is sent when its size differs from
what was asked."""

from __future__ import annotations

import logging

from runner.contract.evaluator import Sample
from runner.job.state import Job
from runner.reports.text import sample_count_notes
from runner.stats.unpaired import HypothesisParams

log = logging.getLogger("runner")


def select_samples(job: Job, params: HypothesisParams, checked: bool) -> list[Sample]:
    if job.backend.capabilities.token_counter:
        job.evaluator.use_token_counter(job.backend.count_tokens)  # length filters in the model's tokens
    samples = job.evaluator.samples(params.num_samples, job.config.seed)
    for note in sample_count_notes(job.task.num_samples, params.num_samples, len(samples), checked):
        log.warning(note)
        job.notes.append(note)
    log.info("evaluating %d %s samples (seed %d)", len(samples), job.task.name, job.config.seed)
    return samples
