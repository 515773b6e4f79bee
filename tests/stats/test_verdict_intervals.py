"""Every statistical rule's printed interval agrees with its verdict, over random tables.

NO-GO exactly when the interval lies beyond -margin on the bad side, GO exactly when it lies inside
-tolerance (docs/statistics.md, "Intervals that agree with the verdict"). The verdicts come from the
rules' own tests (p-values), the intervals from their inversions, so each check can fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from runner.stats import claims as claim_rules
from runner.stats import paired as paired_stats
from runner.stats.unpaired import HypothesisParams, decide
from runner.stats.verdicts import oriented


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
        c = claim_rules.unpaired(v, margin, tol)
        _agrees(c, hib, margin, tol)
        assert c.within == (c.p_within < params.alpha)


def test_paired_binary_interval_agrees_with_mcnemar_tango_and_the_exact_go_test():
    rng = np.random.default_rng(2)
    for _ in range(150):
        n = int(rng.integers(8, 90))
        b = int(rng.integers(0, n // 3 + 1))
        c = int(rng.integers(0, n // 3 + 1))
        hib = bool(rng.integers(2))
        margin, tol = float(rng.choice([0.0, 0.0, 3.0])), float(rng.uniform(1, 15))
        good, bad = (100.0, 0.0) if hib else (0.0, 100.0)
        ref = [good] * b + [bad] * c + [good] * (n - b - c)
        new = [bad] * b + [good] * c + [good] * (n - b - c)
        result = paired_stats.mcnemar_exact(ref, new, 0.05, 0.2, hib, margin=margin)
        assert result.discordant == (b, c)
        claims = claim_rules.binary(b, c, n, 0.05, hib, margin, tol, not result.passed)
        _agrees(claims, hib, margin, tol)


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
        reg = paired_stats.paired_continuous(ref, new, 0.05, 0.2, hib, tolerance=margin, gate="regression", **kw)
        ni = paired_stats.paired_continuous(ref, new, 0.05, 0.2, hib, tolerance=tol, gate="noninferiority", **kw)
        _agrees(claim_rules.continuous(reg, ni), hib, margin, tol)
