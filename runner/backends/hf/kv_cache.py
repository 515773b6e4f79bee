"""A generation batch's KV cache in buffers allocated once for the whole generation.

transformers' ``DynamicLayer`` concatenates every new key and value onto the cache, so each decode
step copies the batch's whole cache (the shared few-shot prefix included) in every layer: at the
embedded model's width on a CPU that copy is about a sixth of GSM8K's time. Here each layer holds
buffers sized for the prefill plus every decode step; an update writes the new positions in place
and the layer's ``keys``/``values`` are views of the filled part, so attention reads the same numbers
it would read from the concatenated tensors. Imported by :mod:`runner.backends.hf.forward` when it
needs it (this module imports torch and transformers).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class PreallocatedLayer(DynamicLayer):
    """One layer's keys and values in ``[batch, heads, capacity, head_dim]`` buffers, filled left to right.

    Writing past ``capacity`` (a longer generation than planned) moves the cache into buffers twice
    as long: still correct, one copy instead of one per step."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.length = 0
        self._key_buffer: torch.Tensor | None = None
        self._value_buffer: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self._key_buffer = _buffer(key_states, self.capacity)
        self._value_buffer = _buffer(value_states, self.capacity)
        self.length = 0
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        assert self._key_buffer is not None and self._value_buffer is not None
        end = self.length + key_states.shape[-2]
        if end > self._key_buffer.shape[-2]:
            self._key_buffer = _grown(self._key_buffer, self.length, max(end, 2 * self._key_buffer.shape[-2]))
            self._value_buffer = _grown(self._value_buffer, self.length, self._key_buffer.shape[-2])
        self._key_buffer[:, :, self.length:end] = key_states
        self._value_buffer[:, :, self.length:end] = value_states
        self.length = end
        self.keys = self._key_buffer[:, :, :end]
        self.values = self._value_buffer[:, :, :end]
        return self.keys, self.values

    def reset(self) -> None:
        self._key_buffer = self._value_buffer = None
        self.length = 0
        super().reset()

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("a preallocated generation cache is never cropped")

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise NotImplementedError("a preallocated generation cache is sized for its batch when it is made")

    # The methods below assign ``keys``/``values`` in transformers' DynamicLayer, which would leave the buffers
    # this layer writes into stale: refused, none is called by the runner's generation loop
    # (tests/backends/test_kv_cache_overrides.py checks every such method of the installed class is overridden).
    def batch_select_indices(self, indices: torch.Tensor) -> None:
        raise NotImplementedError("a preallocated generation cache keeps its batch; rows are never selected")

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise NotImplementedError("a preallocated generation cache is not used with beam search")

    def offload(self) -> None:
        raise NotImplementedError("a preallocated generation cache stays on its device")

    def prefetch(self) -> None:
        raise NotImplementedError("a preallocated generation cache stays on its device")


def _buffer(like: torch.Tensor, capacity: int) -> torch.Tensor:
    batch, heads, _, dim = like.shape
    return torch.empty((batch, heads, capacity, dim), dtype=like.dtype, device=like.device)


def _grown(buffer: torch.Tensor, filled: int, capacity: int) -> torch.Tensor:
    bigger = _buffer(buffer, capacity)
    bigger[:, :, :filled] = buffer[:, :, :filled]
    return bigger


def preallocated(model: Any, capacity: int, prefix_cache: Any = None, rows: int = 0) -> Any:
    """A cache for one batch of ``rows`` whose every layer is a :class:`PreallocatedLayer` of ``capacity`` positions,
    holding a copy of ``prefix_cache`` (one row, shared by the batch) when given; None when the model's cache or
    the prefix's is not made of plain dynamic layers (sliding windows, shared KV)."""
    cache = DynamicCache(config=model.config)
    prefix_layers = prefix_cache.layers if prefix_cache is not None else []
    if not all(type(layer) is DynamicLayer for layer in [*cache.layers, *prefix_layers]):
        return None
    cache.layers = [PreallocatedLayer(capacity) for _ in cache.layers]
    for mine, shared in zip(cache.layers, prefix_layers):
        mine.update(shared.keys.expand(rows, -1, -1, -1), shared.values.expand(rows, -1, -1, -1))
    return cache
