"""Extendable runs: planned further looks whose bounds keep the false-alarm rate at alpha.

The bounds are checked against values derived independently: look 1 from the closed-form
O'Brien-Fleming-type spending, look 2 from scipy's bivariate normal (not the recursive integration
the code uses); the false-alarm and false-pass rates of the whole extend-when-undecided process by
simulation."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import optimize, stats

from runner.contract.errors import ConfigError
from runner.stats.extension import Extensions
from runner.stats.settings import StatsConfig, validate

SIGMA = 50.0


def unpaired(diff: float) -> SimpleNamespace:
    """What the extension reads of a job's unpaired decision at one look."""
    params = SimpleNamespace(higher_is_better=True, sigma=SIGMA)
    return SimpleNamespace(rule="unpaired", paired=None,
                           verdict=SimpleNamespace(params=params, difference=diff, tolerance=0.0))


def obf(t: float, alpha: float = 0.05) -> float:
    return 2 * (1 - stats.norm.cdf(stats.norm.ppf(1 - alpha / 2) / math.sqrt(t)))


def test_the_first_look_of_two_planned_extensions_spends_obf_at_one_third():
    ext = Extensions(2, [100, 200], 0.05, "obf", 2.75, True)
    ext.observe(unpaired(-1.0), 100)
    assert ext.looks[0].efficacy == pytest.approx(stats.norm.isf(obf(1 / 3)), abs=1e-6)  # 3.20


def test_the_second_look_bound_from_the_bivariate_normal():
    """Reference fixed at n_ref = 100: information 1 / (1/n + 1/100) is 50 at n = 100 and 66.7 at n = 200."""
    ext = Extensions(2, [100, 200], 0.05, "obf", 2.75, True)
    ext.observe(unpaired(-1.0), 100)
    ext.observe(unpaired(-1.0), 200)
    b1 = stats.norm.isf(obf(1 / 3))
    rho = math.sqrt(50 / (1 / (1 / 200 + 1 / 100)))
    joint = stats.multivariate_normal([0, 0], [[1, rho], [rho, 1]])

    def crossing(c: float) -> float:  # P(Z1 < b1, Z2 >= c)
        return stats.norm.cdf(b1) - joint.cdf([b1, c])

    b2 = optimize.brentq(lambda c: crossing(c) - (obf(2 / 3) - obf(1 / 3)), 0.5, 5)
    assert ext.looks[1].efficacy == pytest.approx(b2, abs=2e-4)


def test_a_drop_shown_at_the_second_look_stops_there_and_the_interval_agrees():
    ext = Extensions(2, [100, 200, 300], 0.05, "obf", 2.75, True)
    ext.observe(unpaired(-12.0), 100)  # Z = 12 / 7.07 = 1.70 < 3.20: go on
    assert ext.stopped is None
    ext.observe(unpaired(-16.0), 200)  # Z = 16 / 6.12 = 2.61 > b2 (about 2.51)
    result = ext.result(True, None)
    assert ext.stopped == "regression" and result.reason == "regression" and result.look == 2
    assert result.rci[1] < 0 and result.p_value < 0.05


def test_go_needs_the_interval_inside_the_tolerance_at_the_looks_bound():
    ext = Extensions(1, [4000, 8000], 0.05, "obf", 2.75, True)
    ext.observe(unpaired(0.0), 4000)  # se sqrt(2500/4000 * 2) = 1.118; bound b1 = z(1 - obf(1/2)) = 2.797
    b1 = stats.norm.isf(obf(1 / 2))
    # 0 - 2.797 * 1.118 = -3.13 < -2.75: not shown yet
    assert ext.looks[0].efficacy == pytest.approx(b1, abs=1e-6) and ext.stopped is None
    ext.observe(unpaired(0.0), 8000)  # se 50 sqrt(1/8000 + 1/4000) = 0.968; final bound about 1.98: -1.92 > -2.75
    assert ext.stopped == "go" and ext.result(True, None).rci[0] > -2.75


def test_extensions_must_be_planned_before_the_first_look():
    with pytest.raises(ConfigError, match="more extensions than were planned"):
        validate(StatsConfig(extend=[100]))
    with pytest.raises(ConfigError, match="stats.extensions"):
        validate(StatsConfig(extensions=11))
    with pytest.raises(ConfigError, match="two designs"):
        validate(StatsConfig(extensions=2, sequential=StatsConfig().sequential.__class__(enabled=True)))
    validate(StatsConfig(extensions=3, extend=[100, 200]))


def _process(rng: np.random.Generator, drop: float, reps: int, n: int = 400, planned: int = 3,
             tolerance: float = 2.75) -> tuple[float, float]:
    """Extend by n while undecided, up to ``planned`` times; the rates of NO-GO and GO."""
    no_go = go = 0
    for _ in range(reps):
        ext = Extensions(planned, [n * (k + 1) for k in range(planned + 1)], 0.05, "obf", tolerance, True)
        ref = rng.normal(0, SIGMA / math.sqrt(n))  # the reference's own error, fixed across looks
        total = 0.0
        for k in range(planned + 1):
            total += rng.normal(-drop * n, SIGMA * math.sqrt(n))
            ext.observe(unpaired(total / (n * (k + 1)) - ref), n * (k + 1))
            if ext.stopped:
                break
        no_go += ext.stopped == "regression"
        go += ext.stopped == "go"
    return no_go / reps, go / reps


def test_extending_while_undecided_keeps_both_error_rates_at_alpha():
    """Up to 3 extensions of 400 samples each: NO-GO when nothing regressed, and GO when the drop is exactly
    the tolerance, each at most alpha (4000 runs each: +- 0.007 at 2 standard errors)."""
    rng = np.random.default_rng(7)
    false_alarm, _ = _process(rng, 0.0, 4000)
    _, false_pass = _process(rng, 2.75, 4000)
    assert false_alarm <= 0.05 + 0.007 and false_pass <= 0.05 + 0.007
