"""CPU time of the runner's log-likelihood call against the plain forward loop, in one process, and where it goes.

Wall time on a shared host varies more from run to run than the gap between the runner and the floor
(forward_floor.py's two timings of one floor budget differed by 3 s in 9). This script takes the load out of
the comparison as far as one process can: one model load shared by both sides, the same questions, passes
alternating (floor, runner, runner, floor, ...), each pass's CPU time of this process (``time.process_time``:
time on a core, not time waiting for one), and the minimum and median per side. The runner's pass is the
``hf`` backend's ``loglikelihood`` on the MMLU requests, as a job sends them (tokenization, planning, the batch
search on its first call, scoring); the floor's is forward_floor.py's loop at each of ``--budgets``. Then one
runner pass under cProfile, split into phases: the model's forward calls, tokenization, planning, scoring and
the rest (the profiler's own cost included). Nothing asserts on timings.

``--pairs N`` measures the ratio itself, pair by pair: N pairs of one floor pass (the first of ``--budgets``) and one
runner pass, in alternating order (floor first, then runner first, ...), each runner pass a fresh job (a new backend
on the loaded model, nothing remembered: its batch search included, as a job's only call has it). Each pass records
both clocks, CPU (``time.process_time``) and wall (``time.perf_counter``); the report gives every pair's runner /
floor ratio, their median and range, and the sign test's interval for the median ratio (at least 90%; scipy's
``quantile_test``). A pair's two passes run back to back, so a change in the host's load hits both far more than it
hits two passes minutes apart. One thread (``OMP_NUM_THREADS=1``) for CPU time, the host's threads for wall time.

    python benchmarks/floor_profile.py --num-samples 456 --rounds 3          # 0-shot, bf16, torch's threads
    OMP_NUM_THREADS=1 python benchmarks/floor_profile.py --num-samples 114 --rounds 4 --budgets 1024,2048
    OMP_NUM_THREADS=1 python benchmarks/floor_profile.py --num-samples 456 --pairs 5 --budgets 2048
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import forward_floor as ff  # noqa: E402  (the floor's loop)
import mmlu_throughput as mt  # noqa: E402  (the questions, the evaluator)

# the runner's phases: (file, function) whose cumulative time is the phase's; the rest of the call is "other"
PHASES = (("forward calls", (("hf/forward.py", "prefill"), ("hf/forward.py", "run_prefix"))),
          ("tokenization", (("backends/rolling.py", "of"),)),
          ("planning", (("hf/batching.py", "plan"),)),
          ("scoring", (("hf/scoring.py", "batch_scores"), ("hf/scoring.py", "row_scores"))),
          ("log-softmax", (("~", "<built-in method torch.log_softmax>"),)))


def phases(profile: cProfile.Profile) -> dict[str, float]:
    """Cumulative seconds per phase of the profiled runner call, and the rest of the call as "other"."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = max(cum for _, _, _, cum, _ in stats.values())
    out = {name: sum(cum for (path, _, func), (_, _, _, cum, _) in stats.items()
                     if any(path.endswith(f) and func == fn for f, fn in marks)) for name, marks in PHASES}
    out["other"] = total - sum(out.values())
    return out


def clocks(run: Callable[[], Any]) -> tuple[float, float]:
    """CPU seconds of this process and wall seconds that ``run()`` took."""
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    return time.process_time() - cpu, time.perf_counter() - wall


def pairs(floor: Callable[[], Any], runner: Callable[[], str], count: int) -> list[dict[str, Any]]:
    """``count`` pairs of a floor pass and a runner pass, alternating which goes first; each pass's CPU and wall
    seconds, the runner's batch search, and the load average after the pair."""
    out = []
    for i in range(count):
        pair: dict[str, Any] = {"order": "floor, runner" if i % 2 == 0 else "runner, floor"}
        for side in pair["order"].split(", "):
            if side == "floor":
                pair["floor_cpu_s"], pair["floor_wall_s"] = clocks(floor)
            else:
                search: list[str] = []
                pair["runner_cpu_s"], pair["runner_wall_s"] = clocks(lambda: search.append(runner()))
                pair["search"] = search[0]
        pair["load"] = os.getloadavg()[0]
        out.append(pair)
        print(f"pair {i + 1} ({pair['order']}): CPU s floor {pair['floor_cpu_s']:.2f}, runner "
              f"{pair['runner_cpu_s']:.2f} ({pair['runner_cpu_s'] / pair['floor_cpu_s']:.3f}); wall s floor "
              f"{pair['floor_wall_s']:.2f}, runner {pair['runner_wall_s']:.2f} "
              f"({pair['runner_wall_s'] / pair['floor_wall_s']:.3f}); load {pair['load']:.1f}; "
              f"shape {pair['search']}", file=sys.stderr, flush=True)
    return out


