"""The second gate of a SCORE job: the consistency rate against its registered reference.

The accuracy gate is the core runner's (TensorRT-LLM's threshold, n = questions). Consistency is a
ratio over question pairs, not a mean of independent 0/100 scores, so its spread comes from the
question-level bootstrap instead of a sigma: with standard errors ``se_new`` (this run) and
``se_ref`` (recorded with the reference, else taken equal to ``se_new``, as the core test assumes
equal spreads), the difference has standard deviation ``s = sqrt(se_new^2 + se_ref^2)``; the run
fails when CR < reference + z(alpha) s, and theta = -(z(alpha) + z(beta)) s is the smallest drop
caught with probability 1 - beta. Same one-sided test, same alpha and beta as the accuracy gate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Mapping

z = NormalDist().inv_cdf  # the normal quantile and CDF of TensorRT-LLM's threshold rule
phi = NormalDist().cdf



@dataclass(frozen=True)
class ConsistencyGate:
    metric: str
    score: float
    reference: float | None  # None: the reference entry registers no consistency value
    se_new: float
    se_ref: float | None
    alpha: float
    beta: float

    @property
    def spread(self) -> float:
        se_ref = self.se_new if self.se_ref is None else self.se_ref
        return math.sqrt(self.se_new ** 2 + se_ref ** 2)

    @property
    def checked(self) -> bool:
        return self.reference is not None and math.isfinite(self.spread)

    @property
    def threshold(self) -> float:
        return float("nan") if not self.checked else self.reference + z(self.alpha) * self.spread  # type: ignore[operator]

    @property
    def theta(self) -> float:
        return -(z(self.alpha) + z(self.beta)) * self.spread

    @property
    def passed(self) -> bool:
        return not self.checked or self.score >= self.threshold

    @property
    def p_value(self) -> float:
        if not self.checked or self.spread == 0:
            return float("nan")
        return phi((self.score - self.reference) / self.spread)  # type: ignore[operator]

    def render(self) -> str:
        rule = "-" * 64
        if self.reference is None:
            return "\n".join([rule, f"Consistency gate: {self.metric} = {self.score:.3f}: not checked "
                              f"(the reference entry registers no '{self.metric}')", rule])
        if not self.checked:
            return "\n".join([rule, f"Consistency gate: {self.metric} = {self.score:.3f}: not checked "
                              "(no bootstrap spread: fewer than two questions)", rule])
        se_ref = "same as new" if self.se_ref is None else f"{self.se_ref:.3f}"
        lines = [
            rule,
            f"Consistency gate: {self.metric} (higher is better), question-level bootstrap",
            rule,
            f"  reference    {self.reference:10.3f}",
            f"  score        {self.score:10.3f}",
            f"  se new       {self.se_new:10.3f}   bootstrap standard error of this run",
            f"  se ref       {se_ref:>10}   recorded with the reference",
            f"  theta        {self.theta:10.3f}   smallest drop caught with probability 1 - beta",
            f"  threshold    {self.threshold:10.3f}   reference - {abs(z(self.alpha)):.4f} x sqrt(se_new^2 + se_ref^2)",
            f"  margin       {self.score - self.threshold:+10.3f}",
            f"  p-value      {self.p_value:10.4f}",
            rule,
            f"consistency gate: {'no regression shown' if self.passed else 'regression shown (NO-GO)'}",
            rule,
        ]
        return "\n".join(lines)

    def metrics(self) -> dict[str, float]:
        if not self.checked:
            return {f"{self.metric}_gate_checked": 0.0}
        return {f"{self.metric}_reference": float(self.reference), f"{self.metric}_threshold": self.threshold,  # type: ignore[arg-type]
                f"{self.metric}_theta": self.theta, f"{self.metric}_p_value": self.p_value,
                f"{self.metric}_passed": float(self.passed), f"{self.metric}_gate_checked": 1.0}


def reference_entry(reference: Any) -> Mapping[str, Any]:
    """The raw YAML entry behind a matched reference (its other keys: the consistency value and its se)."""
    from ruamel.yaml import YAML

    data = YAML(typ="safe", pure=True).load(reference.path.read_text(encoding="utf-8")) or {}
    return data[reference.model][reference.index]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def consistency_gate(metric: str, score: float, se_new: float, reference: Any) -> ConsistencyGate:
    entry = reference_entry(reference)
    return ConsistencyGate(metric, score, _number(entry.get(metric)), se_new, _number(entry.get(f"{metric}_se")),
                           reference.params.alpha, reference.params.beta)
