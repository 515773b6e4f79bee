"""The ``hf`` backend's overhead, with a model whose compute is nearly zero: requests/s and where the time goes.

A 2-layer model of the embedded SmolLM2-135M's architecture (its config with ``num_hidden_layers=2``,
seeded random weights, nothing downloaded) and the embedded tokenizer are saved to a temporary
checkpoint; each task then runs through this project's own job path: the Hydra config composed as
``python -m runner task=... model.path=<micro> backend.dtype=float32 cache=off`` composes it, the job
prepared and its backend entered as a job does, the task's seeded samples drawn, and
``runner.job.answer.answer`` timed (every request answered and scored). One thread, generation cache off.
What is left beside the matrix work is the backend's own cost per request: planning, tokenisation, tensor
building, per-step host syncs, cache copies, decoding, scoring, progress. At the embedded width (576), two
layers on one CPU thread are still bound by the linear layers' arithmetic; ``--hidden-size 64`` takes it out
of the way. Further arguments are job overrides (``backend.bulk_tokenize=false``: a fast path switched off).

``--profile`` runs each task a second time under cProfile and prints its time grouped into those
phases (inclusive times of the functions that do each; nested phases are subtracted from their
parent), and ``--torch-profile`` adds the torch profiler's top operators. On a GPU host,
``--device cuda --model embedded`` runs the embedded model itself. A benchmark: nothing asserts on timings.

    python benchmarks/overhead_probe.py                                 # mmlu, mmlu_0shot, gsm8k
    python benchmarks/overhead_probe.py --hidden-size 64                # the overhead alone
    python benchmarks/overhead_probe.py --tasks mmlu --num-samples 570 --profile
    python benchmarks/overhead_probe.py --device cuda --model embedded --dtype bfloat16 --threads 0
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runner` and `evaluators` importable
    sys.path.insert(0, str(ROOT))

from tests.helpers.micro_model import micro_checkpoint  # noqa: E402  (the same micro model as the parity tests)

# the probe's default n per task: 5-shot MMLU at 18 questions per subject; all of the packaged MMLU, 0-shot, 4 letter
# requests each (n=14042 asks for 247 per subject, more than any packaged subject holds: 10171 questions); a few
# 256-token GSM8K generations
DEFAULT_SAMPLES = {"mmlu": 1026, "mmlu_0shot": 14042, "gsm8k": 32}

# (phase, [(file suffix, function name)]): a phase's time is the inclusive time of its functions; a phase
# listed under another (indented) is subtracted from it. Calls from inside another phase's function count
# in the innermost listed phase only.
PHASES: list[tuple[str, list[tuple[str, str]]]] = [
    ("planning", [("hf/batching.py", "plan")]),
    ("tokenisation", [("backends/prompting.py", "encode_request"), ("backends/prompting.py", "encode_requests"),
                      ("backends/rolling.py", "of")]),
    ("tensor building", [("hf/forward.py", "prefill"), ("hf/forward.py", "run_prefix")]),
    ("forward", [("torch/nn/modules/module.py", "_wrapped_call_impl")]),
    ("mask building", [("transformers/masking_utils.py", "create_causal_mask")]),
    ("cache copies", [("transformers/cache_utils.py", "update"), ("hf/forward.py", "batch_cache")]),
    ("per-step host syncs", [("~", "<method 'tolist' of 'torch._C.TensorBase' objects>"),
                             ("~", "<method 'item' of 'torch._C.TensorBase' objects>"),
                             ("~", "<method 'cpu' of 'torch._C.TensorBase' objects>")]),
    ("decoding", [("hf/backend.py", "_decode_texts"), ("transformers/tokenization_utils_base.py", "decode")]),
    ("backend loop (Python)", [("hf/backend.py", "loglikelihood"), ("hf/backend.py", "generate")]),
    ("evaluator scoring", [("runner/contract/evaluator.py", "score_batch"), ("tasks/harness/evaluator.py", "score_batch")]),
    ("progress", [("runner/contract/progress.py", "update"), ("runner/contract/progress.py", "close")]),
]


def overrides(task: str, args: argparse.Namespace, model_path: Path | None, out_dir: Path) -> list[str]:
    """The command-line overrides of the job the probe runs."""
    found = [f"task={task}", "tracking=none", "cache=off", "reference.mode=skip", f"output_dir={out_dir}",
             f"task.num_samples={samples_for(task, args.num_samples)}", f"seed={args.seed}",
             f"backend.device={args.device}", f"backend.dtype={args.dtype}"]
    if args.threads:
        found.append(f"backend.num_threads={args.threads}")
    if model_path is not None:
        found.append(f"model.path={model_path}")
    return found + list(args.override)


def samples_for(task: str, asked: str) -> int:
    """``--num-samples``: one n for every task, or ``task=n`` pairs (the defaults for the others)."""
    wanted = dict(DEFAULT_SAMPLES)
    for part in filter(None, asked.split(",")):
        name, _, n = part.rpartition("=")
        if name:
            wanted[name] = int(n)
        else:
            wanted = {k: int(n) for k in wanted}
    return wanted.get(task, DEFAULT_SAMPLES.get(task, 100))


def prepared_job(task: str, args: argparse.Namespace, model_path: Path | None, out_dir: Path) -> Any:
    """The job ``python -m runner`` would run with these overrides, prepared (nothing loaded yet)."""
    from hydra import compose, initialize_config_module

    from runner.config.store import register_schemas
    from runner.job.flow import asked_num_samples, typed
    from runner.job.prepare import prepare

    register_schemas()
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides(task, args, model_path, out_dir))
    config = typed(cfg)
    job = prepare(config)
    job.asked_num_samples = asked_num_samples(cfg, config)
    return job


def run_task(task: str, args: argparse.Namespace, model_path: Path | None, out_dir: Path) -> dict[str, Any]:
    """One task through the job path: the answer step timed (and profiled when asked)."""
    import torch

    from runner.job.answer import answer, job_requests
    from runner.job.load import load
    from runner.job.reference import find_reference
    from runner.job.samples import select_samples

    job = prepared_job(task, args, model_path, out_dir / task)
    job.backend.progress = False
    with job.backend:
        if args.threads:
            torch.set_num_threads(args.threads)
        loaded = load(job)
        _, params = find_reference(job, loaded.spec)
        samples = select_samples(job, params, False)
        requests = sum(len(r) for r in job_requests(job.evaluator, samples, job.task.sampling))
        answer(job, loaded.info, samples[:2])  # first-call set-up outside the clock
        start = time.perf_counter()
        scored, _, _ = answer(job, loaded.info, samples)
        wall = time.perf_counter() - start
        result: dict[str, Any] = {
            "task": task, "samples": len(samples), "requests": requests, "seconds": wall,
            "samples_per_s": len(samples) / wall, "requests_per_s": requests / wall,
            "metric": job.evaluator.aggregate(scored).get(job.task.metric) if scored else None,
            "device": loaded.info.device, "dtype": loaded.info.details.get("torch_dtype"),
            "threads": torch.get_num_threads(), "backend": {k: v for k, v in vars(job.config.backend).items()
                                                            if not k.startswith("_")},
        }
        if args.profile:
            profiler = cProfile.Profile()
            start = time.perf_counter()
            profiler.runcall(answer, job, loaded.info, samples)
            result["profiled_seconds"] = time.perf_counter() - start
            result["phases"] = phases(pstats.Stats(profiler), result["profiled_seconds"])
        if args.torch_profile:
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
            with profile(activities=activities) as prof:
                answer(job, loaded.info, samples)
            result["torch_ops"] = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows)
    return result


def phases(stats: pstats.Stats, total: float) -> dict[str, float]:
    """Seconds per phase of :data:`PHASES`: each phase's inclusive time less the phases called inside it."""
    table = stats.stats  # type: ignore[attr-defined]  # {(file, line, name): (cc, nc, tt, ct, callers)}

    def member(func: tuple[str, int, str], names: Sequence[tuple[str, str]]) -> bool:
        return any(func[0].endswith(suffix) and func[2] == name for suffix, name in names)

    phase_of = {func: phase for func in table for phase, names in PHASES if member(func, names)}
    # inclusive time of each phase, counting only calls made from outside the phase itself
    inclusive: dict[str, float] = {phase: 0.0 for phase, _ in PHASES}
    inside: dict[tuple[str, str], float] = {}  # (outer phase, inner phase): inclusive time of inner calls made from outer
    for func, (_, _, _, _, callers) in table.items():
        phase = phase_of.get(func)
        if phase is None:
            continue
        for caller, (_, _, _, ct) in callers.items():
            caller_phase = enclosing(caller, table, phase_of, set())
            if caller_phase == phase:
                continue
            inclusive[phase] += ct
            if caller_phase is not None:
                inside[(caller_phase, phase)] = inside.get((caller_phase, phase), 0.0) + ct
    own = dict(inclusive)
    for (outer, _), seconds in inside.items():
        own[outer] -= seconds
    own["other (job path, Python)"] = total - sum(own.values())
    return own


