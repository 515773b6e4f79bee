"""Small models of the embedded SmolLM2-135M's architecture, saved next to its tokenizer: a 2-layer one with
seeded random weights (the backend's own costs with almost no model compute: benchmarks/overhead_probe.py, the
fast-path parity tests) and the embedded model cut to its first layers (trained weights, a fraction of the
compute: the quantization tests)."""

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
    return with_tokenizer(directory, source)


def truncated_checkpoint(directory: Path, layers: int = 2) -> Path:
    """The embedded checkpoint's first ``layers`` decoder layers with their trained weights (embeddings, final
    norm and tied head kept) in its own dtype, with its tokenizer, saved in ``directory``: logits of a real scale
    at ``layers``/30 of the layers' compute, for tests about what a backend does to a model, not its accuracy."""
    from transformers import AutoModelForCausalLM

    from runner.files.assets import smollm2_checkpoint

    source = smollm2_checkpoint()
    model = AutoModelForCausalLM.from_pretrained(source, num_hidden_layers=layers, dtype="auto")
    model.save_pretrained(directory)
    return with_tokenizer(directory, source)


def with_tokenizer(directory: Path, source: Path) -> Path:
    """``directory`` with the tokenizer files of the checkpoint at ``source`` copied in."""
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy(source / name, directory / name)
    return directory
