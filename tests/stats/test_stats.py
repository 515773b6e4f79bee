"""Statistics against numbers worked out by hand from the published normal quantiles.

Golden values use the quantiles listed in docs/trtllm.md (7-8 significant digits), never the
functions under test, so the tolerance is 1e-5 on a 0-100 scale.
"""

from __future__ import annotations

import json
import math

import pytest

from runner.contract.errors import ConfigError
from runner.stats.data.hypothesis import HypothesisParams, scale
from runner.stats.numerics.ztest import (
    PlanRow,
    compute_theta,
    compute_threshold,
    decide,
    min_samples_for_theta,
    plan_rows,
    render,
)
from runner.stats.numerics.normal import z

# Published quantiles of the standard normal.
Z_005 = -1.6448536
Z_020 = -0.8416212
Z_0002 = -2.878162
Z_001 = -2.326348
TOL = 1e-5

# MMLU: sigma 50, n 4096 -> scale = sqrt(2 * 2500 / 4096) = sqrt(1.220703125)
MMLU_SCALE = 1.1048543456
MMLU_THETA = (1.6448536 + 0.8416212) * MMLU_SCALE  # 2.4864748 * 1.1048543456 = 2.7471926
MMLU_THRESHOLD_68_17 = 68.17 - 1.6448536 * MMLU_SCALE  # 68.17 - 1.8173236 = 66.3526764


def mmlu() -> HypothesisParams:
    return HypothesisParams(alpha=0.05, beta=0.2, sigma=50, num_samples=4096)


@pytest.mark.parametrize(
    ("p", "expected"), [(0.05, Z_005), (0.2, Z_020), (0.002, Z_0002), (0.01, Z_001), (0.5, 0.0)]
)
def test_z_matches_published_quantiles(p: float, expected: float) -> None:
    assert z(p) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("p", [0.0, 1.0, -0.1, 1.5])
def test_z_rejects_non_probabilities(p: float) -> None:
    with pytest.raises(ValueError):
        z(p)


def test_mmlu_scale_theta_threshold() -> None:
    assert scale(4096, 50) == pytest.approx(MMLU_SCALE, abs=1e-9)
    assert compute_theta(4096, 50, 0.05, 0.2) == pytest.approx(MMLU_THETA, abs=TOL)
    assert compute_theta(4096, 50, 0.05, 0.2) == pytest.approx(2.74719, abs=1e-4)
    assert compute_threshold(68.17, 4096, 50, 0.05) == pytest.approx(MMLU_THRESHOLD_68_17, abs=TOL)
    assert compute_threshold(68.17, 4096, 50, 0.05) == pytest.approx(66.35268, abs=1e-4)


def test_cnn_dailymail_theta() -> None:
    # sigma 11.06, n 512: scale = sqrt(2 * 122.3236 / 512) = sqrt(0.477826...)
    s = math.sqrt(2 * 122.3236 / 512)
    assert compute_theta(512, 11.06, 0.002, 0.2) == pytest.approx((2.878162 + 0.8416212) * s, abs=TOL)


def test_lower_is_better_perplexity() -> None:
    # SlimPajama-6B: alpha 0.01, sigma 4.48, n 86; scale = sqrt(2 * 20.0704 / 86) = 0.6831936
    s = math.sqrt(40.1408 / 86)
    expected = 7.663 + 2.326348 * s  # 7.663 + 1.589349 = 9.252349: the line sits ABOVE the reference
    assert compute_threshold(7.663, 86, 4.48, 0.01, higher_is_better=False) == pytest.approx(expected, abs=TOL)
    assert expected == pytest.approx(9.25235, abs=1e-4)

    params = HypothesisParams(alpha=0.01, beta=0.2, sigma=4.48, num_samples=86, higher_is_better=False)
    good = decide(9.0, 7.663, params, metric="perplexity")
    assert good.passed
    assert good.room == pytest.approx(expected - 9.0, abs=TOL)  # threshold - score, positive
    bad = decide(9.3, 7.663, params, metric="perplexity")
    assert not bad.passed
    assert bad.room == pytest.approx(expected - 9.3, abs=TOL)
    assert bad.room < 0
    # a score exactly at reference + |z(0.01)| * scale has a one-sided p-value of 0.01
    assert decide(expected, 7.663, params).p_value == pytest.approx(0.01, abs=1e-6)
    assert decide(7.0, 7.663, params).p_value > 0.5  # perplexity improved
    text = render(bad)
    assert "lower is better" in text and "perplexity" in text
    assert "reference + 1.589" in text  # the line sits above the reference
    assert "threshold - score" in text and "unpaired test: regression shown" in text


