"""The forward calls of the runner's 0-shot log-likelihood plan against the floor's, one by one, in CPU time.

floor_profile.py found the runner's pass 99% forward calls yet slower than the floor's for fewer token positions.
This script says which calls: one model load, the same MMLU rows (the runner's distinct inputs), and per forward
call its kind (a shared head, a batch of a prefix group, a batch sharing nothing), rows, padded width, shared
prefix and CPU seconds (``time.process_time``). Sides, alternating by round: the floor's loop at ``--budget``, and the
``hf`` backend's planner under each ``--shapes`` (rows x tokens) with shared prefixes on and off. Whole passes
vary by 10-20% on a shared host; ``--paired`` instead runs each batch the plan puts over a shared prefix both ways,
alternating, and keeps each side's minimum. Totals per side and per kind, then seconds per thousand token
positions by padded width. ``--grid`` instead times one forward call per batch shape (rows x width, of the rows'
own first tokens, no padding), the minimum of ``--grid`` repeats each, and fits seconds = a + b x positions
(least squares): a / b is what one call costs in token positions, the planner's ``batch_call_cost_tokens``.
Nothing asserts on timings.

    OMP_NUM_THREADS=1 python benchmarks/floor_calls.py --num-samples 456 --shapes 16x4096 --rounds 2
    OMP_NUM_THREADS=1 python benchmarks/floor_calls.py --num-samples 456 --shapes 16x4096 --paired 3
    OMP_NUM_THREADS=1 python benchmarks/floor_calls.py --grid 3 --widths 64,128,256 --grid-rows 1,2,4,8,16,32
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import forward_floor as ff  # noqa: E402  (the floor's batches)
import mmlu_throughput as mt  # noqa: E402  (the questions, the evaluator)

Call = tuple[str, int, int, int, float]  # kind, rows, padded width (tail), prefix, CPU seconds


def floor_calls(model: Any, rows: list[list[int]], budget: int, pad: int) -> list[Call]:
    """The floor's loop on ``rows``: each call timed."""
    import torch

    out: list[Call] = []
    with torch.inference_mode():
        for batch in ff.floor_batches([len(r) for r in rows], budget):
            width = max(len(rows[i]) for i in batch)
            ids = torch.tensor([[pad] * (width - len(rows[i])) + rows[i] for i in batch])
            mask = torch.tensor([[0] * (width - len(rows[i])) + [1] * len(rows[i]) for i in batch])
            began = time.process_time()
            model(input_ids=ids, attention_mask=mask, logits_to_keep=1)
            out.append(("plain", len(batch), width, 0, time.process_time() - began))
    return out


def runner_calls(model: Any, rows: list[list[int]], pad: int, shape: tuple[int, int], share: bool) -> list[Call]:
    """The runner's plan of ``rows`` under ``shape`` (rows, tokens) and the CPU defaults' call cost, run through
    its own prefix and prefill functions, each call timed."""
    import torch

    from runner.backends.hf import batching, forward

    limits = batching.Limits(max_rows=shape[0], max_tokens=shape[1], call_cost_tokens=64, share_prefix=share)
    out: list[Call] = []
    device = torch.device("cpu")
    with torch.inference_mode():
        for group in batching.plan(rows, list(range(len(rows))), [1] * len(rows), limits):
            shared = None
            if group.prefix:
                began = time.process_time()
                shared = forward.run_prefix(model, device, rows[group.batches[0][0]][:group.prefix])
                out.append(("head", 1, group.prefix, 0, time.process_time() - began))
            for batch in group.batches:
                width = max(len(rows[k]) for k in batch) - group.prefix
                began = time.process_time()
                forward.prefill(model, device, pad, [rows[k] for k in batch], 1, group.prefix, shared)
                out.append(("grouped" if group.prefix else "plain", len(batch), width, group.prefix,
                            time.process_time() - began))
    return out


