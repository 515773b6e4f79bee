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
from runner.stats.rules.extension import Extensions
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


def test_four_looks_of_three_planned_extensions_spend_exactly_alpha_by_the_multivariate_normal():
    """The calibration grid's K=3, n1=400 cell: the looks' bounds, read from the extension as a job runs them, cross
    with probability 0.05 in all under H0 (Genz's integration of the canonical joint normal, not the rule's
    recursion), the look-by-look spending within 1e-6."""
    ext = Extensions(3, [400, 800, 1200, 1600], 0.05, "obf", 2.75, True)
    for n in (400, 800, 1200, 1600):
        ext.observe(unpaired(0.0), n)
    info = [1 / (1 / n + 1 / 400) for n in (400, 800, 1200, 1600)]
    cov = [[math.sqrt(min(a, b) / max(a, b)) for b in info] for a in info]
    bounds = [lk.efficacy for lk in ext.looks]
    for k in range(1, 5):
        crossed = 1 - stats.multivariate_normal.cdf(bounds[:k], mean=[0.0] * k, cov=[r[:k] for r in cov[:k]],
                                                    abseps=1e-8, releps=1e-8)
        assert crossed == pytest.approx(obf(k / 4), abs=1e-6)


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


def binary(b: int, c: int, n: int, margin: float) -> SimpleNamespace:
    """What a look reads of a paired 0/100 decision: b samples lost, c won, the margin in points."""
    paired = SimpleNamespace(discordant=(b, c), mean_diff=100.0 * (c - b) / n, tolerance=margin, n=n)
    return SimpleNamespace(rule="paired", paired=paired,
                           verdict=SimpleNamespace(params=SimpleNamespace(higher_is_better=True)))


def test_a_margin_is_inside_the_looks_statistic_and_the_interval_agrees_with_the_verdict():
    """The audit's look: b=120 lost, c=60 won of 500, margin 5, look 1 of 4 (bound 3.75). McNemar's Z = 60 /
    sqrt(180) = 4.47 crosses it, but a drop beyond 5 is not shown: Tango's statistic at the margin is
    (b - c - n m) / sqrt(n v) = 35 / sqrt(500 v), v = q_b + q_c - m^2 at the restricted MLE (from its
    quadratic, solved here with numpy), about 2.6 < 3.75. The printed bound agrees: Tango's upper bound at
    3.75 is above -5."""
    from runner.stats.conclusion import look_claims

    b, c, n, m = 120, 60, 500, 0.05
    # restricted MLE of q_b under q_c - q_b = -m: 2n q^2 + B q + C = 0 (Tango 1998 eq. 4), the larger root
    big_b, big_c = -m * (2 * n + b - c) - (b + c), b * m * (1 + m)
    q_b = max(np.roots([2 * n, big_b, big_c]).real)
    z_margin = (b - c - n * m) / math.sqrt(n * (2 * q_b - m - m * m))
    ext = Extensions(3, [500], 0.05, "obf", 10.0, True)
    look = ext.observe(binary(b, c, n, 5.0), n)
    assert look.efficacy == pytest.approx(stats.norm.isf(obf(1 / 4)), abs=1e-6)
    assert look.z == pytest.approx(z_margin, rel=1e-9) and look.z < look.efficacy
    assert ext.stopped is None
    result = ext.result(True, None)
    claims = look_claims(not result.passed, *result.bound(), True, 0.05, 5.0, 10.0, result.counts)
    assert not claims.regression and claims.high > -5.0
    # margin 0: McNemar's statistic, which crosses, and the interval's bad side is below 0
    ext0 = Extensions(3, [500], 0.05, "obf", 10.0, True)
    assert ext0.observe(binary(b, c, n, 0.0), n).z == pytest.approx(60 / math.sqrt(180))
    r0 = ext0.result(True, None)
    c0 = look_claims(not r0.passed, *r0.bound(), True, 0.05, 0.0, 10.0, r0.counts)
    assert ext0.stopped == "regression" and c0.regression and c0.high < 0


def test_a_margin_with_looks_is_refused():
    with pytest.raises(ConfigError, match="a margin cannot be tested across looks"):
        validate(StatsConfig(extensions=3, margin=5.0))
    seq = StatsConfig().sequential.__class__(enabled=True)
    with pytest.raises(ConfigError, match="stats.margin"):
        validate(StatsConfig(margin=1.0, sequential=seq))
    validate(StatsConfig(extensions=3, margin=0.0))


def test_the_advice_of_an_extendable_run_is_for_the_bound_and_n_of_the_look_it_names():
    """Unpaired, sigma 50, reference of 4000, look 1 of 4 at n=4000 observed a drop of 0.5 (tolerance 2.75).
    The advice names a planned look and its probability; by simulation (the observed drop true, the looks
    before it evaluated as planned), that look reaches GO as often as stated (+- 0.03: 3 SE at 2000 runs)."""
    from runner.stats.numerics.advice import more_samples

    n1, drop, tol = 4000, 0.5, 2.75
    ext = Extensions(3, [n1], 0.05, "obf", tol, True)
    ext.observe(unpaired(-drop), n1)
    looks = ext.result(True, None).next_looks()
    assert [n for n, _ in looks] == [8000, 12000, 16000] and all(c > stats.norm.isf(0.05) for c, in
                                                                [(c,) for _, c in looks[:-1]])
    advice = more_samples(drop, SIGMA, n1, 0.0, tol, 0.05, n_ref=n1, looks=looks)
    assert advice.target == "GO" and advice.extensions is not None and advice.probability >= 0.8
    j = advice.extensions
    crit = looks[j - 1][1]
    # the stated probability by hand: P(Z at n_total below the GO bound), se 50 sqrt(1/N + 1/n1)
    se = SIGMA * math.sqrt(1 / advice.n_total + 1 / n1)
    assert advice.probability == pytest.approx(stats.norm.cdf((tol - drop) / se - crit), abs=1e-12)
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(2000):
        run = Extensions(3, [n1], 0.05, "obf", tol, True)
        ref, total = rng.normal(0, SIGMA / math.sqrt(n1)), 0.0
        for k in range(j + 1):
            run.stopped = None
            total += rng.normal(-drop * n1, SIGMA * math.sqrt(n1))
            run.observe(unpaired(total / (n1 * (k + 1)) - ref), n1 * (k + 1))
        hits += run.stopped == "go"
    assert abs(hits / 2000 - advice.probability) < 0.03
    # the fixed-look advice (critical value z(0.95)) names fewer samples: following it at these bounds falls short
    fixed = more_samples(drop, SIGMA, n1, 0.0, tol, 0.05, n_ref=n1)
    short = stats.norm.cdf((tol - drop) / (SIGMA * math.sqrt(1 / fixed.n_total + 1 / n1)) - looks[0][1])
    assert fixed.n_total < advice.n_total and short < 0.7
