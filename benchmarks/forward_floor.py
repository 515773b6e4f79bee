"""The floor: a plain transformers forward loop over the MMLU prompts, beside the runner's job and lm-eval's ``hf``.

What a careful user would write by hand to score MMLU letters: each question's prompt once (its four letters
" A".." D" are single tokens read at the last position), prompts sorted by length and cut into left-padded
batches of at most ``--budgets`` padded tokens, ``logits_to_keep=1``, no prefix sharing; each budget timed and
the best kept (optionally also under ``torch.compile``). Beside it, in the same run and alternating: this
project's ``hf`` backend at its defaults (which now measure their own batch shape) and lm-evaluation-harness's
``hf`` at ``--lm-eval-batch-size``, both through benchmarks/mmlu_throughput.py's workers (the same questions,
model files, dtype and threads). Every measurement is its own subprocess; evaluation wall time, model load
excluded; the one-minute load average before and after each; each round's runner / floor ratio, their median
and the sign test's interval for it (``ratios``). Nothing asserts on timings.

    python benchmarks/forward_floor.py          # 0-shot on 456 questions, 5-shot on 114, bf16, 3 alternating rounds
    python benchmarks/forward_floor.py --num-samples 57 --shots 0 --repeats 1 --budgets 1024,4096
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import mmlu_throughput as mt  # noqa: E402  (the questions, the runner's and lm-eval's workers)

LETTERS = (" A", " B", " C", " D")


def floor_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """Indices sorted by length, cut so that rows x the longest row stays within ``budget`` tokens."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * lengths[i] <= budget:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def floor_pass(model: Any, tokenizer: Any, rows: list[dict[str, Any]], budget: int,
               forward: Any = None) -> tuple[dict[str, str], int]:
    """The plain loop over ``rows`` (tokenize, batch within ``budget`` tokens, forward, read the letters):
    each question's predicted letter, and the forward calls made. ``forward``: the model, or its compiled form."""
    import torch

    forward = forward or model
    letter_ids = [tokenizer(t, add_special_tokens=False).input_ids[-1] for t in LETTERS]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    ids = [tokenizer(r["prompt"], add_special_tokens=False).input_ids for r in rows]
    batches = floor_batches([len(x) for x in ids], budget)
    predictions: dict[str, str] = {}
    with torch.inference_mode():
        for batch in batches:
            width = max(len(ids[i]) for i in batch)
            tokens = torch.tensor([[pad] * (width - len(ids[i])) + ids[i] for i in batch])
            mask = torch.tensor([[0] * (width - len(ids[i])) + [1] * len(ids[i]) for i in batch])
            logits = forward(input_ids=tokens, attention_mask=mask, logits_to_keep=1).logits[:, -1, letter_ids]
            for i, best in zip(batch, logits.float().argmax(-1).tolist()):
                predictions[rows[i]["id"]] = "ABCD"[best]
    return predictions, len(batches)


@dataclass(frozen=True)
class Ratios:
    """Per-pair runner / floor ratios: their median, range and the sign test's interval for the median."""

    ratios: tuple[float, ...]
    median: float
    low: float
    high: float
    interval: tuple[float, float]  # nan, nan: too few pairs for the level

    def describe(self, level: float) -> str:
        low, high = self.interval
        interval = (f"{low:.3f}-{high:.3f}" if low == low and high == high  # nan: too few pairs for the level
                    else f"none ({len(self.ratios)} pairs are too few for it)")
        return (f"median {self.median:.3f}, range {self.low:.3f}-{self.high:.3f}, sign-test {level:.0%} interval "
                f"{interval} ({len(self.ratios)} pairs: {', '.join(f'{r:.3f}' for r in self.ratios)})")


def ratios(runner: list[float], floor: list[float], level: float = 0.9) -> Ratios:
    """``runner[i] / floor[i]`` summarised; the interval holds the median ratio with probability at least ``level``
    whatever the ratios' distribution (order statistics: the sign test inverted)."""
    from scipy.stats import quantile_test

    each = tuple(r / f for r, f in zip(runner, floor, strict=True))
    mid = statistics.median(each)
    ci = quantile_test(each, q=mid, p=0.5).confidence_interval(confidence_level=level)
    return Ratios(each, mid, min(each), max(each), (float(ci.low), float(ci.high)))


def load_floor_model(dtype: str) -> tuple[Any, Any]:
    """The embedded checkpoint and its tokenizer, as a user would load them."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from runner.files.assets import smollm2_checkpoint

    path = smollm2_checkpoint()
    tokenizer = AutoTokenizer.from_pretrained(path)
    return AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).eval(), tokenizer


def run_floor(questions_path: Path, dtype: str, budget: int, compiled: bool) -> dict[str, Any]:
    """The plain loop in this process: load, then tokenizing and every batch's forward timed as one."""
    import torch

    rows = mt.read_questions(questions_path)
    model, tokenizer = load_floor_model(dtype)
    forward = torch.compile(model) if compiled else model
    start = time.perf_counter()
    predictions, calls = floor_pass(model, tokenizer, rows, budget, forward)
    done = time.perf_counter()
    return {"eval_s": done - start, "predictions": predictions, "batches": calls,
            "correct": sum(predictions[r["id"]] == r["target"] for r in rows), "threads": torch.get_num_threads()}


