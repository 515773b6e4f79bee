"""Family-wise control for a sweep's verdicts: many jobs, one false-alarm budget.

Which claims need it (docs/statistics.md, "Sweeps"): a sweep is NO-GO when *any* job shows a regression,
a union of the jobs' claims, so the NO-GO claims are one family and are corrected (``sweep.correction``).
A sweep is GO only when *every* job shows GO: an intersection-union test (Berger 1982), whose size is at
most the largest alpha of its parts without any adjustment, so the GO claims are left alone by default
(``sweep.go_correction=none``). A per-job GO used to *pick* among alternatives ("which of these builds is
within tolerance?") is a union of claims again: ``sweep.go_correction=holm`` corrects it.

Each statistical test of a job (its accuracy gate, and extra gates such as SCORE's consistency
rate) has a one-sided p-value and its own level ``alpha_i``: the task's alpha, as TensorRT-LLM
sets it (0.002 for CNN/DailyMail and HumanEval, 0.01 for perplexity, 0.05 for most). A job rejects
its null hypothesis when ``p < alpha``; the sweep uses the same strict boundary.

The correction works on the normalised values ``u_i = p_i / alpha_i`` (a test rejects alone when
``u_i < 1``):

- ``holm`` (default): Holm's step-down procedure on ``u``: in increasing order of ``u``, the
  k-th of m tests rejects when ``u < 1 / (m - k + 1)`` and every earlier one rejected. Under any
  dependence the chance of any false alarm is at most the mean alpha of the true null hypotheses
  (so at most the largest alpha, and exactly ``alpha`` when all tests share one);
- ``bh``: Benjamini-Hochberg's step-up procedure on ``u`` (false discovery rate, independent or
  positively dependent tests); more power, weaker guarantee;
- ``none``: every test at its own alpha: exactly each job's own verdict.

With one alpha for all, these are the textbook procedures (statsmodels' ``multipletests`` gives
the same rejections; the tests check it); statsmodels has no per-test levels, hence the few lines
here. Adjusted p-values are reported on each test's own scale: ``p_adjusted = alpha_i * u_adj``,
rejected when ``p_adjusted < alpha_i``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from runner.contract.errors import ConfigError

CORRECTIONS = ("holm", "bh", "none")


@dataclass(frozen=True)
class Adjusted:
    """Adjusted p-values and the rejections at each test's alpha, in input order."""

    method: str
    alphas: list[float]
    p_adjusted: list[float]
    reject: list[bool]


def validate(method: str, alpha: float | None, where: str = "sweep.correction") -> None:
    """Raise :class:`ConfigError` for a correction (at ``where``) or a sweep alpha that cannot be used."""
    if method not in CORRECTIONS:
        raise ConfigError("unknown multiple-testing correction", where=where, given=method,
                          allowed=", ".join(CORRECTIONS))
    if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha < 1.0):
        raise ConfigError("the sweep's alpha must lie strictly between 0 and 1", where="sweep.alpha", given=alpha,
                          allowed="null (each job at its own task's alpha) or a probability",
                          fix="leave sweep.alpha=null to keep the tasks' alphas")


def _holm(u: list[float]) -> list[float]:
    m = len(u)
    order = sorted(range(m), key=lambda i: u[i])
    adjusted = [0.0] * m
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, (m - k) * u[i])
        adjusted[i] = running
    return adjusted


def _bh(u: list[float]) -> list[float]:
    m = len(u)
    order = sorted(range(m), key=lambda i: u[i], reverse=True)
    adjusted = [0.0] * m
    running = float("inf")
    for pos, i in enumerate(order):
        rank = m - pos
        running = min(running, m * u[i] / rank)
        adjusted[i] = running
    return adjusted


def adjust(p_values: Sequence[float], alphas: Sequence[float], method: str = "holm") -> Adjusted:
    """Adjust ``p_values`` (each tested at its own ``alphas[i]``) for multiplicity; an empty family rejects nothing."""
    validate(method, None)
    pvals = [float(p) for p in p_values]
    levels = [float(a) for a in alphas]
    if len(pvals) != len(levels):
        raise ValueError(f"{len(pvals)} p-values but {len(levels)} alphas")
    if not pvals:
        return Adjusted(method, [], [], [])
    u = [p / a for p, a in zip(pvals, levels)]
    u_adj = {"holm": _holm, "bh": _bh, "none": list}[method](u)
    p_adj = [min(1.0, a * v) for a, v in zip(levels, u_adj)]
    return Adjusted(method, levels, p_adj, [v < 1.0 for v in u_adj])
