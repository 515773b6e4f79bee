"""A batch's log-likelihood rows read from its log-probabilities: each row's continuation tokens summed,
and whether greedy decoding would have produced them.

``row_scores`` reads each row with its own torch calls and host transfer; ``batch_scores`` reads every
row of the batch with one gather, one argmax and one transfer (per-row torch calls dominate once the
model is small or fast: MMLU's letters are four rows per question). A single-token continuation gets the
same float32 value either way; a longer one is summed in float32 in another order (a rounding apart).
"""

from __future__ import annotations

from typing import Any, Sequence

from runner.contract.requests import LoglikelihoodResult
from runner.contract import top_tokens

# (row id, batch row, first scored position, continuation tokens)
Scored = tuple[int, int, int, Sequence[int]]


def row_scores(logprobs: Any, rows: Sequence[Scored]) -> list[LoglikelihoodResult]:
    """Each row on its own: gather, sum and compare with the argmax (torch calls per row)."""
    import torch

    results = []
    for _, b, start, cont in rows:
        span = logprobs[b, start:start + len(cont)]
        target = torch.tensor(cont, device=span.device)
        picked = span.gather(-1, target[:, None]).squeeze(-1)
        greedy = bool((span.argmax(-1) == target).all())
        results.append(LoglikelihoodResult(float(picked.sum()), greedy, len(cont)))
    return results


def batch_scores(logprobs: Any, rows: Sequence[Scored]) -> list[LoglikelihoodResult]:
    """Every row at once: one gather of the scored tokens, one argmax of the batch, one host transfer."""
    import torch

    batch_idx = [b for _, b, start, cont in rows for _ in cont]
    position = [start + j for _, _, start, cont in rows for j in range(len(cont))]
    target = [t for *_, cont in rows for t in cont]
    device = logprobs.device

    def index(values: list[int]) -> Any:
        return torch.tensor(values, dtype=torch.long, device=device)

    picked = logprobs[index(batch_idx), index(position), index(target)]
    if all(len(cont) == 1 for *_, cont in rows):
        sums = picked
    else:
        owner = index([i for i, (*_, cont) in enumerate(rows) for _ in cont])
        sums = torch.zeros(len(rows), dtype=picked.dtype, device=device).index_add_(0, owner, picked)
    best = logprobs.argmax(-1).tolist()
    values = sums.tolist()
    results = []
    for (_, b, start, cont), value in zip(rows, values):
        greedy = all(best[b][start + j] == t for j, t in enumerate(cont))
        results.append(LoglikelihoodResult(value, greedy, len(cont)))
    return results


def top_records(logprobs: Any, rows: Sequence[Scored], ks: Sequence[int]) -> list[str]:
    """Each row's per-position top-``k`` record (:mod:`runner.contract.top_tokens`): at every scored position the
    k most likely next tokens and their log-probabilities, the fidelity record a request with ``top_tokens`` asks."""
    import torch

    out = []
    for (_, b, start, cont), k in zip(rows, ks):
        values, ids = torch.topk(logprobs[b, start:start + len(cont)], k, dim=-1)
        out.append(top_tokens.encode(ids.cpu().numpy(), values.float().cpu().numpy()))
    return out
