"""A run's fidelity to its reference, where both kept the records: pick changes and option KL of a log-likelihood
task (every option's log-likelihood), top-1 agreement, token KL and NLL change of a teacher-forced one (perplexity's
per-position top-k records). Computed once here for the report and for the early look after the first chunk of
answers; a look that plans, never a verdict."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from runner.contract.evaluator import LOGLIKELIHOODS, TOP_TOKENS, ScoredSample
from runner.job.state import Job
from runner.references.noise import host_of, replicates_of
from runner.references.samples import SampleRow
from runner.reports.noise import NoiseView
from runner.stats.data.noise import Fidelity
from runner.stats.numerics.noise import fidelity
from runner.stats.numerics.token_fidelity import token_fidelity
from runner.stats.planning.fidelity import look_plan

log = logging.getLogger("runner")


def run_fidelity(rows: dict[str, SampleRow], scored: Sequence[ScoredSample]) -> Fidelity | None:
    """The run's records against the reference's per-sample rows, on the samples both kept them for (None: none)."""
    pairs = [(rows[s.sample_id], s) for s in scored if s.sample_id in rows
             and rows[s.sample_id].loglikelihoods is not None and isinstance(s.meta.get(LOGLIKELIHOODS), list)]
    if not pairs:
        return None
    found = fidelity([r.loglikelihoods for r, _ in pairs], [s.meta[LOGLIKELIHOODS] for _, s in pairs])  # type: ignore
    tokened = [(r, s) for r, s in pairs if r.top_tokens is not None and isinstance(s.meta.get(TOP_TOKENS), str)]
    tokens = token_fidelity([r.top_tokens for r, _ in tokened], [s.meta[TOP_TOKENS] for _, s in tokened],  # type: ignore
                            [sum(r.loglikelihoods) for r, _ in tokened],  # type: ignore[arg-type]
                            [sum(s.meta[LOGLIKELIHOODS]) for _, s in tokened]) if tokened else None
    if not found.n and tokens is None:
        return None
    return Fidelity(found.n, found.picks, found.option_kl, tokens)


def first_chunk(per_sample: Sequence[Sequence[object]], chunk_size: int) -> int:
    """How many leading samples the first chunk of ``chunk_size`` requests answers whole (at least one)."""
    total, count = 0, 0
    for requests in per_sample:
        if count and total + len(requests) > chunk_size:
            break
        total += len(requests)
        count += 1
    return count


def plan_note(job: Job, found: Fidelity | None) -> str | None:
    """What the run's fidelity says beside the reference's A/A replicate (:mod:`runner.stats.planning.fidelity`):
    likely to fail, or the samples a verdict needs; None when the entry has no replicate of the same statistics."""
    if job.reference is None:
        return None
    params = job.reference.params
    return look_plan(found, replicates_of(job.reference), job.tolerance.points if job.tolerance else None,
                     params.alpha, params.beta)


def early_look(job: Job, scored: list[ScoredSample], total: int) -> None:
    """Log the run's fidelity to the reference on the first chunk's samples, beside the reference's A/A floor of the
    same statistics (the line the report prints at the end) and what it plans: never a verdict."""
    assert job.reference is not None
    found = run_fidelity(job.reference_rows or {}, scored)
    view = NoiseView(job.host, host_of(job.reference.recorded), replicates_of(job.reference), fidelity=found)
    line = view.fidelity_line()
    if line:
        log.info("early look after the first %d of %d samples: %s", len(scored), total, line)
    plan = plan_note(job, found)
    if plan:
        log.info("early look: %s", plan)
