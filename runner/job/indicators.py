"""Step 6b: what the truncation- and error-aware verdict needs, measured (``stats.indicators``,
``stats.max_failed_share``); the dispatcher decides (:func:`runner.stats.dispatch.indicator_check`).

Before the decision, the samples the backend failed on (an error instead of an answer) in either arm are left out
of both, at every look and at the end alike (:func:`without_failures`); above ``stats.max_failed_share`` of the
samples the verdict is INCONCLUSIVE. The decision gets each sample's indicators (:mod:`runner.contract.indicators`)
in both arms, the A/A replicate's allowance per indicator and the samples neither arm cut
(:class:`~runner.stats.data.indicators.IndicatorData`). A reference recorded without indicators leaves its arm
unknown: the run's counts are shown and nothing is tested.
"""

from __future__ import annotations

from typing import Sequence

from runner.contract.errors import EndpointError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.indicators import FAILED, INDICATORS, read
from runner.job.state import Job
from runner.references.noise import replicates_of
from runner.stats.data.indicators import CUT, TESTED, CleanSubset, Failures, IndicatorData, Marks
from runner.stats.numerics.indicators import discordant


def _run(scored: ScoredSample) -> dict[str, bool | None] | None:
    return read(scored.meta.get(INDICATORS))


def _reference(job: Job, sample_id: str) -> dict[str, bool | None] | None:
    row = (job.reference_rows or {}).get(sample_id)
    return None if row is None or row.indicators is None else dict(row.indicators)


def without_failures(job: Job, samples: Sequence[Sample], scored: Sequence[ScoredSample]
                     ) -> tuple[list[Sample], list[ScoredSample], Failures | None]:
    """The samples and scores left once the backend's failures in either arm are taken out, and their count (None:
    no failure): the same at every look of a sequential run as at its end. Failing on every sample is an error, since
    there is nothing to judge."""
    run = {s.sample_id for s in scored if (_run(s) or {}).get(FAILED)}
    ref = {s.sample_id for s in scored if (_reference(job, s.sample_id) or {}).get(FAILED)}
    if not run and not ref:
        return list(samples), list(scored), None
    out = run | ref
    failures = Failures(len(scored), len(run), len(ref), len(out), float(job.config.stats.max_failed_share))
    if len(out) == len(scored):
        raise EndpointError("the backend failed on every sample: there is no answer to judge",
                            where=f"backend={job.config.backend.name}", given=failures.describe(),
                            fix="check the server or backend (its log says why), then rerun: answers are never "
                                "cached for a failed request")
    return [s for s in samples if s.id not in out], [s for s in scored if s.sample_id not in out], failures


def exclude_failures(job: Job, samples: Sequence[Sample], scored: Sequence[ScoredSample]
                     ) -> tuple[list[Sample], list[ScoredSample], Failures | None]:
    """:func:`without_failures` for the run's final decision, the count said in the job's notes."""
    kept_samples, kept, failures = without_failures(job, samples, scored)
    if failures is not None:
        job.notes.append(failures.describe())
    return kept_samples, kept, failures


def measured(job: Job, samples: Sequence[Sample], scored: Sequence[ScoredSample], metrics: dict[str, float],
             failures: Failures | None) -> IndicatorData:
    """The indicators of ``scored`` (failures already left out; ``metrics`` their aggregate) and of the reference's
    rows, the replicate's allowances and the clean samples (not under ``stats.indicators=off``, which tests
    nothing), as the dispatcher reads them."""
    mode = job.config.stats.indicators
    run = {s.sample_id: marks for s in scored for marks in [_run(s)] if marks is not None}
    reference = {sid: marks for sid in run for marks in [_reference(job, sid)] if marks is not None}
    return IndicatorData(mode, run, reference, {name: allowance(job, name) for name in TESTED}, failures,
                         clean_subset(job, samples, scored, metrics, reference) if reference and mode != "off"
                         else None)


def clean_subset(job: Job, samples: Sequence[Sample], scored: Sequence[ScoredSample], metrics: dict[str, float],
                 reference: dict[str, Marks]) -> CleanSubset | None:
    """The samples neither arm cut or stopped at the token limit, with the task's metric, chance level and gates on
    them (None: none is left, or no reference to decide against)."""
    def unclean(s: ScoredSample) -> bool:
        marks = [_run(s) or {}, reference.get(s.sample_id) or {}]
        return any(m.get(name) for m in marks for name in CUT)

    kept = [s for s in scored if not unclean(s)]
    if not kept or job.reference is None:
        return None
    ids = frozenset(s.sample_id for s in kept)
    metrics = metrics if len(kept) == len(scored) else job.evaluator.aggregate(kept)
    return CleanSubset(ids, metrics[job.task.metric], job.evaluator.chance_level([s for s in samples if s.id in ids]),
                       (*job.evaluator.extra_gates(metrics, job.reference), *job.gates))


def allowance(job: Job, name: str) -> float:
    """The largest excess rate of ``name``, either way, among the reference's A/A replicates (0: none measured)."""
    reps = replicates_of(job.reference) if job.reference is not None else []
    return max((abs(more - fewer) / r.n for r in reps if r.indicators and name in r.indicators and r.n
                for more, fewer in [r.indicators[name]]), default=0.0)


def replicate_counts(a: Sequence[ScoredSample], b: Sequence[ScoredSample]) -> dict[str, tuple[int, int]] | None:
    """Per tested indicator, the samples ``b`` flags and ``a`` does not, and the reverse (paired by position, as the
    A/A replicate pairs them); None when the samples carry no indicators."""
    marks = [(_run(x), _run(y)) for x, y in zip(a, b)]
    known = [(x, y) for x, y in marks if x is not None and y is not None]
    if not known:
        return None
    return {name: discordant([(bool(x[name]), bool(y[name])) for x, y in known
                              if x.get(name) is not None and y.get(name) is not None]) for name in TESTED}
