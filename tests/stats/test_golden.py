"""Golden values from outside the project's code: each binary rule and the betting capital process checked against
an independent computation written here from the papers' formulas (scipy's root finders, optimisers and binomial
tail as the only machinery), never against the code's own output.

* McNemar's exact one-sided p-value: scipy's exact binomial test on the discordant pairs.
* Tango's (1998) score interval for a difference of paired proportions: the restricted maximum likelihood of the
  discordant cells found by a numerical optimiser, the score statistic ``(c - b - n delta) / sqrt(n (2 q_b + delta
  (1 - delta)))`` of the paper's section 2, its roots in ``delta`` found by brentq; tables with an off-diagonal zero
  cell included (the case Tango's interval was built for).
* The exact unconditional test of paired proportions (Berger & Sidik 2003's supremum over the nuisance
  parameter): the trinomial tail of the tables at least as extreme as the observed one by Tango's statistic,
  maximised over a fine grid of the discordance.
* The betting capital process (Waudby-Smith & Ramdas 2024, predictable plug-in bets truncated at ``c / m``): the
  product ``prod (1 + lambda_i (x_i - m))`` in a plain loop, its running maximum, and the p-value ``1 / max K_t``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from runner.stats.numerics import betting
from runner.stats.numerics.paired_binomial.tango import go_p_at, tango_bounds
from runner.stats.rules.paired_binary import mcnemar_exact

Z95 = float(stats.norm.ppf(0.95))


def _table(b: int, c: int, n: int) -> tuple[list[float], list[float]]:
    """Per-sample 0/100 scores with ``b`` samples lost by the new run and ``c`` won."""
    ref = [100.0] * b + [0.0] * c + [100.0] * (n - b - c)
    new = [0.0] * b + [100.0] * c + [100.0] * (n - b - c)
    return ref, new


@pytest.mark.parametrize(("b", "c", "n"), [(10, 0, 100), (12, 3, 57), (7, 7, 40), (0, 0, 20), (30, 18, 400)])
def test_mcnemar_exact_is_scipys_binomial_test(b: int, c: int, n: int) -> None:
    ref, new = _table(b, c, n)
    found = mcnemar_exact(ref, new, 0.05, 0.2).p_value
    expected = stats.binomtest(b, b + c, 0.5, alternative="greater").pvalue if b + c else 1.0
    assert found == pytest.approx(expected, rel=1e-12)


def _q_b(b: int, c: int, n: int, delta: float) -> float:
    """The restricted MLE of the loss cell under ``q_c - q_b = delta``, by numerical maximisation."""
    lo, hi = max(0.0, -delta), (1.0 - delta) / 2.0
    if hi - lo < 1e-15:
        return lo

    def minus_loglik(q: float) -> float:
        terms = [(b, q), (c, q + delta), (n - b - c, 1.0 - 2.0 * q - delta)]
        return -sum(k * math.log(p) if k else 0.0 for k, p in terms if k or p > 0)

    res = optimize.minimize_scalar(minus_loglik, bounds=(lo + 1e-13, hi - 1e-13), method="bounded",
                                   options={"xatol": 1e-14})
    return float(res.x)


def _score(b: int, c: int, n: int, delta: float) -> float:
    var = n * (2.0 * _q_b(b, c, n, delta) + delta * (1.0 - delta))
    return (c - b - n * delta) / math.sqrt(var)


@pytest.mark.parametrize(("b", "c", "n"), [(8, 2, 20), (0, 6, 40), (5, 0, 57), (30, 45, 200), (1, 7, 21)])
def test_tango_score_interval_from_the_paper(b: int, c: int, n: int) -> None:
    low, high = tango_bounds(b, c, n, Z95)
    est = (c - b) / n
    expect_low = optimize.brentq(lambda d: _score(b, c, n, d) - Z95, -1 + 1e-9, est, xtol=1e-12)
    expect_high = optimize.brentq(lambda d: _score(b, c, n, d) + Z95, est, 1 - 1e-9, xtol=1e-12)
    assert low == pytest.approx(expect_low, abs=1e-6) and high == pytest.approx(expect_high, abs=1e-6)


def _exact_unconditional_p(b: int, c: int, n: int, delta0: float) -> float:
    """The GO test's p-value: sup over the discordance ``d`` of the trinomial probability, at ``q_c - q_b = delta0``,
    of the tables whose Tango lower bound at z_0.95 is at or above the observed one (equivalently: whose score
    statistic at the observed bound is at least z_0.95, the statistic falling in ``delta``)."""
    from scipy.special import gammaln

    s_obs = optimize.brentq(lambda d: _score(b, c, n, d) - Z95, -1 + 1e-9, (c - b) / n, xtol=1e-13)
    tables = [(bb, cc) for bb in range(n + 1) for cc in range(n + 1 - bb)]
    region = np.array([_score(bb, cc, n, s_obs) >= Z95 - 1e-9 for bb, cc in tables])
    bb, cc = (np.array(v, dtype=float) for v in zip(*tables))
    log_coef = gammaln(n + 1) - gammaln(bb + 1) - gammaln(cc + 1) - gammaln(n - bb - cc + 1)
    best = 0.0
    for d in np.linspace(abs(delta0) + 1e-9, 1.0 - 1e-9, 4001):
        q_b, q_c, q_0 = (d - delta0) / 2.0, (d + delta0) / 2.0, 1.0 - d
        logp = log_coef + bb * math.log(q_b) + cc * math.log(q_c) + (n - bb - cc) * math.log(q_0)
        best = max(best, float(np.exp(logp[region]).sum()))
    return min(best, 1.0)


@pytest.mark.parametrize(("b", "c", "n", "delta0"), [(1, 6, 16, -0.1), (0, 3, 20, -0.05)])
def test_exact_unconditional_p_value_by_enumeration(b: int, c: int, n: int, delta0: float) -> None:
    found = go_p_at(tango_bounds(b, c, n, Z95)[0], n, delta0, 0.05)
    assert found == pytest.approx(_exact_unconditional_p(b, c, n, delta0), abs=1e-3)


def _capital_by_loop(x: list[float], m: float, alpha: float, c: float) -> float:
    """max_t K_t(m): predictable plug-in bets ``sqrt(2 log(1/alpha) / (n s2_{t-1}))`` with the running mean and
    variance seeded at 1/2 and 1/4, truncated at ``c / m``."""
    n = len(x)
    total, mean_sum, var_sum = 1.0, 0.0, 0.0
    s2_prev, best = 0.25, 1.0
    for t, xt in enumerate(x, start=1):
        lam = min(math.sqrt(2.0 * math.log(1.0 / alpha) / (n * s2_prev)), c / m)
        total *= 1.0 + lam * (xt - m)
        best = max(best, total)
        mean_sum += xt
        mu = (0.5 + mean_sum) / (t + 1)
        var_sum += (xt - mu) ** 2
        s2_prev = (0.25 + var_sum) / (t + 1)
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_betting_p_value_is_the_capital_computed_in_a_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.beta(2.0, 3.0, 60).tolist()
    for m in (0.2, 0.35, 0.5):
        expected = min(1.0, 1.0 / _capital_by_loop(x, m, 0.05, 0.9))
        assert betting.upper_p(x, m, 0.05) == pytest.approx(expected, rel=1e-9)
