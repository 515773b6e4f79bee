"""The acceptance-length gate of a speculative-decoding run: a deterministic floor, as upstream applies it.

TensorRT-LLM's accuracy suite (``assert_acceptance_length`` in ``accuracy_core.py``) fails a
speculative-decoding test whose mean acceptance length falls below the registered ``min_al`` (written as
0.95 x ``ref_al`` when an entry is populated). There is no p-value: like an explicit threshold, the rule
holds or fails, so in a sweep it keeps its own verdict (no multiplicity correction). The gate enters the
job's three-way verdict as SCORE's consistency gate does: it can only make it NO-GO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_SHARE = 0.95
"""upstream's floor as a share of the reference, used when an entry registers ``ref_al`` without ``min_al``."""


def floor(ref_al: float | None, min_al: float | None) -> float | None:
    """The floor a run must reach: the entry's ``min_al``, else 0.95 x ``ref_al``, else none."""
    if min_al is not None:
        return float(min_al)
    return None if ref_al is None else MIN_SHARE * float(ref_al)


@dataclass(frozen=True)
class AcceptanceGate:
    """``value``: the run's mean acceptance length (None: no speculative step was observed)."""

    key: str
    value: float | None
    ref_al: float | None
    min_al: float | None
    metric: str = "acceptance_length"
    alpha: float = float("nan")  # a deterministic rule tests at no level
    rule: str = "explicit_threshold"

    @property
    def threshold(self) -> float | None:
        return floor(self.ref_al, self.min_al)

    @property
    def checked(self) -> bool:
        return self.value is not None and self.threshold is not None and math.isfinite(self.value)

    @property
    def passed(self) -> bool:
        """Fails only when checked and below the floor; a run whose length could not be read is not judged
        here (:attr:`render` says why, and the job notes it)."""
        return not self.checked or self.value >= self.threshold  # type: ignore[operator]

    @property
    def p_value(self) -> float:
        return float("nan")

    def render(self) -> str:
        rule = "-" * 64
        head = f"Acceptance-length gate ({self.key})"
        if self.threshold is None:
            return "\n".join([rule, f"{head}: not checked (the entry registers neither min_al nor ref_al)", rule])
        if not self.checked:
            return "\n".join([rule, f"{head}: not checked (no speculative-decoding step was observed: the answers "
                              "came from the generation cache, or the backend reported no iteration statistics)", rule])
        ref = "null" if self.ref_al is None else f"{self.ref_al:.3f}"
        return "\n".join([
            rule, head, rule,
            f"  reference    {ref:>10}   ref_al",
            f"  floor        {self.threshold:10.3f}   min_al (upstream: {MIN_SHARE:g} x ref_al)",
            f"  observed     {self.value:10.3f}   accepted draft tokens + 1 per speculative step, per step",
            rule,
            f"acceptance-length gate: {'holds' if self.passed else 'below the floor (NO-GO)'}",
            rule,
        ])

    def metrics(self) -> dict[str, float]:
        out = {"acceptance_length_gate_checked": float(self.checked)}
        if self.value is not None:
            out["acceptance_length"] = float(self.value)
        if self.checked:
            out |= {"acceptance_length_min": float(self.threshold),  # type: ignore[arg-type]
                    "acceptance_length_passed": float(self.passed)}
            if self.ref_al is not None:
                out["acceptance_length_reference"] = float(self.ref_al)
        return out
