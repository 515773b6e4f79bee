"""A 2-layer model of the embedded SmolLM2-135M's architecture with seeded random weights: the backend's
own costs with almost no model compute (benchmarks/overhead_probe.py, the fast-path parity tests)."""

from __future__ import annotations

import shutil
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def micro_checkpoint(directory: Path, layers: int = 2, seed: int = 0, hidden_size: int | None = None) -> Path:
    """The embedded checkpoint's config with ``layers`` layers, seeded random float32 weights and the
    embedded tokenizer, saved in ``directory`` (nothing downloaded). ``hidden_size`` narrows it further (the
    MLP 8/3 times as wide, heads of 16), for tests that need the architecture, not its cost."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from runner.files.assets import smollm2_checkpoint

    source = smollm2_checkpoint()
    config = AutoConfig.from_pretrained(source)
    config.num_hidden_layers = layers
    config.dtype = "float32"
    if hidden_size:
        config.hidden_size, config.intermediate_size = hidden_size, hidden_size * 8 // 3
        config.head_dim = 16
        config.num_attention_heads, config.num_key_value_heads = hidden_size // 16, max(1, hidden_size // 48)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(directory)
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy(source / name, directory / name)
    return directory
