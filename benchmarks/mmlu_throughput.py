"""MMLU throughput and peak memory on CPU: this project's ``hf`` backend vs lm-evaluation-harness.

Both sides score the SAME questions (our MMLU evaluator's seeded samples, 0-shot and 5-shot), from
the SAME model files (the embedded SmolLM2-135M checkpoint), with the SAME (context, continuation)
strings: the prompt ending in "Answer:" and the continuations " A".." D". lm-evaluation-harness
runs its own ``hf`` model class (HFLM) on a local task written next to the questions, so nothing
is downloaded; it is run at each batch size asked for and its best is the baseline. Our backend
runs both MMLU scorings: letter log-likelihood and upstream's generate (2 greedy new tokens).

Every measurement runs in its own subprocess (its peak RSS is its own; model load time is kept
apart from evaluation time; throughput = questions / evaluation wall time), all in one run,
alternating the two sides so that a change in the machine's load hits both. After the timed
runs (in ``--dtype``), a float32 pass of our log-likelihood and lm-eval's best batch size checks
that the predictions agree. This is a benchmark, not a test: nothing asserts on timings.

Usage (from the repository root; lm-eval comes with ``pip install -e .[bench]``):

    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 python benchmarks/mmlu_throughput.py
    python benchmarks/mmlu_throughput.py --num-samples 57 --shots 0 --json /tmp/mmlu.json
    python benchmarks/mmlu_throughput.py --lm-eval-batch-sizes 1,4,16,auto
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

LETTERS = ("A", "B", "C", "D")
TASK_NAME = "runner_mmlu_throughput"


# ---------------------------------------------------------------------- shared setup
def mmlu_evaluator(num_samples: int, shots: int, scoring: str) -> Any:
    """Our MMLU evaluator, reading the packaged (offline) data."""
    from evaluators.tasks.mmlu import MMLUEvaluator
    from evaluators.tasks.mmlu import MMLUTaskConfig

    config = MMLUTaskConfig(_target_="evaluators.tasks.mmlu.MMLUEvaluator", name="mmlu", num_samples=num_samples,
                            max_input_len=4094, max_output_len=2, scoring=scoring, num_fewshot=shots)
    return MMLUEvaluator(config)


def write_questions(path: Path, num_samples: int, shots: int, seed: int) -> int:
    """Write the evaluator's samples as jsonl, the one source of questions for both sides."""
    samples = mmlu_evaluator(num_samples, shots, "loglikelihood").samples(num_samples, seed)
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


def is_tie(logprobs: list[float]) -> bool:
    """The two best letters have exactly the same log-likelihood."""
    best, second = sorted(logprobs, reverse=True)[:2]
    return best == second


