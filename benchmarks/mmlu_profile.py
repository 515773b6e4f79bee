"""Where our MMLU time goes on CPU: the torch profiler's operator table and the work the plan does.

Runs this project's ``hf`` backend on the same questions as ``mmlu_throughput.py`` (our MMLU
evaluator's seeded samples from the packaged data, letter log-likelihood) twice: once timed with
the forward calls counted (shared-prefix calls vs question calls, their padded tokens), once under
``torch.profiler`` for the operator table. It then prints the arithmetic floor of the linear layers
(multiply-accumulates per token times tokens, at the bf16 matrix-product rate this machine reaches
on the model's own shapes), so the measured time can be split into "the model's own matrix work"
and the rest (attention, elementwise operations, per-call costs).

    python benchmarks/mmlu_profile.py --shots 5            # 456 questions, bf16
    python benchmarks/mmlu_profile.py --shots 0 --num-samples 114 --rows 15
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import mmlu_throughput as bench  # noqa: E402  (the same questions and backend setup)


def linear_macs_per_token(model: Any) -> int:
    """Multiply-accumulates of every linear layer inside the decoder blocks, per token."""
    import torch

    return sum(m.in_features * m.out_features for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and "lm_head" not in name)


def matmul_rate(hidden: int, intermediate: int, dtype: Any) -> float:
    """Multiply-accumulates per second of one MLP-shaped product (2048 tokens) on this machine."""
    import torch

    x = torch.randn(2048, hidden, dtype=dtype)
    w = torch.randn(intermediate, hidden, dtype=dtype)
    for _ in range(3):
        torch.nn.functional.linear(x, w)
    start, reps = time.perf_counter(), 20
    for _ in range(reps):
        torch.nn.functional.linear(x, w)
    return reps * 2048 * hidden * intermediate / (time.perf_counter() - start)


class CallCounter:
    """Wraps the backend's two forward entry points to count calls, padded tokens and time."""

    def __init__(self, backend: Any) -> None:
        self.time: dict[str, float] = collections.defaultdict(float)
        self.calls: dict[str, int] = collections.defaultdict(int)
        self.tokens: dict[str, int] = collections.defaultdict(int)
        run_prefix, prefill = backend._run_prefix, backend._prefill

        def counted_prefix(tokens: list[int]) -> Any:
            start = time.perf_counter()
            out = run_prefix(tokens)
            self._add("shared prefix", start, len(tokens))
            return out

        def counted_prefill(rows: list[list[int]], keep: int, prefix: int = 0, prefix_cache: Any = None) -> Any:
            start = time.perf_counter()
            out = prefill(rows, keep, prefix, prefix_cache)
            width = max(len(r) - prefix for r in rows)
            self._add("questions after a prefix" if prefix else "questions", start, len(rows) * width)
            return out

        backend._run_prefix, backend._prefill = counted_prefix, counted_prefill
        self._backend = backend

    def stop(self) -> None:
        """Unwrap the backend (its class methods show through again): the profiled pass is not counted."""
        del self._backend._run_prefix, self._backend._prefill

    def _add(self, kind: str, start: float, tokens: int) -> None:
        self.time[kind] += time.perf_counter() - start
        self.calls[kind] += 1
        self.tokens[kind] += tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", type=int, default=456)
    parser.add_argument("--shots", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--rows", type=int, default=12, help="operators shown in the profiler table")
    args = parser.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile

    from runner.contract.evaluator import Sample
    from runner.contract.backend import ChatFormat, TaskLimits
    from runner.backends.hf.backend import HFBackend, HFBackendConfig
    from runner.contract.task_config import ModelConfig, QuantConfig

    questions = Path(tempfile.mkdtemp(prefix="mmlu_profile_")) / "questions.jsonl"
    n = bench.write_questions(questions, args.num_samples, args.shots, args.seed)
    rows = bench.read_questions(questions)
    evaluator = bench.mmlu_evaluator(n, args.shots, "loglikelihood")
    samples = [Sample(r["id"], r["prompt"], r["target"], {"subject": r["subject"]}) for r in rows]
    requests = [req for s in samples for req in evaluator.requests(s)]
    model = ModelConfig(name="smollm2_135m", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct", embedded="smollm2_135m_gguf")
    backend = HFBackend(HFBackendConfig(dtype=args.dtype, device="cpu"), model, QuantConfig(name="none"),
                        TaskLimits(4094, 2), chat=ChatFormat(), progress=False)
    with backend:
        backend.loglikelihood(requests[:8])  # first-call set-up outside the clock
        counter = CallCounter(backend)
        start = time.perf_counter()
        backend.loglikelihood(requests)
        wall = time.perf_counter() - start
        counter.stop()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            backend.loglikelihood(requests)
        macs = linear_macs_per_token(backend._model)
        config = backend._model.config
        rate = matmul_rate(config.hidden_size, config.intermediate_size, getattr(torch, args.dtype))

    print(f"## {args.shots}-shot, {n} questions, {args.dtype}, {torch.get_num_threads()} threads: "
          f"{wall:.1f} s, {n / wall:.2f} q/s\n")
    print(f"{'forward calls':<26} {'calls':>6} {'padded tokens':>14} {'s':>7} {'tokens/s':>9} {'linear floor s':>15}")
    for kind in counter.time:
        floor = counter.tokens[kind] * macs / rate
        print(f"{kind:<26} {counter.calls[kind]:>6} {counter.tokens[kind]:>14,} {counter.time[kind]:>7.1f} "
              f"{counter.tokens[kind] / counter.time[kind]:>9.0f} {floor:>15.1f}")
    total_tokens = sum(counter.tokens.values())
    floor = total_tokens * macs / rate
    print(f"\nlinear layers: {macs / 1e6:.1f} M multiply-accumulates per token; this machine's {args.dtype} matrix "
          f"product on the MLP's shape: {rate / 1e9:.0f} G/s; floor for {total_tokens:,} tokens: {floor:.1f} s "
          f"of the {wall:.1f} s measured ({100 * floor / wall:.0f}%)\n")
    print("(the profiled pass runs slower than the timed one: the profiler's own cost)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
