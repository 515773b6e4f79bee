"""The hf backend's greedy decode loop, bare: a batch's prefill through ``runner.backends.hf.forward`` and then one
greedy step at a time, for the preallocated-cache parity test and ``benchmarks/decode_step.py``."""

from __future__ import annotations

from typing import Any, Iterator


def greedy_steps(model: Any, rows: list[list[int]], prefix: int, shared: Any, capacity: int,
                 steps: int) -> Iterator[Any]:
    """The last-position logits after the prefill, then after each of ``steps`` greedy decode steps (CPU;
    ``capacity`` 0: transformers' concatenating cache). The mask is made once and viewed, as the backend does."""
    import torch

    from runner.backends.hf import forward

    logits, cache, mask, position = forward.prefill(model, torch.device("cpu"), 0, rows, 1, prefix, shared, capacity)
    filled = mask.shape[1]
    mask = torch.cat([mask, mask.new_ones((len(rows), steps))], dim=1)
    yield logits
    for step in range(steps):
        out = model(input_ids=logits[:, -1].argmax(-1)[:, None], attention_mask=mask[:, :filled + step + 1],
                    position_ids=position[:, None], cache=cache, use_cache=True, logits_to_keep=1)
        logits, position = out.logits, position + 1
        yield logits
