"""Step 6b: the truncation- and error-aware verdict (``stats.indicators``, ``stats.max_failed_share``).

Before the decision, the samples the backend failed on (an error instead of an answer) in either arm are left out
of both, up to ``stats.max_failed_share`` of the samples; above it the verdict is INCONCLUSIVE. After it, each
indicator a sample carries (:mod:`runner.contract.indicators`: the prompt cut, the token limit reached, the answer
unparsed) is tested paired against the reference's rows; a run that shows one significantly more often compares
truncations, not models: INCONCLUSIVE with the reason and the counts, and the verdict on the samples neither arm
cut or stopped at the limit is shown beside it. Where the reference's A/A replicate counted the indicators, the run's
excess is tested beyond the largest excess the replicate shows. A reference recorded without indicators leaves its
arm unknown: the run's counts are shown and nothing is tested.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from runner.contract.errors import EndpointError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.indicators import FAILED, HIT_LIMIT, INDICATORS, INPUT_CUT, UNPARSED, read
from runner.job.decide import decision_at
from runner.job.state import Job
from runner.references.noise import replicates_of
from runner.references.samples import RunProvenance, pairing_problem
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.indicators import CleanVerdict, Failures, IndicatorCheck
from runner.stats.decision import Decision
from runner.stats.numerics.indicators import discordant, paired_indicator

TESTED = (INPUT_CUT, HIT_LIMIT, UNPARSED)
"""The indicators tested paired (a failure is left out of both arms instead, up to its cap)."""
CUT = (INPUT_CUT, HIT_LIMIT)
"""What makes a pair unclean for the verdict shown beside an INCONCLUSIVE one (with a failure, already left out)."""


def _run(scored: ScoredSample) -> dict[str, bool | None] | None:
    return read(scored.meta.get(INDICATORS))


def _reference(job: Job, sample_id: str) -> dict[str, bool | None] | None:
    row = (job.reference_rows or {}).get(sample_id)
    return None if row is None or row.indicators is None else dict(row.indicators)


def exclude_failures(job: Job, samples: Sequence[Sample], scored: Sequence[ScoredSample]
                     ) -> tuple[list[Sample], list[ScoredSample], Failures | None]:
    """The samples and scores left once the backend's failures in either arm are taken out, and their count (None:
    no failure). Failing on every sample is an error: there is nothing to judge."""
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
    job.notes.append(failures.describe())
    return ([s for s in samples if s.id not in out], [s for s in scored if s.sample_id not in out], failures)


def check(job: Job, decision: Decision, samples: Sequence[Sample], scored: Sequence[ScoredSample],
          params: HypothesisParams, failures: Failures | None) -> IndicatorCheck | None:
    """The indicators' check, set on ``decision`` (its verdict INCONCLUSIVE where it blocks) and its reasons in the
    job's notes; None where there is nothing to check (a task without generated text, ``stats.indicators=off``
    without failures)."""
    mode = job.config.stats.indicators
    known = [s for s in scored if _run(s) is not None]
    if (mode == "off" or not known) and failures is None:
        return None
    counts = {name: sum(1 for s in known if (_run(s) or {}).get(name)) for name in TESTED}
    pairs = [(ref, run) for s in known
             for ref, run in [(_reference(job, s.sample_id), _run(s))] if ref is not None and run is not None]
    if pairs and pairing_problem((job.reference.recorded or {}) if job.reference is not None else {},
                                 job.reference_rows or {}, scored,
                                 RunProvenance(job.config.seed, job.evaluator.source_used)) is not None:
        pairs = []  # not the same questions (another seed, source or prompt): the reference's arm is unknown
    found = IndicatorCheck(mode, [], counts, len(known), bool(pairs), failures)
    if mode != "off" and pairs:
        for name in TESTED:
            both = [(bool(ref[name]), bool(run[name])) for ref, run in pairs
                    if ref.get(name) is not None and run.get(name) is not None]
            if both:
                found.tests.append(paired_indicator(name, both, decision.alpha, allowance(job, name)))
        found.clean = clean_verdict(job, samples, scored, params) if found.more_often else None
    decision.indicators = found
    job.notes.extend(found.reasons())
    return found


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


def clean_verdict(job: Job, samples: Sequence[Sample], scored: Sequence[ScoredSample],
                  params: HypothesisParams) -> CleanVerdict | None:
    """The verdict on the samples neither arm cut or stopped at the token limit (None: none is left)."""
    def unclean(s: ScoredSample) -> bool:
        marks = [_run(s) or {}, _reference(job, s.sample_id) or {}]
        return any(m.get(name) for m in marks for name in CUT)

    kept = [s for s in scored if not unclean(s)]
    if not kept or job.reference is None:
        return None
    ids = {s.sample_id for s in kept}
    d = decision_at(job, job.reference, [s for s in samples if s.id in ids], kept, job.evaluator.aggregate(kept),
                    replace(params, num_samples=len(kept)))
    return CleanVerdict(len(kept), d.outcome, d.verdict_line())
