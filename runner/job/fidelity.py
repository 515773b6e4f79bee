"""A run's fidelity to its reference, where both kept the records: pick changes and option KL of a log-likelihood
task (every option's log-likelihood), top-1 agreement, token KL and NLL change of a teacher-forced one (perplexity's
per-position top-k records). Computed once here for the report and for the early look after the first chunk of
answers; a look that plans, never a verdict."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from runner.contract.evaluator import LOGLIKELIHOODS, TOP_TOKENS, ScoredSample
from runner.references.samples import SampleRow
from runner.stats.data.noise import Fidelity
from runner.stats.numerics.noise import fidelity
from runner.stats.numerics.token_fidelity import token_fidelity

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
