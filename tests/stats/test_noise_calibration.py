"""The noise family of the calibration grid (benchmarks/calibration_grid/noise.py): the embedded perplexity reference's
real A/A pairs (recorded in bfloat16, scored again in float32 and at batch size 1; tests/data/aa_pairs/), resampled,
through the continuous paired t-test. A float32 reference against a bfloat16 run raises false NO-GOs well above
alpha at margin 0; with the floor they stay within alpha + 2 SE."""

from __future__ import annotations

import pytest

from benchmarks.calibration_grid import noise as calibration
from tests.conftest import ROOT

ALPHA, TRIALS = 0.01, 300


@pytest.mark.parametrize("name", ["perplexity_dtype_float32", "perplexity_batch_size_1"])
@pytest.mark.parametrize("swap", [False, True])
def test_the_floor_holds_alpha_on_real_aa_pairs(name, swap):
    pairs = calibration.load(ROOT / "tests" / "data" / "aa_pairs" / f"{name}.json")
    assert len(pairs.a) == 40 and not pairs.higher_is_better
    rate = calibration.false_nogo(pairs, 40, ALPHA, TRIALS, seed=11, floored=True, swap=swap)
    assert rate.value <= ALPHA + 2 * rate.se


def test_without_the_floor_a_dtype_change_alone_is_a_regression_too_often():
    pairs = calibration.load(ROOT / "tests" / "data" / "aa_pairs" / "perplexity_dtype_float32.json")
    rate = calibration.false_nogo(pairs, 40, ALPHA, TRIALS, seed=11, floored=False, swap=True)
    assert rate.value > ALPHA + 3 * rate.se  # 0.16 at 1000 trials (docs/noise.md)
