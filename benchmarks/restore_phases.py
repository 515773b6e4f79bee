"""Where a cached quantized model's restore spends its time, phase by phase, as runner/quant/modelopt.py runs a
cache hit (docs/measurements.md, "Restoring a cached quantized model"):

* ``--path modelopt`` (every spec): the imports, the base checkpoint, ModelOpt's import, ``mto.restore`` of the
  cached state and ``fold_weight``;
* ``--path folded`` (weight-only specs: w8a16, w4a16, w4a16_awq): the imports, the base checkpoint, and the stored
  folded weights verified and copied in (runner/quant/folded.py); ModelOpt is not imported.

Run each path in its own process (imports are part of the cost). Build the entries first with any run of a
weight-only spec on backend=hf, e.g.
``python -m runner quant=w8a16 task=perplexity task.num_samples=2 tracking=none reference.mode=skip``, then:

    python benchmarks/restore_phases.py --path modelopt [--entry PATH/TO/modelopt_model.pt]
    python benchmarks/restore_phases.py --path folded [--entry PATH/TO/folded.safetensors]

(default entry: the newest of its kind in the cache; the base checkpoint is the embedded SmolLM2, bfloat16).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FILES = {"modelopt": "modelopt_model.pt", "folded": "folded.safetensors"}


def main() -> None:
    from runner.files.paths import cache_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", choices=sorted(FILES), default="modelopt", help="which restore to time")
    parser.add_argument("--entry", type=Path, help="the cached file to restore (default: the newest one)")
    args = parser.parse_args()
    entries = sorted((cache_dir() / "quantized").glob(f"*/engine/{FILES[args.path]}"), key=lambda p: p.stat().st_mtime)
    entry = args.entry or (entries[-1] if entries else None)
    if entry is None:
        sys.exit(f"no cached {FILES[args.path]}: build one first (see the docstring)")
    phases: list[tuple[str, float]] = []
    clock = time.monotonic()

    def done(phase: str) -> None:
        nonlocal clock
        now = time.monotonic()
        phases.append((phase, now - clock))
        clock = now

    import torch
    import transformers
    done("torch+transformers import")
    from runner.files.assets import smollm2_checkpoint

    model = transformers.AutoModelForCausalLM.from_pretrained(str(smollm2_checkpoint()), dtype=torch.bfloat16)
    done("base model load")
    if args.path == "modelopt":
        import modelopt.torch.opt as mto
        import modelopt.torch.quantization as mtq
        done("modelopt import")
        model = mto.restore(model, str(entry), map_location="cpu")
        done("mto.restore")
        mtq.fold_weight(model, keep_attrs=True)
        done("fold_weight")
    else:
        from runner.cache.engines import EngineCache
        from runner.quant import folded
        done("runner.quant.folded import")
        entry_dir = entry.parent.parent
        if folded.load(model, entry_dir.name, EngineCache(entry_dir.parent)) is None:
            sys.exit(f"{entry_dir} does not hold what was built into it")
        done("folded weights verified and loaded")
    total = sum(seconds for _, seconds in phases)
    print(f"{args.path}: " + "; ".join(f"{name} {seconds:.1f} s" for name, seconds in phases) + f"; total {total:.1f} s")


if __name__ == "__main__":
    main()