def enclosing(func: tuple[str, int, str], table: dict, phase_of: dict, seen: set) -> str | None:
    """The phase a call from ``func`` is made in: ``func``'s own, else that of its callers (the first one
    found walking up; cProfile keeps one level of callers, so a function shared by two phases is
    attributed to whichever caller comes first)."""
    if func in phase_of:
        return phase_of[func]
    if func in seen or func not in table:
        return None
    seen.add(func)
    for caller in table[func][4]:
        phase = enclosing(caller, table, phase_of, seen)
        if phase is not None:
            return phase
    return None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="mmlu,mmlu_0shot,gsm8k", help="tasks to run (comma-separated)")
    parser.add_argument("--num-samples", default="",
                        help=f"samples: one n for every task, or task=n pairs, e.g. mmlu=570,gsm8k=8 (defaults "
                             f"{DEFAULT_SAMPLES}; mmlu_0shot=14042 draws all 10171 packaged questions)")
    parser.add_argument("--device", default="cpu", help="backend.device (cpu, cuda, cuda:N)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16", "auto"))
    parser.add_argument("--model", default="micro", choices=("micro", "embedded"),
                        help="micro: the 2-layer random-weight model (default); embedded: SmolLM2-135M itself")
    parser.add_argument("--layers", type=int, default=2, help="layers of the micro model")
    parser.add_argument("--hidden-size", type=int, default=0,
                        help="width of the micro model (0: the embedded model's 576); e.g. 64 takes the linear layers' "
                             "arithmetic, which bounds 2 layers at full width on one CPU thread, out of the way")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's choice)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="also run each task under cProfile, grouped by phase")
    parser.add_argument("--torch-profile", action="store_true", help="also print the torch profiler's top operators")
    parser.add_argument("--rows", type=int, default=15, help="operators in the torch profiler's table")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    parser.add_argument("override", nargs="*", help="further job overrides, e.g. backend.prefix_cache=false")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    logging.getLogger("runner").setLevel(logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="overhead_probe_"))
    try:
        model_path = None if args.model == "embedded" else \
            micro_checkpoint(work / "micro", args.layers, args.seed, args.hidden_size or None)
        results = [run_task(task, args, model_path, work / "out") for task in args.tasks.split(",") if task]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(results, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    width = f", hidden size {args.hidden_size}" if args.hidden_size else ""
    model = f"{args.layers}-layer random-weight SmolLM2 architecture{width}" if args.model == "micro" else "embedded SmolLM2-135M"
    print(f"## overhead probe: {model}, {args.dtype}, {args.device}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"1-min load avg {os.getloadavg()[0]:.1f}; overrides {' '.join(args.override) or '-'}")
    print(f"{'task':<12} {'samples':>8} {'requests':>9} {'s':>8} {'samples/s':>10} {'requests/s':>11} {'threads':>8}")
    for r in results:
        print(f"{r['task']:<12} {r['samples']:>8} {r['requests']:>9} {r['seconds']:>8.2f} {r['samples_per_s']:>10.1f} "
              f"{r['requests_per_s']:>11.1f} {r['threads']:>8}")
    for r in results:
        if "phases" in r:
            print(f"\n### {r['task']}: cProfile, {r['profiled_seconds']:.2f} s profiled (the profiler's own cost included)")
            for phase, seconds in r["phases"].items():
                print(f"  {phase:<26} {seconds:>8.2f} s {100 * seconds / r['profiled_seconds']:>5.1f}%")
        if "torch_ops" in r:
            print(f"\n### {r['task']}: torch profiler\n{r['torch_ops']}")


if __name__ == "__main__":
    sys.exit(main())