def backend_setting(text: str) -> tuple[str, Any]:
    """``--backend KEY=VALUE``: one ``HFBackendConfig`` field for the runner's side (an int, true/false, null)."""
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r}: give KEY=VALUE, e.g. batch_size=32")
    words = {"true": True, "false": False, "null": None}
    return key, words[value.lower()] if value.lower() in words else int(value) if value.isdigit() else value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", type=int, default=456)
    parser.add_argument("--shots", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--budgets", default="1024,2048", help="the floor's token budgets (--pairs: the first)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating passes per side")
    parser.add_argument("--pairs", type=int, default=0, help="instead: this many runner / floor pairs, each runner "
                                                             "pass a fresh job; per-pair ratios in CPU and wall time")
    parser.add_argument("--backend", type=backend_setting, action="append", default=[],
                        help="KEY=VALUE: an hf backend setting for the runner's side (repeatable)")
    parser.add_argument("--json", type=Path, help="--pairs: every pass's clocks, as JSON")
    args = parser.parse_args(argv)

    import torch

    from runner.backends.hf import shape_search
    from runner.backends.hf.backend import HFBackend, HFBackendConfig
    from runner.contract.backend import ChatFormat, TaskLimits
    from runner.contract.evaluator import Sample
    from runner.contract.task_config import ModelConfig, QuantConfig

    questions = Path(tempfile.mkdtemp(prefix="floor_profile_")) / "questions.jsonl"
    mt.write_questions(questions, args.num_samples, args.shots, args.seed)
    rows = mt.read_questions(questions)
    evaluator = mt.mmlu_evaluator(len(rows), args.shots, "loglikelihood")
    requests = [r for row in rows for r in evaluator.requests(Sample(row["id"], row["prompt"], row["target"],
                                                                       {"subject": row["subject"]}))]
    model_config = ModelConfig(name="smollm2_135m", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
                               embedded="smollm2_135m_gguf")
    threads = torch.get_num_threads()  # OMP_NUM_THREADS, else the cores: both sides the same
    config = HFBackendConfig(dtype=args.dtype, device="cpu", num_threads=threads)
    for key, value in args.backend:
        setattr(config, key, value)

    def job() -> HFBackend:
        return HFBackend(config, model_config, QuantConfig(name="none"), TaskLimits(4094, 2), chat=ChatFormat(),
                         progress=False)

    budgets = [int(b) for b in args.budgets.split(",")]
    host = (f"{len(rows)} questions, {args.shots}-shot, {args.dtype}, {threads} threads, {mt.cpu_model()}, "
            f"{len(os.sched_getaffinity(0))} cores")
    if args.pairs:
        with job() as first:  # the model loaded once; every later job of this process reuses it
            model, tokenizer = first.loaded

        def runner() -> str:
            shape_search.forget()
            with job() as fresh:
                fresh.loglikelihood(requests)
                return fresh.info().details.get("batch_search", "no search: " + fresh.info().details["batch_budget"])

        load = os.getloadavg()[0]
        began = time.strftime("%H:%M", time.gmtime())
        done = pairs(lambda: ff.floor_pass(model, tokenizer, rows, budgets[0]), runner, args.pairs)
        loads = ", ".join(f"{pair['load']:.1f}" for pair in done)
        print(f"\n{host}; floor at {budgets[0]} tokens; runner settings {dict(args.backend) or 'the defaults'}; "
              f"{time.strftime('%Y-%m-%d', time.gmtime())} {began}-{time.strftime('%H:%M UTC', time.gmtime())}; "
              f"load {load:.1f} before, {loads} after each pair")
        for clock in ("cpu", "wall"):
            summary = ff.ratios([p[f"runner_{clock}_s"] for p in done], [p[f"floor_{clock}_s"] for p in done])
            print(f"runner / floor, {clock} time: {summary.describe(0.9)}")
        if args.json:
            args.json.write_text(json.dumps({"host": host, "floor_budget": budgets[0], "pairs": done}, indent=2))
        return 0
    with job() as backend:
        model, tokenizer = backend.loaded
        sides: dict[str, Callable[[], Any]] = {f"floor {b}": (lambda b=b: ff.floor_pass(model, tokenizer, rows, b))
                                               for b in budgets}
        sides["runner"] = lambda: backend.loglikelihood(requests)
        times: dict[str, list[float]] = {side: [] for side in sides}
        load = [os.getloadavg()[0]]
        for i in range(args.rounds):
            for side in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
                times[side].append(clocks(sides[side])[0])
            load.append(os.getloadavg()[0])
            print(f"round {i + 1}: " + ", ".join(f"{s} {t[-1]:.2f}" for s, t in times.items()) +
                  f" CPU s; load {load[-1]:.1f}", file=sys.stderr, flush=True)
        profile = cProfile.Profile()
        profile.enable()
        backend.loglikelihood(requests)
        profile.disable()
        search = backend.info().details.get("batch_search", "not run (too few rows, or remembered)")
    print(f"\n{host}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {min(load):.1f}-{max(load):.1f}")
    print(f"batch search (first runner pass): {search}")
    print(f"{'side':<12} {'min CPU s':>9} {'median':>7}  passes")
    for side, t in times.items():
        print(f"{side:<12} {min(t):>9.2f} {statistics.median(t):>7.2f}  {', '.join(f'{x:.2f}' for x in t)}")
    floor = min(min(times[f"floor {b}"]) for b in budgets)
    print(f"runner / best floor, minima: {min(times['runner']) / floor:.3f}")
    split = phases(profile)
    total = sum(split.values())
    print("one runner pass under cProfile, cumulative time per phase: " +
          ", ".join(f"{name} {sec:.2f} s ({100 * sec / total:.0f}%)" for name, sec in
                    sorted(split.items(), key=lambda kv: -kv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
