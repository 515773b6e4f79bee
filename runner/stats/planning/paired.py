"""Planning a paired test: its minimum detectable drop at n, the n for a target drop, and the exact
power of McNemar's test, under a stated model of how a regression changes the answers."""

from __future__ import annotations

import math

from runner.stats.numerics.cluster_variance import check_design_effect
from runner.stats.numerics.power import binary_theta, check_model, power_constant

PLANNING_AGREEMENTS = (0.90, 0.95, 0.98)
"""Agreement rates shown by ``python -m runner.plan --savings``."""


def _check_agreement(agreement: float) -> float:
    if isinstance(agreement, bool) or not isinstance(agreement, (int, float)) or not 0.0 <= agreement < 1.0:
        raise ValueError(
            f"agreement must be in [0, 1) (the fraction of samples both runs score the same), got {agreement!r}"
        )
    return 1.0 - float(agreement)


def paired_theta(n: int, agreement: float, alpha: float, beta: float, *, continuity: bool = True,
                 model: str = "added", design_effect: float = 1.0) -> float:
    """Smallest drop (0-100 points) McNemar's test catches with probability ``1 - beta``.

    ``split`` model: ``100 (k sqrt((1 - agreement) / n) + 1 / n)`` with ``k = |z(alpha)| + |z(beta)|``.
    ``added`` model (default, see :data:`REGRESSION_MODELS`): the ``t`` solving Connor's (1987)
    sample-size equation ``sqrt(n) t = |z(alpha)| sqrt(psi) + |z(beta)| sqrt(psi - t^2)`` with the
    discordance ``psi = 1 - agreement + t``, plus the same ``1 / n`` continuity term (left out with
    ``continuity=False``). Inf when no drop can be shown at this ``n``. A ``design_effect`` (clustered
    samples) takes the theta of ``n / design_effect`` independent samples.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a whole number >= 1, got {n!r}")
    deff = check_design_effect(design_effect)
    return binary_theta(n / deff if deff != 1 else n, _check_agreement(agreement), alpha, beta, continuity, model)


def paired_min_samples(
    target_theta: float, agreement: float, alpha: float, beta: float, *, continuity: bool = True,
    model: str = "added", design_effect: float = 1.0,
) -> int:
    """Smallest ``n`` whose :func:`paired_theta` is at most ``target_theta`` (0-100 points).

    The paired counterpart of :func:`runner.stats.numerics.ztest.min_samples_for_theta`. With a
    ``design_effect`` (clustered samples) it is ``ceil(design_effect * n)`` of the independent ``n``.
    """
    deff = check_design_effect(design_effect)
    if deff != 1:
        return math.ceil(deff * paired_min_samples(target_theta, agreement, alpha, beta, continuity=continuity,
                                                   model=model))
    d = _check_agreement(agreement)
    check_model(model)
    k = power_constant(alpha, beta)
    if not (isinstance(target_theta, (int, float)) and target_theta > 0 and math.isfinite(target_theta)):
        raise ValueError(f"target theta must be a positive number of points, got {target_theta!r}")
    t = target_theta / 100.0
    psi = d if model == "split" else d + t
    # start from the normal-approximation n, then nudge against paired_theta itself
    n = max(1, math.ceil((k * math.sqrt(psi) / t) ** 2)) if psi > 0 else 1
    while n > 1 and binary_theta(n - 1, d, alpha, beta, continuity, model) <= target_theta:
        n -= 1
    while binary_theta(n, d, alpha, beta, continuity, model) > target_theta:
        n += 1
    return n


def paired_feasible(theta: float, agreement: float, model: str = "added") -> bool:
    """Whether a drop of ``theta`` points fits the model at ``agreement``.

    ``split``: each point of drop is at least one percent of answers flipped, so ``theta <= 100 *
    (1 - agreement)`` is needed. ``added``: the flips come on top of the agreement, so any drop up to
    the agreeing share fits."""
    d = _check_agreement(agreement)
    check_model(model)
    return theta <= 100.0 * (d if model == "split" else 1.0 - d) + 1e-9


def mcnemar_power(n: int, agreement: float, drop: float, alpha: float, model: str = "added") -> float:
    """Exact power of McNemar's one-sided exact test at ``n`` for a true ``drop`` (points) under ``model``.

    The number of discordant samples is ``Bin(n, b + c)``; given ``m`` of them, ``b ~ Bin(m, b / (b + c))``,
    and the test flags a regression when ``P(X >= b) < alpha`` for ``X ~ Bin(m, 1/2)``."""
    import numpy as np
    from scipy import stats

    d = _check_agreement(agreement)
    check_model(model)
    delta = drop / 100.0
    b, c = ((d + delta) / 2, (d - delta) / 2) if model == "split" else (d / 2 + delta, d / 2)
    if c < -1e-12 or b + c > 1 + 1e-12:
        raise ValueError(f"a drop of {drop:g} points does not fit agreement {agreement:g} under the {model} model")
    psi = b + c
    m = np.arange(n + 1)
    # smallest b with P(X >= b) < alpha: isf gives k with P(X > k) <= alpha; step up where equality holds
    crit = stats.binom.isf(alpha, m, 0.5) + 1
    crit = np.where(stats.binom.sf(crit - 1, m, 0.5) < alpha, crit, crit + 1)
    reject_given_m = stats.binom.sf(crit - 1, m, b / psi if psi > 0 else 0.0)
    return float(np.sum(stats.binom.pmf(m, n, psi) * reject_given_m))
