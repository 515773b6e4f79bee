"""Family-wise control for a sweep's verdicts: many jobs, one false-alarm budget.

Each job's one-sided p-value is the chance of a result this bad if that configuration had not
regressed. Testing 40 configurations at alpha = 0.05 each raises a false alarm somewhere far more
often than 5% of the time; a sweep verdict therefore adjusts the p-values with statsmodels'
``multipletests`` (the field's reference implementation):

- ``holm`` (default): Holm's step-down method, controls the family-wise error rate (the chance of
  any false alarm) at ``alpha`` under any dependence between the jobs;
- ``bh``: Benjamini-Hochberg, controls the false discovery rate (the expected share of false alarms
  among the flagged jobs) at ``alpha``; more power, weaker guarantee;
- ``none``: every job at ``alpha`` on its own (what each job's own verdict says).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from runner.errors import ConfigError

CORRECTIONS = {"holm": "holm", "bh": "fdr_bh", "none": None}


@dataclass(frozen=True)
class Adjusted:
    """Adjusted p-values and the rejections (regressions flagged) at the family's alpha, in input order."""

    method: str
    alpha: float
    p_adjusted: list[float]
    reject: list[bool]


def validate(method: str, alpha: float) -> None:
    if method not in CORRECTIONS:
        raise ConfigError("unknown multiple-testing correction", where="sweep.correction", given=method,
                          allowed=", ".join(CORRECTIONS))
    if not 0.0 < alpha < 1.0:
        raise ConfigError("the sweep's alpha must lie strictly between 0 and 1", where="sweep.alpha", given=alpha)


def adjust(p_values: Sequence[float], method: str = "holm", alpha: float = 0.05) -> Adjusted:
    """Adjust ``p_values`` for multiplicity; an empty family rejects nothing."""
    validate(method, alpha)
    pvals = [float(p) for p in p_values]
    if not pvals:
        return Adjusted(method, alpha, [], [])
    if CORRECTIONS[method] is None:
        return Adjusted(method, alpha, pvals, [p <= alpha for p in pvals])
    from statsmodels.stats.multitest import multipletests

    reject, corrected, _, _ = multipletests(pvals, alpha=alpha, method=CORRECTIONS[method])
    return Adjusted(method, alpha, [float(p) for p in corrected], [bool(r) for r in reject])
