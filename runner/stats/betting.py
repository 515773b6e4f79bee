"""A finite-sample test for the mean of bounded values, by betting (Waudby-Smith & Ramdas 2024).

Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting", JRSS-B 86(1):1-27
(arXiv:2010.09686). For values ``x_i`` in [0, 1] and a candidate mean ``m``, the capital of a gambler who
bets a predictable fraction ``lam_i >= 0`` on "the mean is above m" is

    K_t(m) = prod_{i <= t} (1 + lam_i (x_i - m)).

When the true mean is at most ``m``, K is a nonnegative supermartingale, so by Ville's inequality it ever
reaches ``1 / alpha`` with probability at most ``alpha``: H0 "mean <= m" is rejected when ``max_t K_t(m) >=
1 / alpha``, ``p = min(1, 1 / max_t K_t(m))``. Nothing is assumed but independence and the bounds, so the
rate holds at any n, for sparse and skewed values alike; it holds at every look of a growing sample too.

The bets are the paper's predictable plug-in for a fixed n (its section 3 and the fixed-n tuning of section
5): ``lam_t = sqrt(2 log(1/alpha) / (n s2_{t-1}))`` with ``s2_t = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1)``
and ``mu_t = (1/2 + sum_{i<=t} x_i) / (t + 1)``, truncated at ``c / m`` (``c = 3/4``, the paper's choice), so
one value at the bound never takes all the capital. Each factor then falls as ``m`` grows, so
``max_t K_t(m)`` does too: the lower confidence bound (the smallest ``m`` not rejected) inverts the test.
"""

from __future__ import annotations

import math

TRUNCATION = 0.75  # c: the largest bet is c / m, the paper's recommended 1/2 to 3/4


def _bets(x, alpha: float):  # noqa: ANN001, ANN202 - numpy arrays
    """The predictable plug-in bets before truncation (each uses the values before it only)."""
    import numpy as np

    n = x.size
    t = np.arange(1, n + 1)
    mu = (0.5 + np.cumsum(x)) / (t + 1)
    s2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1)
    s2_prev = np.concatenate(([0.25], s2[:-1]))
    return np.sqrt(2.0 * math.log(1.0 / alpha) / (n * s2_prev))


def log_capital(x, m: float, bets) -> float:  # noqa: ANN001 - numpy arrays
    """``log max_t K_t(m)`` for values ``x`` in [0, 1] and untruncated ``bets``; ``-inf`` when the capital is lost."""
    import numpy as np

    if m <= 0.0:
        return math.inf if np.any(x > 0) else 0.0
    if m >= 1.0:
        return 0.0
    lam = np.minimum(bets, TRUNCATION / m)
    with np.errstate(divide="ignore"):
        path = np.cumsum(np.log1p(lam * (x - m)))
    return max(0.0, float(path.max()))


def upper_p(x, m: float, alpha: float) -> float:
    """p-value of H0 "the mean of ``x`` (values in [0, 1]) is at most ``m``" (the bets are tuned to ``alpha``)."""
    import numpy as np

    x = np.asarray(x, dtype=float)
    return min(1.0, math.exp(-log_capital(x, m, _bets(x, alpha))))


def lower_bound(x, alpha: float) -> float:
    """The smallest ``m`` in [0, 1] with ``upper_p(x, m) >= alpha``: a lower confidence bound at level 1 - alpha."""
    import numpy as np
    from scipy.optimize import brentq

    x = np.asarray(x, dtype=float)
    bets = _bets(x, alpha)
    level = math.log(1.0 / alpha)

    def excess(m: float) -> float:
        return log_capital(x, m, bets) - level

    top = float(x.max())  # at m = max(x) no bet gains: the capital stays below 1 / alpha
    if top <= 1e-15 or excess(1e-15) < 0:
        return 0.0
    return float(brentq(excess, 1e-15, top, xtol=1e-13, rtol=1e-15))
