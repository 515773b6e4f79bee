"""Step 6: the job's one decision against its reference (at every look of a sequential run, then at
the end), and, when it is INCONCLUSIVE, how many more samples would decide."""

from __future__ import annotations

from dataclasses import replace

from runner.contract.evaluator import Sample, ScoredSample
from runner.job.state import Job
from runner.references.samples import RunProvenance, pairing_problem
from runner.references.acceptance import entry as acceptance_entry
from runner.references.store import Reference
from runner.stats.acceptance import AcceptanceGate
from runner.stats import advising
from runner.stats.conclusion import Monitor, concluded
from runner.stats.decision import Decision
from runner.stats.dispatch import decide_against
from runner.stats.rules.extension import ExtensionResult
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.indicators import IndicatorData


def decide(job: Job, reference: Reference | None, samples: list[Sample], scored: list[ScoredSample],
           metrics: dict[str, float], params: HypothesisParams, monitor: Monitor | None = None,
           indicators: IndicatorData | None = None) -> Decision | None:
    """The decision of the whole run (None without a reference); a monitor's result decides a sequential run;
    ``indicators``: what the truncation- and error-aware check reads (:mod:`runner.job.indicators`)."""
    if reference is None:
        return None
    decision = concluded(decision_at(job, reference, samples, scored, metrics, params, indicators), monitor, params)
    seq = decision.sequential
    if isinstance(seq, ExtensionResult) and seq.reason == "undecided" and seq.extensions_left:
        job.notes.append(f"{seq.extensions_left} of {seq.planned} planned extension(s) left: "
                         f"python -m runner.extend {job.out_dir} adds the next look (as many samples "
                         f"as the first: {seq.looks[0].n})")
    job.notes.extend(decision.notes)
    return decision


def decision_at(job: Job, reference: Reference, samples: list[Sample], scored: list[ScoredSample],
                metrics: dict[str, float], params: HypothesisParams,
                indicators: IndicatorData | None = None) -> Decision:
    """The decision on ``scored`` alone (one look); the reference's per-sample scores pair where they can, and the
    reference's measured noise (``job.noise``) and the indicators enter as the rules say."""
    ev, rows = job.evaluator, job.reference_rows
    problem = None
    if rows is not None:
        problem = pairing_problem(reference.recorded or {}, rows, scored,
                                  RunProvenance(job.config.seed, ev.source_used))
    return decide_against(reference, scored, metrics[job.task.metric], params, job.config.stats,
                          ev.chance_level(samples), job.task.metric, rows, problem,
                          [*ev.extra_gates(metrics, reference), *job.gates], job.tolerance,
                          cluster_key=job.task.cluster_key, corpus=ev.corpus_metric(),
                          score_bounds=ev.score_bounds(), noise=job.noise, indicators=indicators)


def acceptance_gates(job: Job) -> list[AcceptanceGate]:
    """The acceptance-length gate of a speculative-decoding run (``backend.acceptance_key``), judged after every
    request was answered; without a key the observed length is only logged."""
    value = job.backend.acceptance_length()
    key = job.backend.acceptance_key
    if value is not None:
        job.tracker.log_metrics({"acceptance_length": value})
    if not key or job.mode != "check":
        if value is not None:
            job.notes.append(f"speculative decoding: mean acceptance length {value:.3f} (not gated: set "
                             "backend.acceptance_key to an entry of references/acceptance_length.yaml)")
        return []
    ref_al, min_al = acceptance_entry(job.ref_dir, key)
    gate = AcceptanceGate(key, value, ref_al, min_al)
    if not gate.checked:
        job.notes.append(f"acceptance-length gate {key}: not checked (no speculative-decoding step was observed)")
    return [gate]


def advise(job: Job, decision: Decision) -> None:
    """How many more samples would decide; the backend is still open, so the task can say whether it has them."""
    if decision.within_noise:
        return  # more samples cannot move a systematic shift
    recorded = (job.reference.recorded or {}) if job.reference is not None else {}
    first_look = decision.sequential.looks[0].n if isinstance(decision.sequential, ExtensionResult) else None
    found = advising.for_decision(decision, recorded.get("num_samples") or first_look)
    if found is not None and found.n_total is not None:
        have = len(job.evaluator.samples(found.n_total, job.config.seed))
        found = replace(found, available=have if have < found.n_total else None)
    decision.advice = found
