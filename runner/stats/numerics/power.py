"""The power constant ``k = |z(alpha)| + |z(beta)|`` and the minimum detectable drop of McNemar's test under a
stated model of how a regression changes the answers (its planning lives in :mod:`runner.stats.planning.paired`)."""

from __future__ import annotations

import math

from runner.stats.data.hypothesis import check_prob
from runner.stats.numerics.normal import z



def power_constant(alpha: float, beta: float) -> float:
    check_prob("alpha", alpha)
    check_prob("beta", beta)
    return abs(z(alpha)) + abs(z(beta))


REGRESSION_MODELS = ("added", "split")
"""How a regression changes the answers, for planning a paired test.

``added`` (default): ``agreement`` is what a user measures between two *healthy* runs; its
disagreements ``d0 = 1 - agreement`` fall evenly both ways, and a regression of ``delta`` adds
``delta`` right-to-wrong flips on top: ``b = d0/2 + delta``, ``c = d0/2``, so the runs disagree on
``d0 + delta`` under the regression. ``split``: the agreement holds under the regression and the
drop only tilts the disagreements: ``b = (d + delta)/2``, ``c = (d - delta)/2``."""


def check_model(model: str) -> None:
    if model not in REGRESSION_MODELS:
        raise ValueError(f"model must be one of {REGRESSION_MODELS}, got {model!r}")


def binary_theta(n: int, discordance: float, alpha: float, beta: float, continuity: bool, model: str = "split") -> float:
    check_model(model)
    c = 100.0 / n if continuity else 0.0
    if model == "split":
        return power_constant(alpha, beta) * 100.0 * math.sqrt(discordance / n) + c
    za, zb = abs(z(alpha)), abs(z(beta))

    def excess(t: float) -> float:  # t - the drop detectable with discordance d0 + t (Connor 1987), in fractions
        psi = discordance + t
        return t - (za * math.sqrt(psi) + zb * math.sqrt(max(psi - t * t, 0.0))) / math.sqrt(n) - c / 100.0

    hi = 1.0 - discordance
    if hi <= 0 or excess(hi) < 0:
        return math.inf  # no drop this sample size can show
    lo = 0.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if excess(mid) < 0:
            lo = mid
        else:
            hi = mid
    return 100.0 * hi
