"""Batch shapes by measurement: the hf backend times a few (rows, token budget) shapes on the task's own rows.

The fastest shape depends on the device (matrix units, caches, GPU memory), the model and the task's
lengths: on a CPU with bfloat16 matrix tiles a plain forward loop was twice as fast at 16 rows as at 64,
the CPU default. No fixed default is right everywhere, so the first log-likelihood call of a job that has
enough rows runs chunks of them (from the middle of the length order, each as many rows as two of the
candidate's calls hold) under each candidate shape (real work: every row is answered once, whatever
shape ran it), measures the tokens delivered per second, and plans the rest under the fastest. The
choice is remembered for the process per device, model and task shape, so a sweep's later jobs skip
the trial. Shapes the user set (``backend.batch_size``, ``backend.max_batch_tokens``) are used as they
are. Answers depend on the shape only through the arithmetic's rounding (identical in float32;
tests/backends/test_shape_search.py).
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from runner.backends.hf.batching import Group

log = logging.getLogger("runner")

TRIAL_BATCHES = 2  # full batches of its own each candidate runs
MIN_ROWS_FACTOR = 1.5  # search only when the trials take at most two thirds of the rows
# and only from this many rows: a trial chunk cut from the length order splits groups sharing a prefix (a 5-shot block
# run once per chunk instead of once per group), which a small job's trials would do to a large share of its rows
MIN_SEARCH_ROWS = 360
# a CPU's candidates, token positions a call: below 1024 a call's fixed cost shows (the embedded model in bfloat16 on
# AMX: 0.56-0.57 CPU s per thousand positions at 512 against 0.48-0.50 at 2048, over rows of 32-128 tokens;
# docs/measurements.md); above 4096 a float32 MLP activation of the embedded model passes glibc's 32 MiB mmap
# threshold (its pages faulted in anew by every call)
CPU_TOKEN_BUDGETS = (1024, 2048, 4096)


@dataclass(frozen=True)
class Shape:
    """One forward call's limits: rows and padded tokens."""

    rows: int
    tokens: int

    def __str__(self) -> str:
        return f"{self.rows} rows x {self.tokens} tokens"


@dataclass(frozen=True)
class Trial:
    """A candidate's measurement: tokens of its rows (prefixes included) and the seconds they took."""

    shape: Shape
    tokens: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("inf")


def candidates(device_type: str, rows: int, tokens: int) -> tuple[Shape, ...]:
    """The shapes to time. A CPU: ``CPU_TOKEN_BUDGETS`` positions a call, up to ``rows`` rows (a call's work is its
    positions, so short rows run wide and long ones narrow, as the token budget alone would cut them; a fixed
    row cap left short rows in narrow calls). A GPU: a quarter, half and all of its memory-sized budget
    (``rows`` x ``tokens``), so every candidate fits."""
    if device_type == "cpu":
        return tuple(Shape(rows, t) for t in CPU_TOKEN_BUDGETS)
    return tuple(Shape(max(1, rows // d), max(1, tokens // d)) for d in (4, 2, 1))


def batch_rows(shape: Shape, length: int, max_rows: int) -> int:
    """Rows of ``length`` tokens one call of ``shape`` holds, within the task's ``max_rows``."""
    return max(1, min(shape.rows, max_rows, shape.tokens // max(1, length)))


def trial_sizes(candidates: Sequence[Shape], lengths: Sequence[int], max_rows: int) -> list[int] | None:
    """Rows each candidate is timed on (``TRIAL_BATCHES`` of its batches of rows of the median length), or None
    when the job has too few rows for the trial to pay."""
    median = int(statistics.median(lengths)) if lengths else 1
    sizes = [TRIAL_BATCHES * batch_rows(shape, median, max_rows) for shape in candidates]
    return sizes if len(lengths) >= max(MIN_SEARCH_ROWS, MIN_ROWS_FACTOR * sum(sizes)) else None


def fastest(trials: Sequence[Trial]) -> Trial:
    """The trial with the highest rate; on a tie the earlier (narrower) one."""
    best = trials[0]
    for trial in trials[1:]:
        if trial.rate > best.rate:
            best = trial
    return best


def searched_groups(indices: Sequence[int], lengths: Sequence[int], candidates: Sequence[Shape],
                    sizes: Sequence[int], plan: Callable[[list[int], Shape], list[Group]],
                    chosen: Callable[[Trial, list[Trial]], None], timer: Callable[[], float] = time.perf_counter,
                    sync: Callable[[], None] = lambda: None) -> Iterator[Group]:
    """The groups of ``indices``: consecutive chunks of ``sizes`` rows planned under each candidate and timed
    while the caller runs them (``sync`` waits for the device), then the rest under the fastest, reported
    to ``chosen`` before the rest is planned. ``lengths`` are the rows' token counts (the work delivered).
    The chunks are cut from the middle of the rows sorted by length, so that each candidate fills its row cap
    with rows of like lengths, as the planner will batch them, and all are timed on rows near the median."""
    order = sorted(indices, key=lengths.__getitem__)  # stable: rows of one length keep their order
    first = start = (len(order) - sum(sizes)) // 2
    trials: list[Trial] = []
    for shape, size in zip(candidates, sizes):
        chunk = order[start:start + size]
        start += size
        sync()
        began = timer()
        yield from plan(chunk, shape)
        sync()
        trials.append(Trial(shape, sum(lengths[i] for i in chunk), timer() - began))
    best = fastest(trials)
    chosen(best, trials)
    rest = order[:first] + order[start:]
    if rest:
        yield from plan(rest, best.shape)


def device_key(torch, device) -> str:
    """The device as a memo key: a GPU's name, or a CPU's model name and compute threads."""
    if device.type == "cuda":
        return f"{device}: {torch.cuda.get_device_name(device)}"
    name = "cpu"
    try:
        with open("/proc/cpuinfo") as handle:
            name = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), name)
    except OSError:
        pass
    return f"{name}, {torch.get_num_threads()} threads"


def task_shape(lengths: Sequence[int]) -> str:
    """The task's lengths as a memo key: the median row length rounded up to a power of two."""
    median = max(1, int(statistics.median(lengths))) if lengths else 1
    return f"rows of ~{1 << (median - 1).bit_length()} tokens"


_chosen: dict[tuple[str, str, str], Shape] = {}


def remembered(device: str, model: str, task: str) -> Shape | None:
    """The shape an earlier job of this process measured for this device, model and task shape."""
    return _chosen.get((device, model, task))


def remember(device: str, model: str, task: str, shape: Shape) -> None:
    _chosen[(device, model, task)] = shape


def describe(best: Trial, trials: Sequence[Trial]) -> str:
    """The measured rates, the chosen one first: for the log and the run's details."""
    rates = ", ".join(f"{t.shape.rows}x{t.shape.tokens}: {t.rate:.0f}" for t in trials)
    return f"{best.shape} (measured tokens/s: {rates})"


def forget() -> None:
    """Drop every remembered shape (the next job measures again): a benchmark's fresh job."""
    _chosen.clear()
