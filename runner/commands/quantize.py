"""``python -m runner.quantize``: quantize the composed model with ModelOpt and export it for TensorRT-LLM
(see :mod:`runner.quant.export`)."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from runner.commands.main import refuse_foreign_code
from runner.config.store import register_schemas
from runner.contract.errors import EXIT_ERROR, EXIT_OK, UserError
from runner.quant.export import MANIFEST, Exported, QuantizeJobConfig, quantize_and_export


def evaluate_command(exported: Exported, cfg: QuantizeJobConfig) -> str:
    """The command that evaluates the export on TensorRT-LLM's PyTorch backend."""
    return (f"python -m runner backend=trtllm_pytorch model={cfg.model.name} quant={cfg.quant.name} "
            f"backend.checkpoint={exported.path}")


# ---------------------------------------------------------------------------- entry point
@hydra.main(version_base="1.3", config_path="pkg://conf", config_name="quantize")
def main(cfg: DictConfig) -> None:
    try:
        config = OmegaConf.to_object(cfg)
        assert isinstance(config, QuantizeJobConfig)
        exported = quantize_and_export(config)
    except UserError as err:
        print(err.render(), file=sys.stderr, flush=True)
        sys.exit(EXIT_ERROR)
    calib = exported.manifest["calibration"]
    print(f"exported quant={cfg.quant.name} (quant_algo={exported.quant_algo}, "
          f"kv_cache_quant_algo={exported.kv_cache_quant_algo}) to {exported.path}")
    print(f"  calibration: {calib['description'] if calib else 'none (weights only / dynamic activations)'}")
    print(f"  manifest:    {exported.path / MANIFEST}")
    print(f"  evaluate:    {evaluate_command(exported, cfg)}")
    sys.exit(EXIT_OK)


def entry() -> None:

    register_schemas()
    refuse_foreign_code(sys.argv[1:])
    main()

