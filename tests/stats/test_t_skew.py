"""The paired t-test's skewness check (runner/stats/numerics/t_skew.py): its arithmetic against independent
figures, the claims it withholds through the job's paired decision, and its setting's message."""

from __future__ import annotations

import math

import pytest

from runner.contract.errors import ConfigError
from runner.stats.numerics import t_skew
from runner.stats.settings import StatsConfig, validate


def test_sample_skewness_matches_scipy() -> None:
    from scipy import stats

    values = [0.0, 0.0, 1.0, 2.0, 10.0, -3.0, 4.5]
    assert t_skew.sample_skewness(values) == pytest.approx(float(stats.skew(values, bias=True)), rel=1e-12)
    assert t_skew.sample_skewness([2.0] * 5) == 0.0


def test_edgeworth_excess_by_hand() -> None:
    """g (2 z^2 + 1) phi(z) / (6 sqrt n) at g = 1, n = 100, alpha 0.05: z = 1.644854, 2 z^2 + 1 = 6.411, phi(z) =
    0.103136, so 6.411 x 0.103136 / 60 = 0.011020; the GO side (high) gets the opposite sign."""
    assert t_skew.excess(1.0, 100, 0.05, low_side=True) == pytest.approx(0.011020, abs=2e-6)
    assert t_skew.excess(1.0, 100, 0.05, low_side=False) == pytest.approx(-0.011020, abs=2e-6)
    assert t_skew.excess(-2.0, 400, 0.05, low_side=False) == pytest.approx(0.011020, abs=2e-6)


def test_the_first_order_excess_is_what_a_skewed_t_test_shows() -> None:
    """The expansion's excess against the exact rate of the t-test on exponential differences (skewness 2) at n = 100,
    by simulation: rate - alpha near 2 x 0.011 for the low side (20000 draws, SE 0.0017)."""
    import numpy as np
    from scipy import stats

    rng = np.random.default_rng(7)
    d = rng.exponential(size=(20000, 100)) - 1.0
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / 10.0)
    rate = float(np.mean(stats.t.cdf(t, 99) < 0.05))
    assert abs(rate - 0.05 - t_skew.excess(2.0, 100, 0.05, low_side=True)) < 0.006


def _decide(d, tolerance: float, margin: float, limit: float = t_skew.DEFAULT_LIMIT):  # noqa: ANN001, ANN202
    from runner.stats.data.hypothesis import HypothesisParams
    from runner.stats.data.pairing import PairedScores
    from runner.stats.dispatch import _paired

    notes: list[str] = []
    pairs = PairedScores(tuple(str(i) for i in range(len(d))), tuple(50.0 - v / 2 for v in d),
                         tuple(50.0 + v / 2 for v in d), (), ())
    stats = StatsConfig(paired_test="t", t_skew_limit=limit)
    result, claims = _paired(pairs, HypothesisParams(0.05, 0.2, 10.0, len(d)), stats, margin, tolerance, None, notes,
                             None)
    return result, claims, notes


def test_rare_large_losses_withhold_go_and_say_why() -> None:
    """8 of 200 samples lost 30 points, the rest gained 1.3: the t-test shows a drop below 1 (p 0.02), but its GO
    rests on a left tail the sample barely shows; the check withholds GO and keeps NO-GO's side (conservative). The
    sample skewness of two values in shares 0.04 / 0.96, the rare one low: -(1 - 2 x 0.04) / sqrt(0.04 x 0.96) = -4.69."""
    d = [-30.0] * 8 + [1.3] * 192
    _, plain, _ = _decide(d, 1.0, 0.0, limit=1.0)
    result, checked, notes = _decide(d, 1.0, 0.0)
    assert plain.within and not checked.within
    assert result.passed and "withheld: skewed differences" in checked.method
    note = next(n for n in notes if n.startswith("no GO claim"))
    assert "sample skewness -4.69" in note and "stats.t_skew_limit=0.0025" in note and "score bounds" in note


def test_rare_large_gains_withhold_no_go() -> None:
    d = [30.0] * 8 + [-2.5] * 192  # mean -1.3: a drop shown by the t-test, carried by a few rare gains missed
    _, plain, _ = _decide(d, 5.0, 0.0, limit=1.0)
    result, checked, notes = _decide(d, 5.0, 0.0)
    assert plain.regression and not checked.regression and result.passed
    assert any(n.startswith("no NO-GO claim") for n in notes)


def test_symmetric_differences_keep_their_claims() -> None:
    import numpy as np

    e = np.random.default_rng(1).standard_normal(500)
    d = list(3.0 + 10.0 * (e - e.mean()) / e.std())  # skewness of the draw itself, near 0
    assert abs(t_skew.sample_skewness(d)) < 0.2
    _, claims, notes = _decide(d, 1.0, 0.0)
    assert claims.within and not any("skewed" in n for n in notes)


def test_the_grid_cells_that_failed_before_hold_now() -> None:
    """The audit's failing settings, through the job's decision: false GO with 5% of 57 samples changed was above
    0.08 (the t-test alone), and false NO-GO on the skewed shape at n = 200 above 0.07; with the check, below alpha."""
    from benchmarks.calibration_grid.unbounded import rate

    assert rate("go", "sparse 5%", 57, 1.0, 1.0, 0.0, 400, 5, limit=1.0).value > 0.08
    assert rate("go", "sparse 5%", 57, 1.0, 1.0, 0.0, 400, 5).value < 0.02
    assert rate("no_go", "skewed", 200, 0.0, 5.0, 0.0, 400, 6, limit=1.0).value > 0.06
    assert rate("no_go", "skewed", 200, 0.0, 5.0, 0.0, 400, 6).value < 0.02


def test_the_benchmark_decides_as_the_job_does() -> None:
    """benchmarks/t_skew.py decides on arrays for speed: the same draws through the job's paired decision agree."""
    import numpy as np
    from scipy import stats

    from benchmarks.calibration_grid.unbounded import ALPHA, claims, differences

    rng = np.random.default_rng(3)
    for shape in ("skewed", "perplexity-like 0.25", "sparse 5%"):
        for go in (True, False):
            for _ in range(25):
                d = differences(shape, -1.0 if go else 0.0, 57, rng, against_go=go)
                c = claims(d, 1.0 if go else 5.0, 0.0)
                s = d + (1.0 if go else 0.0)
                sd = s.std(ddof=1)
                t = s.mean() / (sd / math.sqrt(57)) if sd > 0 else 0.0
                p = stats.t.sf(t, 56) if go else stats.t.cdf(t, 56)
                skew = t_skew.sample_skewness(list(d))
                made = sd > 0 and p < ALPHA and t_skew.excess(skew, 57, ALPHA, low_side=not go) <= 0.0025
                assert made == (c.within if go else c.regression)


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "0.01"])
def test_a_bad_limit_is_a_message(bad) -> None:  # noqa: ANN001
    with pytest.raises(ConfigError) as err:
        validate(StatsConfig(t_skew_limit=bad))
    assert "stats.t_skew_limit" in str(err.value) and "0.0025" in str(err.value)
