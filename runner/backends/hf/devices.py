"""Where and in which precision the hf backend computes: the device asked for, the dtype chosen for
the host, and the dtype as it enters the reference key.

``backend.dtype=auto`` is one protocol on every host: the checkpoint's precision, widened to
float32 on a CPU without bfloat16 arithmetic (an exact upcast of the weights, chosen for speed).
torch is passed in by the caller, which imported it on entry.
"""

from __future__ import annotations

import platform
from typing import Any

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


def spec_dtype(wanted: str, dtype: Any, native: Any) -> str:
    """The dtype as a reference key: ``auto`` unless the user chose a dtype other than the checkpoint's.

    Keying the host-dependent choice of ``auto`` would make the shipped references, recorded on a
    bfloat16-capable CPU, unreachable on any other; the dtype actually computed in is reported as
    ``torch_dtype`` and keys the generation cache."""
    if wanted == "auto" or dtype == native:
        return "auto"
    return str(dtype).removeprefix("torch.")
