"""The hf backend's forward pass over a batch of token rows, exact and with as little work as the
model allows: left-padded rows, a token prefix shared by every row run once into a KV cache that each
batch starts from, logits kept only at the positions a caller reads, and (for a generation) a cache
allocated once for every position it will hold. torch and transformers are imported inside the
functions (the backend imports them on entry).
"""

from __future__ import annotations

import copy
from typing import Any


def run_prefix(model: Any, device: Any, tokens: list[int]) -> Any:
    """The KV cache of ``tokens`` (one row), shared by every batch of its group."""
    import torch
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    head = to_device(torch.tensor([tokens]), device)
    model(input_ids=head, cache=cache, use_cache=True, logits_to_keep=1)
    return cache


def batch_cache(model: Any, prefix_cache: Any, rows: int) -> Any:
    """A cache for ``rows`` rows starting from the shared prefix.

    Plain dynamic layers get a broadcast view of the prefix: they never write into their
    tensors (each forward concatenates into new ones, the only copy made), so the prefix
    cache stays intact for the group's next batch. Other layer kinds get a repeated copy."""

    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    if all(type(layer) is DynamicLayer for layer in prefix_cache.layers):
        cache = DynamicCache(config=model.config)
        for mine, shared in zip(cache.layers, prefix_cache.layers):
            mine.lazy_initialization(shared.keys, shared.values)
            mine.keys = shared.keys.expand(rows, -1, -1, -1)
            mine.values = shared.values.expand(rows, -1, -1, -1)
        return cache
    cache = copy.deepcopy(prefix_cache)
    cache.batch_repeat_interleave(rows)
    return cache


def sync(device: Any) -> None:
    """Wait for the work queued on a GPU (a CPU's calls have finished when they return)."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def to_device(tensor: Any, device: Any) -> Any:
    """``tensor`` on ``device``; to a GPU from pinned memory without waiting, so that building the next batch's
    inputs does not wait for the batch the GPU is still computing (a pageable copy would)."""
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def prefill(model: Any, device: Any, pad_id: int, rows: list[list[int]], keep: int, prefix: int = 0,
            prefix_cache: Any = None, capacity: int = 0) -> tuple[Any, Any, Any, Any]:
    """Run ``rows`` (a batch) and return logits of the last ``keep`` positions per row.

    Rows are left-padded. With ``prefix``, their first ``prefix`` tokens (identical in every
    row) are already in ``prefix_cache`` and only the rest is run. ``capacity`` (positions a row's
    cache will hold, decode steps included; 0: grown by concatenation) preallocates the cache.
    Returns (logits[B, keep, V], cache, attention_mask[B, T], next_position[B]).
    """
    import torch
    from transformers import DynamicCache

    tails = [r[prefix:] for r in rows]
    width = max(len(t) for t in tails)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), prefix + width), dtype=torch.long)
    mask[:, :prefix] = 1
    positions = torch.zeros((len(rows), width), dtype=torch.long)
    for i, tail in enumerate(tails):
        n = len(tail)
        ids[i, width - n:] = torch.tensor(tail)
        mask[i, prefix + width - n:] = 1
        positions[i, width - n:] = torch.arange(prefix, prefix + n)
    ids, mask, positions = (to_device(t, device) for t in (ids, mask, positions))
    cache = None
    if capacity:
        from runner.backends.hf import kv_cache  # lazy: a transformers cache layer (imports torch and transformers)

        cache = kv_cache.preallocated(model, capacity, prefix_cache if prefix else None, len(rows))
    if cache is None:
        cache = batch_cache(model, prefix_cache, len(rows)) if prefix else DynamicCache(config=model.config)
    # without padding the mask is all ones: leaving it out lets attention take its causal fast path
    padded = any(len(t) < width for t in tails)
    out = model(input_ids=ids, attention_mask=mask if padded or prefix else None, position_ids=positions,
                      cache=cache, use_cache=True, logits_to_keep=keep)
    next_position = positions[:, -1] + 1
    return out.logits, cache, mask, next_position