def test_passkey_sigma_zero_threshold_is_reference() -> None:
    params = HypothesisParams(alpha=0.5, beta=0.2, sigma=0, num_samples=20)
    assert compute_threshold(99.0, 20, 0.0, 0.5) == 99.0
    assert compute_theta(20, 0.0, 0.5, 0.2) == 0.0
    ok = decide(99.0, 99.0, params)
    assert ok.passed and ok.threshold == 99.0 and ok.room == 0.0 and ok.p_value == 1.0
    fail = decide(98.0, 99.0, params)
    assert not fail.passed and fail.p_value == 0.0


def test_decide_higher_is_better_mmlu() -> None:
    v = decide(67.0, 68.17, mmlu())
    assert v.passed
    assert v.threshold == pytest.approx(MMLU_THRESHOLD_68_17, abs=TOL)
    assert v.theta == pytest.approx(MMLU_THETA, abs=TOL)
    assert v.room == pytest.approx(67.0 - MMLU_THRESHOLD_68_17, abs=TOL)
    assert not v.explicit_threshold
    # p-value: Phi((67.0 - 68.17) / 1.1048543) = Phi(-1.058963...) ~ 0.14481
    assert v.p_value == pytest.approx(0.14481, abs=1e-4)

    v = decide(66.0, 68.17, mmlu())
    assert not v.passed
    assert v.room == pytest.approx(66.0 - MMLU_THRESHOLD_68_17, abs=TOL)
    assert v.p_value < 0.05

    at_line = decide(MMLU_THRESHOLD_68_17, 68.17, mmlu())
    assert at_line.p_value == pytest.approx(0.05, abs=1e-6)
    assert decide(68.17, 68.17, mmlu()).p_value == pytest.approx(0.5)


def test_score_equal_to_threshold_passes() -> None:
    params = mmlu()
    line = compute_threshold(68.17, 4096, 50, 0.05)
    assert decide(line, 68.17, params).passed


def test_explicit_threshold_replaces_computed() -> None:
    v = decide(66.0, 68.17, mmlu(), explicit_threshold=65.5)
    assert v.passed and v.explicit_threshold
    assert v.threshold == 65.5
    assert v.room == pytest.approx(0.5)
    v = decide(65.0, 68.17, mmlu(), explicit_threshold=65.5)
    assert not v.passed
    assert "registered" in render(v)


def test_verdict_to_dict_and_render() -> None:
    v = decide(66.0, 68.17, mmlu())
    d = v.to_dict()
    json.dumps(d)  # JSON-friendly
    assert d["passed"] is False
    assert d["num_samples"] == 4096 and d["alpha"] == 0.05 and d["higher_is_better"] is True
    for key in ("score", "reference", "threshold", "theta", "room", "p_value", "explicit_threshold", "sigma", "beta"):
        assert key in d
    text = render(v)
    assert "Hypothesis test report" in text
    assert "unpaired test: regression shown" in text
    assert "68.170" in text and "66.000" in text and "66.353" in text and "4096" in text
    assert "reference - 1.817" in text  # 1.6448536 * 1.1048543 = 1.8173
    assert "unpaired test: no regression shown" in render(decide(68.0, 68.17, mmlu()))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.0}, "alpha"),
        ({"beta": 1.2}, "beta"),
        ({"sigma": -1.0}, "sigma"),
        ({"num_samples": 0}, "num_samples"),
        ({"num_samples": 2.5}, "num_samples"),
    ],
)
def test_params_validation(kwargs: dict, field: str) -> None:
    base = {"alpha": 0.05, "beta": 0.2, "sigma": 50.0, "num_samples": 100}
    with pytest.raises(ConfigError) as info:
        HypothesisParams(**{**base, **kwargs})
    msg = str(info.value)
    assert field in msg
    assert repr(next(iter(kwargs.values()))) in msg
    assert "allowed" in msg


def test_params_normalise_types() -> None:
    p = HypothesisParams(alpha=0.05, beta=0.2, sigma=50, num_samples=4096.0)
    assert isinstance(p.sigma, float) and isinstance(p.num_samples, int)


def test_min_samples_for_theta_hand_values() -> None:
    # MMLU, target 3 points: n >= 2 * (2.4864748 * 50 / 3)^2 = 3434.75 -> 3435
    assert min_samples_for_theta(3.0, 50, 0.05, 0.2) == math.ceil(2 * (2.4864748 * 50 / 3) ** 2) == 3435
    # CNN/DailyMail, target 3: 2 * (3.7197832 * 11.06 / 3)^2 = 376.16 -> 377
    assert min_samples_for_theta(3.0, 11.06, 0.002, 0.2) == math.ceil(2 * (3.7197832 * 11.06 / 3) ** 2) == 377


