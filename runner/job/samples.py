"""Step 4: the task's seeded subset, and a note before any request is sent when its size differs from
what was asked. An n the user set is honoured against a reference recorded with more: with the reference's
per-sample scores the run draws a seeded subset of the reference's own samples, so the paired test pairs on
every one of them."""

from __future__ import annotations

import logging
import random

from runner.contract.evaluator import Sample
from runner.job.state import Job
from runner.reports.text import asked_n_note, sample_count_notes
from runner.stats.data.hypothesis import HypothesisParams
from runner.job.warn import warn

log = logging.getLogger("runner")


def select_samples(job: Job, params: HypothesisParams, checked: bool) -> list[Sample]:
    if job.backend.capabilities.token_counter:
        job.evaluator.use_token_counter(job.backend.count_tokens)  # length filters in the model's tokens
    seed, reference_n = job.config.seed, job.reference_num_samples
    # an extendable run's look 1 is the task's own draw, whatever n the reference was recorded with, so that a
    # reference recorded again on more samples (to pair the extensions) leaves look 1 where it was
    extendable = bool(job.config.stats.extensions)
    pool = (reference_pool(job, reference_n) if reference_n is not None and params.num_samples < reference_n
            and not extendable else None)
    if pool is not None:
        samples = seeded_subset(pool, params.num_samples, seed)
    else:
        samples = job.evaluator.samples(params.num_samples, seed)
    notes = sample_count_notes(job.task.default_num_samples, job.asked_num_samples is None, params.num_samples,
                               len(samples), checked, entry_words(job))
    if reference_n is not None and extendable:
        notes.insert(0, extendable_n_note(job, params.num_samples, reference_n))
    elif reference_n is not None:
        notes.insert(0, asked_n_note(params, reference_n, None if pool is None else len(pool)))
    for note in notes:
        warn(job, note)
    log.info("evaluating %d %s samples (seed %d)", len(samples), job.task.name, seed)
    return samples


def entry_words(job: Job) -> str:
    """The matched reference entry in words: its file and position, and when and on how many samples it was
    recorded (a re-recorded entry changes the n of every later run that inherits it)."""
    ref = job.reference
    if ref is None:
        return ""
    recorded = ref.recorded or {}
    when = f", recorded {recorded['date']}" if recorded.get("date") else ""
    on = f" on {ref.samples_measured} samples" if ref.samples_measured else ""
    return f"{ref.path.name}, entry {ref.index}{when}{on}"


def extendable_n_note(job: Job, n: int, reference_n: int) -> str:
    """What look 1 of an extendable run evaluates when the reference was recorded with another n."""
    rows = job.reference_rows
    paired = ("every look pairs on the reference's scores of the same samples" if rows
              else "every look is the unpaired test against the entry's score")
    return (f"task.num_samples={n}: look 1 evaluates the task's seeded draw of {n} samples, each extension the "
            f"task's larger draw; the reference was recorded with num_samples={reference_n}: {paired}")


def reference_pool(job: Job, reference_n: int) -> list[Sample] | None:
    """The samples the reference was recorded on (the task's seeded subset at the reference's n, those with a
    per-sample score), or None when they cannot be paired: no per-sample scores, or another seed."""
    rows, recorded = job.reference_rows, (job.reference.recorded or {}) if job.reference is not None else {}
    if not rows or (recorded.get("seed") is not None and int(recorded["seed"]) != job.config.seed):
        return None
    pool = [s for s in job.evaluator.samples(reference_n, job.config.seed) if s.id in rows]
    return pool or None


def seeded_subset(pool: list[Sample], n: int, seed: int) -> list[Sample]:
    """``n`` of ``pool``, drawn with ``seed`` and kept in the pool's order (all of it when it has no more)."""
    if n >= len(pool):
        return list(pool)
    keep = sorted(random.Random(f"reference-subset:{seed}").sample(range(len(pool)), n))
    return [pool[i] for i in keep]
