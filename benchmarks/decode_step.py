"""One generation batch's decode steps with the KV cache concatenated (transformers' default) and preallocated
(``backend.preallocated_cache``): milliseconds per step on the embedded model, the two alternating.

The batch's rows share a ``--prompt``-token prefix (run once, as the hf backend runs a few-shot block) and have
short, unequal tails; each step feeds every row its greedy token, as the backend's decode loop does. A benchmark:
nothing asserts on timings (``tests/backends/test_hf_fast_paths.py`` checks that both give the same logits).

    python benchmarks/decode_step.py --rows 16 --prompt 1000 --steps 32 --repeats 2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runner` and the tests' helpers importable
    sys.path.insert(0, str(ROOT))

from tests.helpers.decode_loop import greedy_steps  # noqa: E402  (the decode loop the parity test runs)


def step_ms(model, rows: list[list[int]], prefix: int, shared, capacity: int, steps: int) -> float:
    """Milliseconds per decode step after the batch's prefill (``capacity`` 0: the concatenating cache)."""
    loop = greedy_steps(model, rows, prefix, shared, capacity, steps)
    next(loop)  # the prefill, untimed
    start = time.perf_counter()
    for _ in loop:
        pass
    return (time.perf_counter() - start) / steps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--prompt", type=int, default=1000, help="tokens of the shared prefix")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM

    from runner.backends.hf import forward
    from runner.files.assets import smollm2_checkpoint

    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(smollm2_checkpoint(), dtype=getattr(torch, args.dtype)).eval()
    head = [(7 * i) % 5000 + 10 for i in range(args.prompt)]
    rows = [head + [100 + j] * (5 + j % 3) for j in range(args.rows)]
    with torch.inference_mode():
        shared = forward.run_prefix(model, torch.device("cpu"), head)
        for _ in range(args.repeats):
            for capacity in (0, args.prompt + 8 + args.steps):
                ms = step_ms(model, rows, args.prompt, shared, capacity, args.steps)
                kind = "preallocated" if capacity else "concatenated"
                print(f"rows {args.rows}, prompt {args.prompt}, {args.dtype}, {args.threads} thread(s): "
                      f"{kind} {ms:.1f} ms/step", flush=True)


if __name__ == "__main__":
    main()
