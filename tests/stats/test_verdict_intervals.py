"""Every statistical rule's printed interval agrees with its verdict, over random tables.

NO-GO exactly when the interval lies beyond -margin on the bad side, GO exactly when it lies inside
-tolerance (docs/statistics.md, "Intervals that agree with the verdict"). The verdicts come from the
rules' own tests (p-values), the intervals from their inversions, so each check can fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from runner.stats.data.claims import paired_claims
from runner.stats.numerics.paired_binomial.claims import binary_claims
from runner.stats.numerics.ztest import unpaired_claims
from runner.stats.rules.paired_binary import mcnemar_exact
from runner.stats.rules.paired_continuous import paired_continuous
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics.ztest import decide
import math
from decimal import Decimal

from runner.stats.data.claims import Claims, oriented
from runner.stats.data.verdicts import decisive


def _agrees(c, higher_is_better: bool, margin: float, tolerance: float) -> None:
    low, high = oriented(c.low, c.high, higher_is_better)
    assert c.regression == (high < -margin), (c, margin)
    assert c.within == (low > -tolerance), (c, tolerance)


def test_unpaired_interval_agrees_with_both_claims():
    rng = np.random.default_rng(1)
    for _ in range(3000):
        hib = bool(rng.integers(2))
        params = HypothesisParams(float(rng.choice([0.05, 0.01, 0.1])), 0.2, float(rng.uniform(1, 60)),
                                  int(rng.integers(10, 5000)), hib)
        ref = float(rng.uniform(10, 90))
        score = ref + float(rng.normal(0, 4))
        margin, tol = float(rng.choice([0.0, 0.5, 2.0])), float(rng.uniform(0.1, 6))
        v = decide(score, ref, params, tolerance=margin)
        c = unpaired_claims(v, margin, tol)
        _agrees(c, hib, margin, tol)
        assert c.within == (c.p_within < params.alpha)


def test_paired_binary_interval_agrees_with_mcnemar_tango_and_the_exact_go_test():
    """Random tables, and the edge ones: no discordance, all one way. Beyond the printed (pinned) bounds, the
    raw bounds must already lie on the side their test decided (they invert it; only McNemar's NO-GO at
    margin 0 is another family, and pinned)."""
    from runner.stats.numerics.paired_binomial import tango as pb
    rng = np.random.default_rng(2)
    cases = [(0, 0, 57, 0.0, 2.75), (0, 0, 108, 3.0, 2.75), (5, 0, 57, 3.0, 5.0), (0, 6, 60, 0.0, 1.0)]
    for _ in range(32):
        n = int(rng.integers(8, 90))
        cases.append((int(rng.integers(0, n // 3 + 1)), int(rng.integers(0, n // 3 + 1)), n,
                      float(rng.choice([0.0, 0.0, 3.0])), float(rng.uniform(1, 15))))
    for b, c, n, margin, tol in cases:
        hib = bool(rng.integers(2))
        good, bad = (100.0, 0.0) if hib else (0.0, 100.0)
        ref = [good] * b + [bad] * c + [good] * (n - b - c)
        new = [bad] * b + [good] * c + [good] * (n - b - c)
        result = mcnemar_exact(ref, new, 0.05, 0.2, hib, margin=margin)
        assert result.discordant == (b, c)
        claims = binary_claims(b, c, n, 0.05, hib, margin, tol, not result.passed)
        _agrees(claims, hib, margin, tol)
        assert (pb.go_lower(b, c, n, 0.05, -tol / 100) > -tol / 100) == claims.within, (b, c, n, tol)
        if margin:
            up = pb.regression_upper(b, c, n, 0.05, -margin / 100)
            assert (up < -margin / 100) == claims.regression, (b, c, n, margin)


@pytest.mark.parametrize("method", ["t", "bootstrap"])
def test_paired_continuous_interval_agrees_with_both_tests(method):
    rng = np.random.default_rng(3)
    for _ in range(2000 if method == "t" else 300):
        n = int(rng.integers(5, 60))
        hib = bool(rng.integers(2))
        ref = rng.uniform(5, 20, n)
        new = ref + rng.normal(float(rng.normal(0, 0.5)), float(rng.uniform(0.1, 2)), n)
        margin, tol = float(rng.choice([0.0, 0.3])), float(rng.uniform(0.05, 1.5))
        kw = dict(method=method, n_boot=2000)
        reg = paired_continuous(ref, new, 0.05, 0.2, hib, tolerance=margin, gate="regression", **kw)
        ni = paired_continuous(ref, new, 0.05, 0.2, hib, tolerance=tol, gate="noninferiority", **kw)
        _agrees(paired_claims(reg, ni), hib, margin, tol)


def test_printed_bounds_carry_the_digits_that_decide():
    """Rounded to three decimals a GO bound of -2.7466 (shown: > -2.747) would print as the tolerance itself."""
    assert decisive(-2.7466, -2.747, True, above=True) == ("-2.7466", "-2.7470")
    assert decisive(-2.7469999999, -2.747, True, above=True) == ("-2.7469999999", "-2.7470000000")
    # a bound that did not decide is rounded outwards, never onto the deciding side
    assert decisive(-2.7470001, -2.747, False, above=True) == ("-2.748", "-2.747")
    assert decisive(-2.747, -2.747, False, above=True) == ("-2.747", "-2.747")
    # an upper bound (a NO-GO bound, or a GO bound when lower is better) rounds up
    assert decisive(-0.0004, -0.0, True, above=False) == ("-0.0004", "+0.0000")
    assert decisive(2.7466, 2.747, True, above=False) == ("+2.7466", "+2.7470")
    rng = np.random.default_rng(7)
    for _ in range(3000):
        thr = float(rng.uniform(-10, 10))
        bound = thr + float(rng.choice([-1, 1])) * 10 ** float(rng.uniform(-15, 0))
        above = bool(rng.integers(2))
        shown = bound > thr if above else bound < thr
        b, t = decisive(bound, thr, shown, above)
        assert shown == ((Decimal(b) > Decimal(t)) if above else (Decimal(b) < Decimal(t))), (bound, thr, above)


def test_bounds_agree_with_the_claims_at_exact_ties():
    """A bound one float step on the wrong side of its threshold (the test's p-value decided) is moved to it."""
    c = Claims(regression=False, within=True, low=-2.75, high=-0.020000000000003126, method="m", p_within=0.04)
    low, high = c.agreeing(0.02, 2.75, True).ci
    assert low > -2.75 and low == math.nextafter(-2.75, math.inf) and high == -0.02
    lo_better = c.agreeing(0.02, 2.75, False)  # lower is better: the GO bound is the upper end, +t
    assert lo_better.ci == c.ci or (lo_better.high < 2.75) == c.within


def test_an_unbounded_side_prints_without_digits():
    """A bound that is infinite (a corpus rule that saw no changed document) prints as such, not as a crash."""
    from runner.stats.data.verdicts import decisive

    assert decisive(-math.inf, -1.0, False, above=True) == ("-inf", "-1.000")
    assert decisive(math.inf, 0.0, False, above=False) == ("+inf", "+0.000")
