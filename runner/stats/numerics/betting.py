"""A finite-sample test for the mean of bounded values, by betting (Waudby-Smith & Ramdas 2024).

Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting", JRSS-B 86(1):1-27
(arXiv:2010.09686). For values ``x_i`` in [0, 1] and a candidate mean ``m``, the capital of a gambler who
bets a predictable fraction ``lam_i >= 0`` on "the mean is above m" is

    K_t(m) = prod_{i <= t} (1 + lam_i (x_i - m)).

When the true mean is at most ``m``, K is a nonnegative supermartingale, so by Ville's inequality it ever
reaches ``1 / alpha`` with probability at most ``alpha``: H0 "mean <= m" is rejected when ``max_t K_t(m) >=
1 / alpha``, ``p = min(1, 1 / max_t K_t(m))``. Nothing is assumed but independence and the bounds, so the
rate holds at any n, for sparse and skewed values alike. A one-sided claim uses one one-sided capital at the
full alpha (the paper's hedged capital splits alpha between two sides, for a two-sided interval).

The bets are the paper's predictable plug-in for a fixed n (its section 3 and the fixed-n tuning of section
5): ``lam_t = sqrt(2 log(1/alpha) / (n s2_{t-1}))`` with ``s2_t = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1)``
and ``mu_t = (1/2 + sum_{i<=t} x_i) / (t + 1)`` (the prior 1/4 is the largest variance on [0, 1]), truncated at
``c / m``. Any ``c < 1`` keeps every factor positive, hence the rate; a larger ``c`` bets more when the
plug-in asks for more than the cap, which is where the power is lost at small n (a 0-100 score's differences
span 200 points: at n = 100 and sd 10 the plug-in asks for about 2.4 times the largest bet allowed). The
paper suggests 1/2 to 3/4; ``c = 0.9`` (stats.betting_truncation) raised the GO rate at n = 100 from 0.05 to
0.14 and cost nothing on the sparse and skewed settings measured (docs/statistics.md). Each factor falls as
``m`` grows, so ``max_t K_t(m)`` does too: the lower confidence bound (the smallest ``m`` not rejected)
inverts the test.
"""

from __future__ import annotations

import math

TRUNCATION = 0.9  # c: the largest bet is c / m (stats.betting_truncation)


def check_truncation(c: float) -> float:
    """``c`` is a number strictly between 0 and 1 (at 1 a value at the bound would take all the capital)."""
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.0 < c < 1.0:
        raise ValueError(f"the betting truncation must be a number strictly between 0 and 1, got {c!r}")
    return float(c)


def _bets(x, alpha: float):  # noqa: ANN001, ANN202 - numpy arrays
    """The predictable plug-in bets before truncation, along the last axis (each uses the values before it)."""
    import numpy as np

    n = x.shape[-1]
    t = np.arange(1, n + 1)
    mu = (0.5 + np.cumsum(x, axis=-1)) / (t + 1)
    s2 = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1)
    s2_prev = np.concatenate((np.full(x.shape[:-1] + (1,), 0.25), s2[..., :-1]), axis=-1)
    return np.sqrt(2.0 * math.log(1.0 / alpha) / (n * s2_prev))


def _log_capitals(x, m: float, bets, truncation: float):  # noqa: ANN001, ANN202 - numpy arrays
    """``log max_t K_t(m)`` along the last axis, for ``0 < m < 1`` (at least 0: the capital starts at 1)."""
    import numpy as np

    lam = np.minimum(bets, truncation / m)
    with np.errstate(divide="ignore"):
        path = np.cumsum(np.log1p(lam * (x - m)), axis=-1)
    return np.maximum(0.0, path.max(axis=-1))


def log_capital(x, m: float, bets, truncation: float = TRUNCATION) -> float:  # noqa: ANN001 - numpy arrays
    """``log max_t K_t(m)`` for values ``x`` in [0, 1] and untruncated ``bets``."""
    import numpy as np

    if m <= 0.0:
        return math.inf if np.any(x > 0) else 0.0
    if m >= 1.0:
        return 0.0
    return float(_log_capitals(x, m, bets, truncation))


def upper_p(x, m: float, alpha: float, truncation: float = TRUNCATION) -> float:
    """p-value of H0 "the mean of ``x`` (values in [0, 1]) is at most ``m``" (the bets are tuned to ``alpha``)."""
    import numpy as np

    x = np.asarray(x, dtype=float)
    return min(1.0, math.exp(-log_capital(x, m, _bets(x, alpha), truncation)))


def rejects(samples, m: float, alpha: float, truncation: float = TRUNCATION):  # noqa: ANN001, ANN201 - numpy
    """For each row of ``samples`` (values in [0, 1]), whether the test rejects "mean <= m" at ``alpha``."""
    import numpy as np

    samples = np.asarray(samples, dtype=float)
    if m <= 0.0:
        return np.any(samples > 0, axis=-1)
    if m >= 1.0:
        return np.zeros(samples.shape[:-1], dtype=bool)
    return _log_capitals(samples, m, _bets(samples, alpha), truncation) > math.log(1.0 / alpha)  # as p < alpha


def lower_bound(x, alpha: float, truncation: float = TRUNCATION) -> float:
    """The smallest ``m`` in [0, 1] with ``upper_p(x, m) >= alpha``: a lower confidence bound at level 1 - alpha."""
    import numpy as np
    from scipy.optimize import brentq

    x = np.asarray(x, dtype=float)
    bets = _bets(x, alpha)
    level = math.log(1.0 / alpha)

    def excess(m: float) -> float:
        return log_capital(x, m, bets, truncation) - level

    top = float(x.max())  # at m = max(x) no bet gains: the capital stays below 1 / alpha
    if top <= 1e-15 or excess(1e-15) < 0:
        return 0.0
    return float(brentq(excess, 1e-15, top, xtol=1e-13, rtol=1e-15))
