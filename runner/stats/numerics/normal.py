"""The standard normal's quantile and distribution function: the one place every rule takes them from.

Pure and stdlib-only (``statistics.NormalDist``), so the planning CLI imports them in milliseconds."""

from __future__ import annotations

import math
from statistics import NormalDist



_STANDARD_NORMAL = NormalDist()


def z(p: float) -> float:
    """Inverse CDF of the standard normal: the quantile ``z`` with ``P(Z <= z) = p``."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a normal quantile needs 0 < p < 1, got {p!r}")
    return _STANDARD_NORMAL.inv_cdf(p)


def phi(x: float) -> float:
    """CDF of the standard normal (accepts +-inf)."""
    if math.isinf(x):
        return 1.0 if x > 0 else 0.0
    return _STANDARD_NORMAL.cdf(x)



def phi_erfc(x: float) -> float:
    if math.isinf(x):
        return 1.0 if x > 0 else 0.0
    return 0.5 * math.erfc(-x / math.sqrt(2.0))
