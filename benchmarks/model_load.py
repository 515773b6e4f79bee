"""What a sweep job saves when its worker keeps the model: the hf backend's start, fresh vs kept.

For each quant spec, in one process: a fresh load (``backend.reuse_loaded_model=false``), a second
fresh load (the process's imports and first-call set-up already paid), then a job that finds the
model kept by the previous one. A quantized spec is restored from the preparation cache when one is
there (the first run of a spec quantizes and stores it). The difference between the second and the
third row is what each reused job of a sweep saves.

    python benchmarks/model_load.py [--specs none w8a16 w4a16]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--specs", nargs="+", default=["none", "w8a16", "w4a16"])
    parser.add_argument("--model", default="smollm2_135m")
    args = parser.parse_args(argv)

    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from runner.contract.backend import TaskLimits
    from runner.backends.hf.backend import HFBackend, HFBackendConfig
    from runner.config.store import register_schemas

    register_schemas()
    print(f"{'spec':<10} {'start':<32} {'seconds':>8}")
    with initialize_config_module(config_module="conf", version_base="1.3"):
        for spec in args.specs:
            cfg = compose(config_name="config", overrides=[f"quant={spec}", f"model={args.model}"])
            model, quant = OmegaConf.to_object(cfg.model), OmegaConf.to_object(cfg.quant)
            for label, reuse in (("fresh", False), ("fresh again", True), ("kept from the previous job", True)):
                backend = HFBackend(HFBackendConfig(device="cpu", reuse_loaded_model=reuse), model, quant,
                                    TaskLimits(4094, 2), progress=False)
                start = time.perf_counter()
                backend.__enter__()
                elapsed = time.perf_counter() - start
                backend.__exit__(None, None, None)
                print(f"{spec:<10} {label:<32} {elapsed:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
