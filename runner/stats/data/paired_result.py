"""The outcome of a paired test and how it reads: the fields every report, JSON and MLflow entry
take from, the gate rule that turns a p-value into pass or fail, and the printed block."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from runner.stats.data.hypothesis import check_prob


def min_discordant_to_reject(alpha: float) -> int:
    """Fewest discordant samples with which the exact test can flag a regression at all.

    With ``m`` discordant samples the smallest p-value is ``0.5^m`` (all of them lost), so
    ``0.5^m < alpha`` is needed: 5 for alpha 0.05.
    """
    check_prob("alpha", alpha)
    m = 0
    while 0.5**m >= alpha:
        m += 1
    return m


@dataclass(frozen=True)
class BettingSample:
    """What the betting test decided on, for the advice that resamples it: the differences new - reference,
    the scores' range (the differences lie within +-``width``), the truncation, and the seed of the advice's resamples
    (the verdict's order is fixed by the sample ids: runner.stats.numerics.betting_order)."""

    differences: tuple[float, ...]
    width: float
    truncation: float
    seed: int


@dataclass(frozen=True)
class PairedResult:
    """The outcome of a paired test, in metric units (0-100 scale).

    ``p_value`` belongs to the gate's null hypothesis (``gate``: regression, H0 drop <= tolerance;
    noninferiority, H0 drop >= tolerance); the gate's H0 is rejected when ``p < alpha``."""

    method: str
    n: int
    mean_diff: float  # new - reference, metric units, whatever the direction
    p_value: float
    passed: bool
    alpha: float
    beta: float
    higher_is_better: bool
    theta_paired: float  # inf when the data cannot support any detection (see render)
    reference_mean: float
    new_mean: float
    discordant: tuple[int, int] | None = None  # (b, c) for binary scores
    discordance_rate: float | None = None  # (b + c) / n for binary scores
    sd_diff: float | None = None  # standard deviation of the differences, continuous scores
    ci: tuple[float, float] | None = None  # two-sided (1 - 2 alpha) interval for new - reference
    ci_method: str = ""
    tolerance: float = 0.0
    gate: str = "regression"
    design_effect: Any = None  # runner.stats.numerics.cluster_variance.DesignEffect when a clustered test decided
    pooled: bool = False  # a corpus metric: each side's figure pools the samples (not their mean)
    pinned: float = 0.0  # how far (metric units) pinning moved the bound that inverts this test onto its side
    betting: BettingSample | None = field(default=None, repr=False, compare=False)  # what the betting test saw
    withheld: str = ""  # why the rule withheld the claim its p-value showed ("": not withheld)

    @classmethod
    def gated(cls, p_value: float, alpha: float, beta: float, higher_is_better: bool, gate: str, tolerance: float,
              **fields: object) -> "PairedResult":
        """A result whose ``passed`` follows the gate: the regression gate passes when its H0 stands
        (``p >= alpha``), the non-inferiority gate when its H0 is rejected (``p < alpha``)."""
        rejected = p_value < alpha
        return cls(p_value=p_value, passed=not rejected if gate == "regression" else rejected, alpha=float(alpha),
                   beta=float(beta), higher_is_better=bool(higher_is_better), tolerance=float(tolerance), gate=gate,
                   **fields)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, object]:
        """Flat, JSON-friendly form (``theta_paired`` is ``None`` when it is undefined)."""
        return {
            "method": self.method,
            "n": self.n,
            "mean_diff": self.mean_diff,
            "p_value": self.p_value,
            "passed": self.passed,
            "alpha": self.alpha,
            "beta": self.beta,
            "higher_is_better": self.higher_is_better,
            "theta_paired": self.theta_paired if math.isfinite(self.theta_paired) else None,
            "reference_mean": self.reference_mean,
            "new_mean": self.new_mean,
            "discordant_b": self.discordant[0] if self.discordant else None,
            "discordant_c": self.discordant[1] if self.discordant else None,
            "discordance_rate": self.discordance_rate,
            "sd_diff": self.sd_diff,
            "ci_low": self.ci[0] if self.ci else None,
            "ci_high": self.ci[1] if self.ci else None,
            "ci_method": self.ci_method,
            "tolerance": self.tolerance,
            "gate": self.gate,
            "clusters": self.design_effect.clusters if self.design_effect is not None else None,
            "design_effect": self.design_effect.applied if self.design_effect is not None else None,
        }

    def render(self) -> str:
        """A short block to print next to the unpaired report."""
        direction = "higher is better" if self.higher_is_better else "lower is better"
        rule = "-" * 64
        lines = [
            rule,
            f"Paired test: {self.method} ({direction}), same samples in both runs",
            rule,
            f"  paired n     {self.n:10d}   samples scored by both runs",
            f"  reference    {self.reference_mean:10.3f}   "
            + ("corpus metric over those samples" if self.pooled else "mean on those samples"),
            f"  new          {self.new_mean:10.3f}",
            f"  difference   {self.mean_diff:+10.3f}   new - reference",
        ]
        if self.ci is not None:
            lines.append(f"  {1 - 2 * self.alpha:.0%} CI       [{self.ci[0]:+.3f}, {self.ci[1]:+.3f}]   {self.ci_method}")
        if self.discordant is not None:
            b, c = self.discordant
            lines.append(
                f"  discordant   {f'b={b} c={c}':>10}   reference right & new wrong (b), the reverse (c); "
                f"{self.discordance_rate:.1%} of samples"
            )
        if self.design_effect is not None:
            lines.append(f"  clusters     {self.design_effect.clusters:10d}   by {self.design_effect.key}; design effect "
                         f"{self.design_effect.applied:.3f} (cluster-robust standard error)")
        if self.sd_diff is not None:
            lines.append(f"  sd(diff)     {self.sd_diff:10.3f}   " + (
                "bootstrap standard error of the difference x sqrt(n)" if self.pooled
                else "standard deviation of the per-sample differences"))
        if math.isfinite(self.theta_paired):
            lines.append(
                f"  theta        {self.theta_paired:10.3f}   smallest regression caught with probability "
                f"{1 - self.beta:.0%} by this paired test"
            )
        else:
            lines.append(
                f"  theta        {'undefined':>10}   fewer than {min_discordant_to_reject(self.alpha)} "
                "disagreements: the exact test cannot flag any regression"
            )
        lines.append(f"  p-value      {self.p_value:10.4f}   {_p_meaning(self.gate, self.tolerance)}")
        lines.append(rule)
        if self.withheld:
            lines.append(f"paired test: no claim - its p-value is below {self.alpha:g}, but the claim is withheld: "
                         f"{self.withheld} (the notes say why).")
        elif self.passed:
            lines.append("paired test: no regression shown - " + (
                f"the {'disagreements are' if self.discordant is not None else 'difference is'} within what chance "
                "explains." if self.gate == "regression"
                else f"the data show the drop is smaller than the tolerance (p < {self.alpha:g})."))
        else:
            lines.append("paired test: regression shown - " + (
                f"on the same samples, the new run loses more than chance explains (p < {self.alpha:g})."
                if self.gate == "regression" else
                f"the data do not show the drop is smaller than the tolerance (p >= {self.alpha:g})."))
        lines.append(rule)
        return "\n".join(lines)


def _p_meaning(gate: str, tolerance: float) -> str:
    if gate == "regression":
        return ("chance of a result this bad if nothing regressed" if not tolerance
                else f"chance of a result this bad if the drop were at most {tolerance:g}")
    return f"chance of a result this good if the drop were {tolerance:g} or more"