def spawn_floor(args: argparse.Namespace, shots: int, budget: int, compiled: bool) -> dict[str, Any]:
    """One floor measurement in a fresh process (the same environment as mmlu_throughput's sides)."""
    result = Path(args.out_dir) / f"floor_{shots}shot_{budget}_{int(compiled)}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--out-dir", args.out_dir, "--shots", str(shots),
           "--dtype", args.dtype, "--budget", str(budget), "--result", str(result)] + (["--compile"] if compiled else [])
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if args.threads:
        env |= {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    before = os.getloadavg()[0]
    if subprocess.run(cmd, env=env, cwd=mt.ROOT).returncode != 0:
        raise SystemExit(f"[floor] {shots}-shot budget {budget} failed")
    out = json.loads(result.read_text()) | {"loadavg_1m": [before, os.getloadavg()[0]]}
    print(f"[floor] {shots}-shot, {budget} tokens{' compiled' if compiled else ''}: {out['eval_s']:.1f} s "
          f"({out['batches']} batches), load {before:.1f} -> {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", default="456,114",
                        help="questions per shot count, in --shots order (one number: the same for every shot count)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shots", default="0,5")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--budgets", default="1024,2048,4096,16384", help="the floor's token budgets to time")
    parser.add_argument("--compile", action="store_true", help="also time the best budget under torch.compile")
    parser.add_argument("--lm-eval-batch-size", default="4", help="lm-eval's batch size (its best on a 2-core CPU)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds of floor, runner, lm-eval")
    parser.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS for every side (0: unset)")
    parser.add_argument("--json", type=Path, help="the summary's path (default: OUT_DIR/summary.json)")
    parser.add_argument("--out-dir")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def samples_per_shot(shots: str, num_samples: str) -> dict[int, int]:
    """``--shots`` paired with ``--num-samples`` (one number for all, or one per shot count)."""
    counts = [int(n) for n in num_samples.split(",")]
    wanted = [int(s) for s in shots.split(",")]
    if len(counts) == 1:
        counts *= len(wanted)
    if len(counts) != len(wanted) or min(counts) < 1:
        raise SystemExit(f"--num-samples {num_samples}: give one positive count, or one per --shots value ({shots})")
    return dict(zip(wanted, counts))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        out = run_floor(Path(args.out_dir) / f"questions_{args.shots}shot.jsonl", args.dtype, args.budget, args.compile)
        Path(args.result).write_text(json.dumps(out))
        return 0
    args.out_dir = str(Path(args.out_dir or tempfile.mkdtemp(prefix="forward_floor_")).resolve())
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    budgets = [int(b) for b in args.budgets.split(",")]
    counts = samples_per_shot(args.shots, args.num_samples)
    summary: dict[str, Any] = {"cpu": mt.cpu_model(), "cores": len(os.sched_getaffinity(0)), "dtype": args.dtype,
                               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "shots": {}}
    for shots, wanted in counts.items():
        n = mt.write_questions(Path(args.out_dir) / f"questions_{shots}shot.jsonl", wanted, shots, args.seed)
        # the floor's best budget first (one pass over the budgets), then alternating rounds at that budget
        scan = {b: spawn_floor(args, shots, b, False)["eval_s"] for b in budgets}
        best = min(scan, key=scan.__getitem__)
        times: dict[str, list[float]] = {"floor": [], "runner": [], "lm-eval": []}
        threads: dict[str, list[int]] = {side: [] for side in times}  # each run's compute threads
        for _ in range(args.repeats):
            runs = {"floor": spawn_floor(args, shots, best, False),
                    "runner": mt.spawn(args, "runner", shots, args.dtype, "loglikelihood"),
                    "lm-eval": mt.spawn(args, "lm-eval", shots, args.dtype, args.lm_eval_batch_size)}
            for side, run in runs.items():
                times[side].append(run["eval_s"])
                threads[side].append(run["threads"])
        if args.compile:
            times["floor compiled"] = [spawn_floor(args, shots, best, True)["eval_s"] for _ in range(args.repeats)]
        medians = {side: statistics.median(t) for side, t in times.items()}
        paired = ratios(times["runner"], times["floor"])  # each round's runner against the floor beside it
        summary["shots"][str(shots)] = {"questions": n, "floor_budget_scan_s": scan, "floor_budget": best,
                                        "eval_s": times, "threads": threads, "median_s": medians,
                                        "runner_over_floor": medians["runner"] / medians["floor"],
                                        "runner_over_floor_per_round": paired.ratios,
                                        "runner_over_floor_sign_test_90": paired.interval,
                                        "lm_eval_over_runner": medians["lm-eval"] / medians["runner"]}
        print(f"\n{shots}-shot, {n} questions, {args.dtype}: median eval s: " +
              ", ".join(f"{side} {m:.1f}" for side, m in medians.items()) +
              f"; runner / floor {medians['runner'] / medians['floor']:.2f}, lm-eval / runner "
              f"{medians['lm-eval'] / medians['runner']:.2f} (floor budget {best}: {scan}; threads {threads})")
        print(f"runner / floor round by round: {paired.describe(0.9)}")
    print(f"host: {summary['cpu']}, {summary['cores']} cores; {summary['date']}")
    out = args.json or Path(args.out_dir) / "summary.json"
    out.write_text(json.dumps(summary, indent=2))
    print(f"every timing, the budget scan and the load averages: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