# ---------------------------------------------------------------------- workers (one per subprocess)
def run_ours(questions_path: Path, shots: int, scoring: str, dtype: str) -> dict[str, Any]:
    """This project's ``hf`` backend, driven as the runner drives it (requests, one bulk call, score)."""
    import torch  # imported before the clock starts, as on the lm-eval side
    import transformers  # noqa: F401

    from runner.contract.evaluator import Sample
    from runner.contract.backend import ChatFormat, TaskLimits
    from runner.backends.hf.backend import HFBackend, HFBackendConfig
    from runner.contract.task_config import ModelConfig, QuantConfig

    rows = read_questions(questions_path)
    evaluator = mmlu_evaluator(len(rows), shots, scoring)
    samples = [Sample(r["id"], r["prompt"], r["target"], {"subject": r["subject"]}) for r in rows]
    model = ModelConfig(name="smollm2_135m", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct", embedded="smollm2_135m_gguf")
    backend = HFBackend(HFBackendConfig(dtype=dtype, device="cpu"), model, QuantConfig(name="none"),
                        TaskLimits(4094, 2), chat=ChatFormat(), progress=False)
    start = time.perf_counter()
    with backend:
        loaded = time.perf_counter()
        requests = [evaluator.requests(s) for s in samples]
        flat = [r for reqs in requests for r in reqs]
        call = backend.loglikelihood if scoring == "loglikelihood" else backend.generate
        results = call(flat)
        scored, logprobs, k = [], {}, 0
        for sample, reqs in zip(samples, requests):
            responses = results[k:k + len(reqs)]
            scored.append(evaluator.score(sample, responses))
            if scoring == "loglikelihood":
                logprobs[sample.id] = [r.logprob for r in responses]
            k += len(reqs)
        done = time.perf_counter()
        info = backend.info()
    return {
        "load_s": loaded - start, "eval_s": done - loaded,
        "predictions": {s.sample_id: s.prediction for s in scored}, "correct": sum(s.score > 0 for s in scored),
        "logprobs": logprobs,
        "arguments": {s.id: [[r.context, r.continuation] for r in reqs] for s, reqs in zip(samples, requests)}
        if scoring == "loglikelihood" else {},
        "threads": torch.get_num_threads(), "dtype": info.details["torch_dtype"],
    }


def write_lm_eval_task(directory: Path, questions_path: Path, name: str) -> None:
    """A local lm-eval task over our questions: context = our prompt, choices " A".." D".

    lm-eval joins context and choice with ``target_delimiter`` (default " "), so the choices are
    the bare letters; the driver checks that the resulting strings equal ours.
    """
    directory.mkdir(parents=True, exist_ok=True)
    q = json.dumps
    (directory / f"{name}.yaml").write_text(
        f"task: {name}\n"
        "dataset_path: json\n"
        "dataset_kwargs:\n"
        "  data_files:\n"
        f"    test: {q(str(questions_path.resolve()))}\n"
        "test_split: test\n"
        "output_type: multiple_choice\n"
        "num_fewshot: 0\n"  # the few-shot block is already in our prompt
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


def run_lm_eval(questions_path: Path, shots: int, dtype: str, batch_size: str) -> dict[str, Any]:
    """lm-evaluation-harness's ``hf`` backend (HFLM) through ``simple_evaluate`` on the local task.

    The model is built the way ``simple_evaluate(model="hf", model_args=...)`` builds it, but
    beforehand, so its load time is measured apart from the evaluation.
    """
    import torch
    import transformers  # noqa: F401

    import lm_eval
    from lm_eval.api.registry import get_model
    from lm_eval.tasks import TaskManager

    from runner.files.assets import smollm2_checkpoint

    name = f"{TASK_NAME}_{questions_path.stem.removeprefix('questions_')}"
    task_dir = questions_path.parent / f"lm_eval_task_{questions_path.stem}"
    write_lm_eval_task(task_dir, questions_path, name)
    task_manager = TaskManager(include_path=str(task_dir))  # indexes every task: setup, untimed
    start = time.perf_counter()
    lm = get_model("hf").create_from_arg_string(f"pretrained={smollm2_checkpoint()},dtype={dtype}",
                                                {"batch_size": batch_size, "device": "cpu"})
    loaded = time.perf_counter()
    out = lm_eval.simple_evaluate(model=lm, tasks=[name], task_manager=task_manager, batch_size=batch_size,
                                  device="cpu", log_samples=True, bootstrap_iters=0)
    done = time.perf_counter()
    predictions, arguments, all_logprobs = {}, {}, {}
    for logged in out["samples"][name]:
        logprobs = [resp[0] for resp in logged["filtered_resps"]]
        qid = logged["doc"]["id"]
        predictions[qid] = LETTERS[max(range(len(logprobs)), key=lambda i: logprobs[i])]  # first max, as ours
        arguments[qid] = [[ctx, cont] for ctx, cont in logged["arguments"]]
        all_logprobs[qid] = logprobs
    gold = {r["id"]: r["target"] for r in read_questions(questions_path)}
    return {
        "load_s": loaded - start, "eval_s": done - loaded, "predictions": predictions,
        "correct": sum(predictions[i] == gold[i] for i in gold), "arguments": arguments, "logprobs": all_logprobs,
        "threads": torch.get_num_threads(), "dtype": str(lm.model.dtype).removeprefix("torch."),
        "lm_eval_version": getattr(lm_eval, "__version__", "?"),
    }


def worker(args: argparse.Namespace) -> int:
    """Run one measurement in this (fresh) process and write it to ``--result``."""
    questions = Path(args.out_dir) / f"questions_{args.shots}shot{args.subset}.jsonl"
    if args.worker == "runner":
        result = run_ours(questions, args.shots, args.scoring, args.dtype)
    else:
        result = run_lm_eval(questions, args.shots, args.dtype, args.batch_size)
    result["peak_rss_mib"] = peak_rss_mib()
    Path(args.result).write_text(json.dumps(result))
    return 0


# ---------------------------------------------------------------------- driver
def spawn(args: argparse.Namespace, side: str, shots: int, dtype: str, setting: str, subset: str = "") -> dict[str, Any]:
    """One measurement in a subprocess; ``setting`` is our scoring or lm-eval's batch size;
    ``subset`` names a smaller question file (the float32 pass)."""
    label = f"{side} {'batch ' if side == 'lm-eval' else ''}{setting}, {shots}-shot, {dtype}"
    result_path = Path(args.out_dir) / f"{side}_{setting}_{shots}shot{subset}_{dtype}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", side, "--out-dir", args.out_dir,
           "--shots", str(shots), "--dtype", dtype, "--result", str(result_path), "--subset", subset,
           "--scoring" if side == "runner" else "--batch-size", setting]
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               HF_DATASETS_CACHE=str(Path(args.out_dir) / "hf_datasets_cache"))
    if args.threads:  # the same intra-op thread count for both sides
        env |= {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    print(f"[bench] {label} ...", file=sys.stderr, flush=True)
    load_before = os.getloadavg()[0]
    proc = subprocess.run(cmd, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"[bench] {label} failed (exit {proc.returncode})")
    result = json.loads(result_path.read_text())
    result |= {"side": side, "setting": setting, "shots": shots, "label": label,
               "loadavg_1m": [load_before, os.getloadavg()[0]]}
    print(f"[bench]   {result['eval_s']:.1f} s, 1-min load {load_before:.1f} -> {os.getloadavg()[0]:.1f}",
          file=sys.stderr, flush=True)
    return result


def agreement(ours: dict[str, Any], theirs: dict[str, Any], ids: list[str]) -> dict[str, Any]:
    """Identical predictions, and whether each disagreement is an exact tie on one side."""
    differing = [i for i in ids if ours["predictions"][i] != theirs["predictions"].get(i)]
    tied = [i for i in differing if is_tie(ours["logprobs"][i]) or is_tie(theirs["logprobs"][i])]
    same_args = sum(ours["arguments"][i] == theirs["arguments"].get(i) for i in ids)
    return {"identical": len(ids) - len(differing), "differing": differing, "differing_tied": len(tied),
            "differing_untied": [i for i in differing if i not in tied], "identical_strings": same_args}


def shot_report(shots: int, rows: list[dict[str, Any]], timed: list[dict[str, Any]],
                exact: list[dict[str, Any]], dtype: str) -> dict[str, Any]:
    """Print one shot count's table, ratios and agreement counts; return them."""
    n = len(rows)
    print(f"\n## {shots}-shot, {n} questions")
    header = f"{'side':<10} {'setting':<14} {'dtype':<9} {'n':>4} {'load s':>6} {'eval s':>7} {'q/s':>7} {'peak RSS MiB':>12} " \
             f"{'acc %':>6} {'load avg':>11}"
    print(header)
    print("-" * len(header))
    for r in timed + exact:
        m = r.setdefault("questions", n)
        r["qps"] = m / r["eval_s"]
        print(f"{r['side']:<10} {r['setting']:<14} {r['dtype']:<9} {m:>4} {r['load_s']:>6.1f} {r['eval_s']:>7.1f} "
              f"{r['qps']:>7.2f} {r['peak_rss_mib']:>12.0f} {100.0 * r['correct'] / m:>6.2f} "
              f"{r['loadavg_1m'][0]:>5.1f}->{r['loadavg_1m'][1]:<4.1f}")
    theirs = [r for r in timed if r["side"] == "lm-eval"]
    best = max(theirs, key=lambda r: r["qps"])
    out: dict[str, Any] = {"questions": n, "lm_eval_best_batch": best["setting"], "lm_eval_best_qps": best["qps"],
                           "runs": [{k: v for k, v in r.items() if k not in ("arguments", "logprobs", "predictions")}
                                    for r in timed + exact]}
    print(f"lm-eval best: batch {best['setting']}, {best['qps']:.2f} q/s, peak RSS {best['peak_rss_mib']:.0f} MiB")
    for r in (r for r in timed if r["side"] == "runner"):
        ratio = r["qps"] / best["qps"]
        out[f"ratio_{r['setting']}"] = ratio
        print(f"ratio runner {r['setting']} / lm-eval best: {ratio:.2f}x q/s; "
              f"peak RSS {r['peak_rss_mib'] / best['peak_rss_mib']:.2f}x")
    ours_ll = next(r for r in timed if r["side"] == "runner" and r["setting"] == "loglikelihood")
    checks = [(dtype, ours_ll, best)]
    if exact:
        checks.append(("float32", exact[0], exact[1]))
    for name, ours, other in checks:
        asked = sorted(ours["predictions"])  # the float32 pass runs its own, smaller question set
        a = agreement(ours, other, asked)
        m = len(asked)
        out[f"agreement_{name}"] = a
        print(f"{name} ({m} questions): identical (context, continuation) strings {a['identical_strings']}/{m}; "
              f"identical predictions {a['identical']}/{m}; of the {len(a['differing'])} differing, {a['differing_tied']} are an exact tie "
              f"on one side" + (f"; NOT a tie: {', '.join(a['differing_untied'])}" if a["differing_untied"] else ""))
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", type=int, default=456,
                        help="questions; rounded up to a whole number per subject (default 456: 8 per subject)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shots", default="0,5", help="few-shot counts to measure (default 0,5)")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"),
                        help="dtype of the timed runs, both sides")
    parser.add_argument("--lm-eval-batch-sizes", default="4,8,16",
                        help="lm-eval batch sizes to try; the best is the baseline ('auto' sizes itself by "
                             "trying 64 first: on CPU that can exhaust memory)")
    parser.add_argument("--float32-samples", type=int, default=57,
                        help="questions of the float32 agreement pass (our log-likelihood vs lm-eval's best batch "
                             "size; lm-eval is several times slower in float32); 0 skips it (default 57)")
    parser.add_argument("--threads", type=int, default=0,
                        help="intra-op threads of both sides (OMP_NUM_THREADS); default: torch's choice, one per "
                             "core. On a machine shared with other jobs, 1 avoids stalls at OpenMP barriers")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    parser.add_argument("--out-dir", help="intermediate files (questions, lm-eval tasks, results); default: a temp dir")
    parser.add_argument("--worker", choices=("runner", "lm-eval"), help=argparse.SUPPRESS)
    parser.add_argument("--scoring", default="loglikelihood", help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", default="16", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--subset", default="", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    args = parse_args(argv)
    if args.worker:
        args.shots = int(args.shots)
        return worker(args)
    args.out_dir = str(Path(args.out_dir or tempfile.mkdtemp(prefix="mmlu_throughput_")).resolve())
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    batch_sizes = [b.strip() for b in args.lm_eval_batch_sizes.split(",") if b.strip()]
    summary: dict[str, Any] = {"dtype": args.dtype, "seed": args.seed, "num_samples": args.num_samples,
                               "cpu": cpu_model(), "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "shots": {}}
    started = time.perf_counter()
    for shots in (int(s) for s in args.shots.split(",")):
        questions = Path(args.out_dir) / f"questions_{shots}shot.jsonl"
        n = write_questions(questions, args.num_samples, shots, args.seed)
        print(f"[bench] {n} MMLU questions, {shots}-shot, in {questions}", file=sys.stderr)
        # alternate the sides so a change of load hits both
        plan = [("runner", "loglikelihood")] + [("lm-eval", b) for b in batch_sizes[:1]] + [("runner", "generate")] \
            + [("lm-eval", b) for b in batch_sizes[1:]]
        timed = [spawn(args, side, shots, args.dtype, setting) for side, setting in plan]
        exact: list[dict[str, Any]] = []
        if args.float32_samples and args.dtype != "float32":
            best = max((r for r in timed if r["side"] == "lm-eval"), key=lambda r: n / r["eval_s"])
            subset = f"_{args.float32_samples}"
            m = write_questions(Path(args.out_dir) / f"questions_{shots}shot{subset}.jsonl", args.float32_samples,
                                shots, args.seed)
            exact = [spawn(args, "runner", shots, "float32", "loglikelihood", subset),
                     spawn(args, "lm-eval", shots, "float32", best["setting"], subset)]
            exact[0]["questions"] = exact[1]["questions"] = m
        summary["shots"][str(shots)] = shot_report(shots, read_questions(questions), timed, exact, args.dtype)
    print(f"\nhost: {summary['cpu']}, {summary['cores']} cores; {summary['date']}; "
          f"bench wall time {time.perf_counter() - started:.0f} s; q/s = questions / evaluation wall time "
          "(model load excluded); load avg: the 1-minute load average before -> after each run")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
        print(f"wrote {args.json}")
    return 0


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


if __name__ == "__main__":
    sys.exit(main())
