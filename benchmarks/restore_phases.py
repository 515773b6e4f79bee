"""Where a cached quantized model's restore spends its time: the imports, the base checkpoint, ModelOpt's restore of
the cached state and the fold of the weights, timed one after the other as runner/quant/modelopt.py runs them on a
cache hit (docs/measurements.md, "Restoring a cached quantized model").

Build the entry first (any run of the spec on backend=hf, e.g.
``python -m runner quant=w8a16 task=perplexity task.num_samples=2 tracking=none reference.mode=skip``), then:

    python benchmarks/restore_phases.py [--entry PATH/TO/modelopt_model.pt]   (default: the newest cached entry)
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    from runner.files.paths import cache_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entry", type=Path, help="a cached modelopt_model.pt (default: the newest one)")
    args = parser.parse_args()
    entries = sorted((cache_dir() / "quantized").glob("*/engine/modelopt_model.pt"), key=lambda p: p.stat().st_mtime)
    entry = args.entry or (entries[-1] if entries else None)
    if entry is None:
        sys.exit("no cached quantized model: build one first (see the docstring)")
    t0 = time.monotonic()
    import torch
    import transformers
    t1 = time.monotonic()
    import modelopt.torch.opt as mto
    import modelopt.torch.quantization as mtq
    t2 = time.monotonic()
    from runner.files.assets import smollm2_checkpoint

    model = transformers.AutoModelForCausalLM.from_pretrained(str(smollm2_checkpoint()), dtype=torch.bfloat16)
    t3 = time.monotonic()
    model = mto.restore(model, str(entry), map_location="cpu")
    t4 = time.monotonic()
    mtq.fold_weight(model, keep_attrs=True)
    t5 = time.monotonic()
    print(f"torch+transformers import {t1 - t0:.1f} s; modelopt import {t2 - t1:.1f} s; base model load {t3 - t2:.1f} s; "
          f"mto.restore {t4 - t3:.1f} s; fold_weight {t5 - t4:.1f} s; total {t5 - t0:.1f} s")


if __name__ == "__main__":
    main()