def test_min_samples_for_theta_boundaries() -> None:
    for n in list(range(1, 200)) + [255, 256, 257, 1319, 4096, 8191, 8192, 100_000]:
        target = compute_theta(n, 50, 0.05, 0.2)
        assert min_samples_for_theta(target, 50, 0.05, 0.2) == n  # exactly on the line: n itself
        assert min_samples_for_theta(target * (1 + 1e-12), 50, 0.05, 0.2) == n
        assert min_samples_for_theta(target * (1 - 1e-12), 50, 0.05, 0.2) == n + 1


def test_min_samples_for_theta_degenerate() -> None:
    assert min_samples_for_theta(3.0, 0.0, 0.5, 0.2) == 1  # passkey: sigma 0
    assert min_samples_for_theta(0.0, 0.0, 0.05, 0.2) == 1
    assert min_samples_for_theta(1e9, 50, 0.05, 0.2) == 1
    with pytest.raises(ValueError):
        min_samples_for_theta(0.0, 50, 0.05, 0.2)


def test_plan_rows_gsm8k_total() -> None:
    rows = plan_rows(50, 0.05, 0.2, 1319)
    assert [r.num_samples for r in rows] == [32, 64, 128, 256, 512, 1024, 1319]
    assert all(isinstance(r, PlanRow) for r in rows)
    # n = 32: scale = sqrt(5000 / 32) = 12.5 exactly
    assert rows[0].theta == pytest.approx(2.4864748 * 12.5, abs=TOL)  # 31.080935
    assert rows[0].threshold_minus_reference == pytest.approx(-1.6448536 * 12.5, abs=TOL)  # -20.56067
    # n = 128: scale 6.25; n = 512: scale 3.125
    assert rows[2].theta == pytest.approx(2.4864748 * 6.25, abs=TOL)
    assert rows[4].threshold_minus_reference == pytest.approx(-1.6448536 * 3.125, abs=TOL)
    # n = 1319: scale = sqrt(5000 / 1319)
    s = math.sqrt(5000 / 1319)
    assert rows[-1].theta == pytest.approx(2.4864748 * s, abs=TOL)
    assert rows[-1].threshold_minus_reference == pytest.approx(-1.6448536 * s, abs=TOL)


def test_plan_rows_power_of_two_total() -> None:
    rows = plan_rows(50, 0.05, 0.2, 4096)
    assert [r.num_samples for r in rows] == [32, 64, 128, 256, 512, 1024, 2048, 4096]
    assert rows[-1].theta == pytest.approx(MMLU_THETA, abs=TOL)
    assert rows[-1].threshold_minus_reference == pytest.approx(-1.6448536 * MMLU_SCALE, abs=TOL)


@pytest.mark.parametrize(("total", "sizes"), [(32, [32]), (20, [20]), (33, [32, 33]), (64, [32, 64])])
def test_plan_rows_small_totals(total: int, sizes: list[int]) -> None:
    assert [r.num_samples for r in plan_rows(50, 0.05, 0.2, total)] == sizes


def test_plan_rows_rejects_bad_total() -> None:
    with pytest.raises(ConfigError):
        plan_rows(50, 0.05, 0.2, 0)


def test_reference_measured_on_fewer_samples_keeps_alpha_exactly():
    # a run of 500 0/100 scores against a reference recorded on 57, both p = 0.5 (no drop): sqrt(2 sigma^2 / n)
    # with the run's n gave a false NO-GO rate of 0.228; sigma sqrt(1/500 + 1/57) keeps it at alpha. The rate is
    # a sum over both binomials (scipy), and the scale is read from the entry's recorded num_samples
    from scipy import stats as sps

    from benchmarks.calibration_grid.unpaired import product_params
    from runner.stats.numerics.ztest import decide

    params = product_params(500, 57)
    assert params.reference_samples == 57
    assert params.scale == pytest.approx(50.0 * math.sqrt(1 / 500 + 1 / 57), rel=1e-12)
    rate = 0.0
    for kr in range(58):
        ref = 100.0 * kr / 57
        # the smallest count of the run that passes; every count below it is a NO-GO
        first = next(k for k in range(501) if decide(100.0 * k / 500, ref, params).passed)
        rate += sps.binom.pmf(kr, 57, 0.5) * sps.binom.cdf(first - 1, 500, 0.5)
    assert rate <= 0.05
    assert product_params(57, 57).reference_samples is None  # equal n: TensorRT-LLM's formula, unchanged
    assert product_params(57, 57).scale == math.sqrt(2 * 2500 / 57)