def paired_batches(model: Any, rows: list[list[int]], pad: int, shape: tuple[int, int], repeats: int) -> None:
    """Each batch the runner's plan runs over a shared prefix, run ``repeats`` times over its prefix and as plain whole rows, alternating; the minimum CPU seconds of each, printed
    per batch with the ratio. Whole passes vary by 10-20% on a shared host; the minimum of one call's repeats less."""
    import torch

    from runner.backends.hf import batching, forward

    limits = batching.Limits(max_rows=shape[0], max_tokens=shape[1], call_cost_tokens=64)
    device = torch.device("cpu")
    print("prefix  rows  tail width  shared min s  plain min s  shared / plain")
    sums = [0.0, 0.0]
    with torch.inference_mode():
        for group in batching.plan(rows, list(range(len(rows))), [1] * len(rows), limits):
            if not group.prefix:
                continue
            shared = forward.run_prefix(model, device, rows[group.batches[0][0]][:group.prefix])
            for batch in group.batches:
                mine = [rows[k] for k in batch]
                times: list[list[float]] = [[], []]
                for _ in range(repeats):
                    for side, prefix in enumerate((group.prefix, 0)):
                        began = time.process_time()
                        forward.prefill(model, device, pad, mine, 1, prefix, shared if prefix else None)
                        times[side].append(time.process_time() - began)
                a, b = min(times[0]), min(times[1])
                sums[0] += a
                sums[1] += b
                print(f"{group.prefix:>6}  {len(batch):>4}  {max(map(len, mine)) - group.prefix:>10}  {a:>12.3f}  "
                      f"{b:>11.3f}  {a / b:>14.2f}", flush=True)
    print(f"all: shared {sums[0]:.2f} s, plain {sums[1]:.2f} s, ratio {sums[0] / sums[1]:.3f}")


def shape_grid(model: Any, rows: list[list[int]], widths: list[int], counts: list[int], repeats: int,
               max_positions: int) -> list[tuple[int, int, float]]:
    """(rows, width, minimum CPU seconds of ``repeats`` calls) for every rows x width within ``max_positions`` that
    the rows can fill: the first ``width`` tokens of the first rows at least that long, in alternating order from one
    repeat to the next."""
    import torch

    shapes = [(n, w) for w in widths for n in counts
              if n * w <= max_positions and sum(len(row) >= w for row in rows) >= n]
    best: dict[tuple[int, int], float] = {}
    with torch.inference_mode():
        for r in range(repeats):
            for n, w in (shapes if r % 2 == 0 else shapes[::-1]):
                batch = torch.tensor([row[:w] for row in rows if len(row) >= w][:n])
                began = time.process_time()
                model(input_ids=batch, logits_to_keep=1)
                spent = time.process_time() - began
                best[n, w] = min(best.get((n, w), spent), spent)
    return [(n, w, best[n, w]) for n, w in shapes]


