"""Choosing each generated token and knowing when to stop: greedy argmax, or temperature, top-k and
top-p sampling with one seeded generator per row (so a row's output does not depend on its batch)."""

from __future__ import annotations

from typing import Any

from runner.contract.requests import GenerationRequest


def pick(logits: Any, params: GenerationRequest, generators: list[Any] | None) -> Any:
    """The next token of each row: the argmax without generators, else a draw from the row's generator."""
    import torch

    if generators is None:
        return logits.argmax(-1)
    scores = logits.float() / float(params.temperature)
    if params.top_k:
        kth = torch.topk(scores, min(params.top_k, scores.shape[-1]), dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if params.top_p is not None and params.top_p < 1.0:
        sorted_probs, sorted_idx = probs.sort(dim=-1, descending=True)
        drop = sorted_probs.cumsum(-1) - sorted_probs > params.top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, sorted_idx, sorted_probs)
    picks = [torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(generators)]
    return torch.cat(picks)


def as_list(value: Any) -> list[int]:
    """Token ids given as one id, a list of them or None (as ``eos_token_id`` may be)."""
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def hits_stop(text: str, stops: tuple[str, ...]) -> bool:
    """Whether the text decoded so far contains a stop string."""
    return any(s in text for s in stops)
