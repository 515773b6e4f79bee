"""A look of a sequential or extendable job: its statistic ``Z_k`` and information from the job's decision on a
prefix of the samples (the claims its repeated interval shows: :func:`runner.stats.conclusion.look_claims`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from runner.stats.numerics.paired_binomial.tango import restricted_mle, tango_statistic



KINDS = ("unpaired", "mcnemar", "paired_mean")


def look_sizes(fractions: list[float], n_max: int) -> list[int]:
    """Sample counts of the looks: prefixes of the subset, increasing, the last ``n_max``."""
    sizes: list[int] = []
    for f in fractions:
        n = min(n_max, max(1, math.ceil(f * n_max - 1e-9)))
        if not sizes or n > sizes[-1]:
            sizes.append(n)
    if sizes[-1] != n_max:
        sizes.append(n_max)
    return sizes


@dataclass
class Look:
    n: int
    z: float | None  # None: no information at this look (it tests nothing)
    info: float  # raw information: 1 / variance (unpaired), discordant pairs, or samples
    estimate: float  # new - reference, metric units
    se: float  # its standard error, metric units
    efficacy: float = math.inf
    futility: float = -math.inf

    def to_dict(self) -> dict[str, Any]:
        fin = (lambda v: v if v is not None and math.isfinite(v) else None)  # noqa: E731
        return {"n": self.n, "z": fin(self.z), "efficacy": fin(self.efficacy), "futility": fin(self.futility),
                "estimate": self.estimate, "se": self.se}


def tested_looks(looks: list[Look]) -> list[Look]:
    """The looks that test something: a statistic and more information than every earlier look."""
    out, prev = [], 0.0
    for lk in looks:
        if lk.z is not None and lk.info > prev:
            out.append(lk)
            prev = lk.info
    return out


def statistic(decision: Any, n_k: int, n_max: int) -> tuple[str, Look]:
    """``Z_k`` and its information from the job's decision on the first ``n_k`` samples."""
    v = decision.verdict
    sign = 1.0 if v.params.higher_is_better else -1.0
    p = decision.paired
    if decision.rule == "unpaired":
        var = v.params.sigma ** 2 * (1.0 / n_k + 1.0 / n_max)
        se = math.sqrt(var)
        z_k = -(sign * v.difference + v.tolerance) / se if se > 0 else None
        return "unpaired", Look(n_k, z_k, 1.0 / var if var > 0 else 0.0, v.difference, se)
    if p.discordant is not None:
        b, c = p.discordant
        m = b + c
        z_k, info = _tango_at_margin(b, c, n_k, float(getattr(p, "tolerance", 0.0) or 0.0) / 100.0)
        return "mcnemar", Look(n_k, z_k, info, p.mean_diff, 100.0 * math.sqrt(m) / n_k)
    se = (p.sd_diff or 0.0) / math.sqrt(n_k)
    z_k = -(sign * p.mean_diff + p.tolerance) / se if se > 0 else None
    return "paired_mean", Look(n_k, z_k, float(n_k), p.mean_diff, se)


def _tango_at_margin(b: int, c: int, n: int, margin: float) -> tuple[float | None, float]:
    """Tango's statistic for H0 ``drop <= margin`` (large: a drop beyond it) and its information ``n v``."""

    if margin == 0.0:
        m = b + c
        return ((b - c) / math.sqrt(m) if m else None), float(m)
    q_b, q_c = restricted_mle(b, c, n, -margin)
    info = n * max(q_b + q_c - margin * margin, 0.0)
    return (-tango_statistic(b, c, n, -margin) if info > 0 else None), info