def call_cost(grid: list[tuple[int, int, float]]) -> tuple[float, float]:
    """Least squares of seconds = a + b x positions over the grid: (a, b)."""
    import numpy as np

    positions = np.array([n * w for n, w, _ in grid], dtype=float)
    (b, a), *_ = np.linalg.lstsq(np.stack([positions, np.ones_like(positions)], axis=1),
                                 np.array([t for *_, t in grid]), rcond=None)
    return float(a), float(b)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", type=int, default=456)
    parser.add_argument("--shots", type=int, default=0)
    parser.add_argument("--budget", type=int, default=2048, help="the floor's token budget")
    parser.add_argument("--shapes", default="16x4096,64x16384", help="the runner's rows x tokens")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--paired", type=int, default=0,
                        help="instead: each batch over a shared prefix against the same rows plain, this many times")
    parser.add_argument("--grid", type=int, default=0, help="instead: every --grid-rows x --widths call, this many "
                                                             "times; the fitted cost of a call in positions")
    parser.add_argument("--widths", default="64,128,256")
    parser.add_argument("--grid-rows", default="1,2,4,8,16,32")
    parser.add_argument("--max-positions", type=int, default=4096, help="--grid: the widest call, rows x width")
    args = parser.parse_args(argv)

    import torch

    questions = Path(tempfile.mkdtemp(prefix="floor_calls_")) / "questions.jsonl"
    mt.write_questions(questions, args.num_samples, args.shots, args.seed)
    model, tokenizer = ff.load_floor_model("bfloat16")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    rows = [tokenizer(r["prompt"], add_special_tokens=False).input_ids for r in mt.read_questions(questions)]
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    if args.grid:
        print(f"{len(rows)} questions' rows, bfloat16, {torch.get_num_threads()} threads, {mt.cpu_model()}; "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {os.getloadavg()[0]:.1f}")
        grid = shape_grid(model, rows, [int(w) for w in args.widths.split(",")],
                          [int(n) for n in args.grid_rows.split(",")], args.grid, args.max_positions)
        a, b = call_cost(grid)
        print("rows  width  positions  min CPU s  s per 1k positions  fit")
        for n, w, t in grid:
            print(f"{n:>4}  {w:>5}  {n * w:>9}  {t:>9.3f}  {1000 * t / (n * w):>18.3f}  {a + b * n * w:.3f}")
        print(f"seconds = {a:.4f} + {1000 * b:.4f} x thousand positions: a call costs {a / b:.0f} positions; "
              f"load {os.getloadavg()[0]:.1f}")
        return 0
    if args.paired:
        print(f"{len(rows)} questions, bfloat16, {torch.get_num_threads()} threads, {mt.cpu_model()}; "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {os.getloadavg()[0]:.1f}")
        paired_batches(model, rows, pad, shapes[0], args.paired)
        print(f"load {os.getloadavg()[0]:.1f}")
        return 0
    sides: dict[str, Any] = {f"floor {args.budget}": lambda: floor_calls(model, rows, args.budget, pad)}
    for r, t in shapes:
        for share in (True, False):
            sides[f"runner {r}x{t} {'shared' if share else 'unshared'}"] = \
                (lambda r=r, t=t, share=share: runner_calls(model, rows, pad, (r, t), share))
    calls: dict[str, list[list[Call]]] = defaultdict(list)
    load = [os.getloadavg()[0]]
    for i in range(args.rounds):
        for side in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
            calls[side].append(sides[side]())
            load.append(os.getloadavg()[0])
            print(f"round {i + 1} {side}: {sum(c[-1] for c in calls[side][-1]):.2f} CPU s, load {load[-1]:.1f}",
                  file=sys.stderr, flush=True)
    print(f"\n{len(rows)} questions, {args.shots}-shot, bfloat16, {torch.get_num_threads()} threads, "
          f"{mt.cpu_model()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"load {min(load):.1f}-{max(load):.1f}")
    buckets = (0, 128, 256, 512, 100000)
    for side, passes in calls.items():
        best = min(passes, key=lambda p: sum(c[-1] for c in p))
        total = sum(c[-1] for c in best)
        kinds = defaultdict(lambda: [0, 0, 0.0])
        for kind, n, width, prefix, sec in best:
            kinds[kind][0] += 1
            kinds[kind][1] += n * width
            kinds[kind][2] += sec
        print(f"{side}: {total:.2f} CPU s (best of {len(passes)}); " + "; ".join(
            f"{k} {c} calls, {tok} positions, {sec:.2f} s" for k, (c, tok, sec) in kinds.items()))
        for lo, hi in zip(buckets, buckets[1:]):
            sel = [c for c in best if lo <= c[2] < hi]
            if sel:
                tok = sum(n * w for _, n, w, _, _ in sel)
                sec = sum(c[-1] for c in sel)
                print(f"    width {lo}-{hi}: {len(sel)} calls, rows {min(c[1] for c in sel)}-"
                      f"{max(c[1] for c in sel)}, {tok} positions, {sec:.2f} s, {1000 * sec / tok:.3f} s/1k")
    return 0


if __name__ == "__main__":
    sys.exit(main())
