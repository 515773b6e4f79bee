"""Requests -> bulk backend calls -> scores: the one path every task's samples take."""

from __future__ import annotations

from typing import Any, Sequence

from runner.backends.base import GenerationRequest, LoglikelihoodRequest


def score_all(evaluator: Any, answerer: Any, samples: Sequence[Any]) -> list[Any]:
    """Collect every request, send each kind to ``answerer`` (a backend, or the cached view of one) in one
    call, then let the evaluator score the samples."""
    per_sample = [evaluator.requests(s) for s in samples]
    flat = [r for reqs in per_sample for r in reqs]
    responses: list[Any] = [None] * len(flat)
    for kind, method in ((GenerationRequest, answerer.generate), (LoglikelihoodRequest, answerer.loglikelihood)):
        idx = [i for i, r in enumerate(flat) if isinstance(r, kind)]
        if idx:
            for i, out in zip(idx, method([flat[i] for i in idx])):
                responses[i] = out
    grouped, pos = [], 0
    for reqs in per_sample:
        grouped.append(responses[pos:pos + len(reqs)])
        pos += len(reqs)
    return list(evaluator.score_batch(samples, grouped))
