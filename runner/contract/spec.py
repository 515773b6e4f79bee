"""The accuracy spec: what a reference is keyed on.

It mirrors TensorRT-LLM's accuracy-suite spec keys, so reference YAML files from that
repository drop in unchanged. ``dtype`` defaults to ``"auto"`` (the checkpoint's own dtype);
the other keys default to ``None``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

SPEC_KEYS = ("dtype", "quant_algo", "kv_cache_quant_algo", "spec_dec_algo", "extra_acc_spec")


@dataclass(frozen=True)
class AccuracySpec:
    dtype: str = "auto"
    quant_algo: str | None = None
    kv_cache_quant_algo: str | None = None
    spec_dec_algo: str | None = None
    extra_acc_spec: str | None = None

    def as_query(self) -> dict[str, str | None]:
        """All spec keys with their values, as matched against reference entries."""
        return asdict(self)

    def describe(self) -> str:
        """Short human form listing only the keys that differ from the default spec."""
        parts = [f"{k}={v}" for k, v in asdict(self).items() if v != AccuracySpec.__dataclass_fields__[k].default]
        return ", ".join(parts) if parts else "default (dtype=auto, no quantization)"

    @staticmethod
    def default_for(key: str) -> str | None:
        """Value an entry has for a key it does not mention (TensorRT-LLM's rule)."""
        return "auto" if key == "dtype" else None
