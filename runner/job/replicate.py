"""Record mode with ``reference.noise=replicate``: the same samples scored again under each perturbation the backend
declares (the hf backend: batch size 1, and the other dtype ``auto`` can choose), each compared with the recording.

The result, stored with the entry (``recorded.noise``), is the A/A floor a later run's verdict uses
(:mod:`runner.stats.numerics.noise`). Each perturbed pass builds the backend again from the job's settings with the
perturbation's replaced, so it goes through the same code (and generation cache) as a run configured that way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

from runner.contract.backend import Perturbation
from runner.contract.build import build
from runner.contract.evaluator import LOGLIKELIHOODS, TOP_TOKENS, Sample, ScoredSample
from runner.contract.fingerprint import fingerprint
from runner.job.answer import answer
from runner.job.indicators import replicate_counts
from runner.job.state import Job
from runner.reports.outputs import write_samples
from runner.stats.data.noise import Replicate
from runner.stats.numerics.noise import replicate
from runner.job.warn import warn

log = logging.getLogger("runner")


def compare(perturbation: str, a: Sequence[ScoredSample], b: Sequence[ScoredSample],
            hosts: Mapping[str, Mapping[str, str]]) -> Replicate:
    """The replicate of two scorings of the same samples, paired by sample id (``a``'s order)."""
    by_id = {s.sample_id: s for s in b}
    pairs = [(s, by_id[s.sample_id]) for s in a if s.sample_id in by_id]
    logliks = all(isinstance(x.meta.get(LOGLIKELIHOODS), list) for pair in pairs for x in pair)
    tokens = all(isinstance(x.meta.get(TOP_TOKENS), str) for pair in pairs for x in pair)
    found = replicate(perturbation, [x.score for x, _ in pairs], [y.score for _, y in pairs],
                      sum(x.prediction != y.prediction for x, y in pairs),
                      [x.meta[LOGLIKELIHOODS] for x, _ in pairs] if logliks else None,
                      [y.meta[LOGLIKELIHOODS] for _, y in pairs] if logliks else None, hosts,
                      a_tokens=[x.meta[TOP_TOKENS] for x, _ in pairs] if tokens else None,
                      b_tokens=[y.meta[TOP_TOKENS] for _, y in pairs] if tokens else None)
    return replace(found, indicators=replicate_counts([x for x, _ in pairs], [y for _, y in pairs]))


def perturbed_job(job: Job, perturbation: Perturbation) -> Job:
    """The job with its backend built again from its settings with the perturbation's replaced."""
    settings = replace(job.config.backend, **dict(perturbation.settings))
    backend = build(settings, "backend", model=job.model, quant=job.quant, limits=job.limits, chat=job.chat)
    return replace(job, config=replace(job.config, backend=settings), backend=backend, notes=[])


def measure(job: Job, perturbations: Sequence[Perturbation], samples: list[Sample],
            scored: list[ScoredSample]) -> list[Replicate]:
    """Every perturbation's replicate of ``scored`` (the recording, measured on ``job.host``), on its first
    ``reference.replicate_samples`` samples (all when None)."""
    n = job.config.reference.replicate_samples or len(scored)
    scored = scored[:n]
    out = []
    for perturbation in perturbations:
        log.info("A/A replicate: scoring the %d samples again with %s", len(scored), perturbation.name)
        other = perturbed_job(job, perturbation)
        with other.backend:
            info = other.backend.info()
            host = fingerprint(info, other.backend.host_fields())
            again, seconds, _ = answer(other, info, samples[:len(scored)])
        write_samples(job.out_dir / f"replicate-{len(out) + 1}.jsonl", again)  # the A/A pairs, for replaying
        found = compare(perturbation.name, scored, again, {"a": job.host, "b": host})
        log.info("A/A replicate %s (%.0f s)", found.describe(), seconds)
        out.append(found)
    if not perturbations:
        note = f"reference.noise=replicate: backend={job.config.backend.name} declares no perturbation; no replicate stored"
        warn(job, note)
    return out

