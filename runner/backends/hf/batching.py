"""Batch planning for the ``hf`` backend: which token rows run together, and what prefix they share.

Two things decide CPU throughput once the model is fixed: tokens computed that nobody reads
(padding) and work repeated for every row (a task's few-shot block). The plan therefore
1. groups rows that share a long token prefix (MMLU's 5-shot block of a subject): the prefix is run
   once per group and every batch of the group attends to its KV cache, where the prefix positions it
   saves outweigh the prefix's own call (a position over a shared prefix was measured to cost no more
   than a plain one: benchmarks/floor_calls.py --paired);
2. splits each group (and the rows that share nothing) into batches by an exact dynamic program
   over the rows sorted by length, minimising padded tokens plus a fixed cost per forward call,
   within the batch-size and token budgets; a generation batch makes one call per decode step too;
3. optionally caps the KV positions a batch holds (rows x (shared prefix + longest tail + decode
   steps)): each batch materialises its own copy of the shared prefix's keys and values, which on a
   GPU, with budgets sized from its memory, is what runs out first.
Planning looks at token ids only; it is pure and deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

MIN_SHARED_PREFIX = 32  # tokens; below this a separate prefix forward is not worth its call


@dataclass(frozen=True)
class Limits:
    """Budgets of one forward call: rows, padded tokens, and the cost of a call in tokens."""

    max_rows: int
    max_tokens: int
    call_cost_tokens: int
    share_prefix: bool = True
    decode_calls: int = 0  # forward calls each batch makes after its prefill (a generation's decode steps)
    # KV positions one batch may hold, rows x (prefix + longest tail + cache_growth); None: not counted
    max_cache_tokens: int | None = None
    cache_growth: int = 0  # positions each row's KV cache grows by after the prefill (decode steps)


@dataclass
class Group:
    """Rows whose first ``prefix`` tokens are identical (0: nothing shared), in planned batches."""

    prefix: int
    batches: list[list[int]] = field(default_factory=list)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def plan(rows: Sequence[Sequence[int]], indices: Sequence[int], keep: Sequence[int], limits: Limits) -> list[Group]:
    """Plan ``indices`` (into ``rows``) as groups of batches.

    ``keep[i]`` is how many final tokens of row ``i`` must be computed in the batch itself (their
    logits are read), so a shared prefix never reaches into them.
    """
    order = sorted(indices, key=lambda i: rows[i])  # lexicographic: rows sharing a prefix are adjacent
    runs: list[list[int]] = []
    for idx in order:
        if runs and limits.share_prefix and common_prefix(rows[runs[-1][0]], rows[idx]) >= MIN_SHARED_PREFIX:
            runs[-1].append(idx)
        else:
            runs.append([idx])
    groups: list[Group] = []
    loners: list[int] = []
    for run in runs:
        prefix = shared_prefix(rows, run, keep)
        if prefix < MIN_SHARED_PREFIX or not pays(prefix, len(run), limits):
            loners.extend(run)
            continue
        groups.append(Group(prefix, split([len(rows[i]) - prefix for i in run], run, limits, prefix)))
    if loners:
        # the rest may still share a short head (a task's fixed instruction), where that pays too
        prefix = shared_prefix(rows, loners, keep) if limits.share_prefix else 0
        if not pays(prefix, len(loners), limits):
            prefix = 0
        groups.append(Group(prefix, split([len(rows[i]) - prefix for i in loners], loners, limits, prefix)))
    return groups


def pays(prefix: int, rows: int, limits: Limits) -> bool:
    """Whether ``rows`` rows are cheaper with the ``prefix`` they share run once: the positions saved (the prefix
    for every row but one) against the prefix's own call."""
    return prefix * (rows - 1) > limits.call_cost_tokens


def shared_prefix(rows: Sequence[Sequence[int]], members: Sequence[int], keep: Sequence[int]) -> int:
    """Tokens every member starts with, short of the tokens each must compute itself."""
    if len(members) < 2:
        return 0
    first = rows[members[0]]
    return max(0, min(min(common_prefix(first, rows[i]) for i in members[1:]),
                      min(len(rows[i]) - keep[i] for i in members)))


def split(lengths: Sequence[int], items: Sequence[int], limits: Limits, prefix: int = 0) -> list[list[int]]:
    """Cut ``items`` (with token ``lengths`` after a shared ``prefix``) into batches of least
    padded-plus-call cost.

    Sorted by length, an optimal batching takes consecutive runs (a batch costs its row count
    times its longest row); the dynamic program finds the best cut points exactly.
    """
    pairs = sorted(zip(lengths, items))
    n = len(pairs)
    call = limits.call_cost_tokens * (1 + limits.decode_calls)
    best = [0] * (n + 1)
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        width = pairs[j - 1][0]
        best[j], cut[j] = best[j - 1] + call + width, j - 1
        for i in range(j - 2, max(-1, j - 1 - limits.max_rows), -1):  # batch = pairs[i:j]
            if (j - i) * width > limits.max_tokens or (
                    limits.max_cache_tokens is not None
                    and (j - i) * (prefix + width + limits.cache_growth) > limits.max_cache_tokens):
                break
            cost = best[i] + call + (j - i) * width
            if cost < best[j]:
                best[j], cut[j] = cost, i
    batches: list[list[int]] = []
    j = n
    while j > 0:
        batches.append([item for _, item in pairs[cut[j]:j]])
        j = cut[j]
    batches.reverse()
    return batches
