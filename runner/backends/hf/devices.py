"""Where, in which precision and in what batches the hf backend computes: the device asked for, the
dtype chosen for the host, the dtype as it enters the reference key, and batch limits sized for the device.

``backend.dtype=auto`` is one protocol on every host: the checkpoint's precision, widened to
float32 on a CPU without bfloat16 arithmetic (an exact upcast of the weights, chosen for speed).
torch is passed in by the caller, which imported it on entry.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any, Optional

from runner.contract.errors import ConfigError


def cpu_has_native_bf16() -> bool:
    """True when the CPU computes bfloat16 natively (AMX or AVX512-BF16): then bf16 is 3-4x faster."""
    try:
        with open("/proc/cpuinfo") as handle:
            flags = handle.read()
    except OSError:
        return platform.machine() == "arm64"
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_device(torch: Any, wanted: str) -> Any:
    """The ``torch.device`` for ``backend.device`` (``auto``: CUDA when a GPU is visible)."""
    if wanted == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if wanted.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("CUDA was asked for but no GPU is visible", where="backend.device",
                          given=wanted, fix="use backend.device=cpu (or auto)")
    return torch.device(wanted)


def resolve_dtype(torch: Any, wanted: str, native: Any, device: Any) -> Any:
    """The dtype to compute in: the one asked for, else the checkpoint's (float32 on a CPU without bf16)."""
    if wanted != "auto":
        return getattr(torch, wanted)
    if device.type == "cuda" or native == torch.float32:
        return native
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32


def other_auto_dtype(dtype: Any, native: Any) -> str | None:
    """The dtype ``auto`` chooses on a host of the other kind (float32 where this one computes in a half precision;
    the checkpoint's half precision where this one widened it to float32); None when ``auto`` has one choice only."""
    name, native_name = str(dtype).removeprefix("torch."), str(native).removeprefix("torch.")
    if name != "float32":
        return "float32"
    return native_name if native_name != "float32" else None


def spec_dtype(wanted: str, dtype: Any, native: Any) -> str:
    """The dtype as a reference key: ``auto`` unless the user chose a dtype other than the checkpoint's.

    Keying the host-dependent choice of ``auto`` would make the shipped references, recorded on a
    bfloat16-capable CPU, unreachable on any other; the dtype actually computed in is reported as
    ``torch_dtype`` and keys the generation cache."""
    if wanted == "auto" or dtype == native:
        return "auto"
    return str(dtype).removeprefix("torch.")


CPU_ROWS, CPU_TOKENS = 64, 16384  # a CPU's batches: wider ones buy nothing once the matrix products are large
CUDA_ROWS = 256  # a GPU's rows per batch (each task's max_batch_size caps it further)
CUDA_MAX_TOKENS = 262144
GIB = 1 << 30


@dataclass(frozen=True)
class BatchBudget:
    """The limits of one forward call and where they came from (``backend.details.batch_budget``)."""

    rows: int
    tokens: int
    cache_tokens: Optional[int]  # KV positions one batch may hold; None: not counted (a CPU's memory is the host's)
    source: str

    def describe(self) -> str:
        cache = "" if self.cache_tokens is None else f", {self.cache_tokens} KV positions"
        return f"{self.rows} rows, {self.tokens} tokens{cache} ({self.source})"


@dataclass(frozen=True)
class ModelShape:
    """What a token costs in memory: its KV cache entries, a layer's activations and its logits."""

    weight_bytes: int
    kv_bytes_per_token: int
    activation_bytes_per_token: int


def model_shape(model: Any, dtype_bytes: int) -> ModelShape:
    """:class:`ModelShape` of a loaded transformers causal LM (its config and parameters)."""
    cfg = model.config
    hidden = int(cfg.hidden_size)
    heads = int(cfg.num_attention_heads)
    kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(cfg, "head_dim", None) or hidden // heads)
    intermediate = int(getattr(cfg, "intermediate_size", None) or 4 * hidden)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    # one layer's live activations (residual stream, q/k/v/o, the MLP's gate/up/down) in the compute dtype, and the
    # position's logits (the model's dtype, a float32 copy and its log-softmax) when it is scored
    activations = dtype_bytes * (8 * hidden + 3 * intermediate) + 10 * int(cfg.vocab_size)
    return ModelShape(weights, 2 * int(cfg.num_hidden_layers) * kv_heads * head_dim * dtype_bytes, activations)


def cuda_budget(total_bytes: int, shape: ModelShape, rows: Optional[int], tokens: Optional[int]) -> BatchBudget:
    """Batch limits for a GPU of ``total_bytes``: of 90% of its memory less the weights and 1 GiB (context,
    allocator), 60% for the batch's KV caches and 30% for its activations and logits; rows and tokens
    the user set are kept. Deterministic for a card and a model, so a result does not depend on what
    else happened to be in memory."""
    free = max(int(0.9 * total_bytes) - shape.weight_bytes - GIB, GIB)
    cache = max(int(0.6 * free) // shape.kv_bytes_per_token, 1)
    fitted = min(max(int(0.3 * free) // shape.activation_bytes_per_token, CPU_TOKENS), CUDA_MAX_TOKENS)
    return BatchBudget(rows or CUDA_ROWS, tokens or fitted, cache,
                       f"sized from {total_bytes / GIB:.1f} GiB of GPU memory")


def batch_budget(torch: Any, device: Any, model: Any, dtype: Any, rows: Optional[int],
                 tokens: Optional[int]) -> BatchBudget:
    """``backend.batch_size`` / ``max_batch_tokens`` resolved: as set, else a CPU's defaults or
    :func:`cuda_budget` from the device's total memory."""
    if device.type != "cuda":
        source = "set" if rows and tokens else "CPU defaults"
        return BatchBudget(rows or CPU_ROWS, tokens or CPU_TOKENS, None, source)
    total = torch.cuda.get_device_properties(device).total_memory
    return cuda_budget(total, model_shape(model, torch.tensor([], dtype=dtype).element_size()), rows, tokens)
