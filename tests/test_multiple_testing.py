"""Holm and Benjamini-Hochberg against adjustments computed by hand."""

from __future__ import annotations

import pytest

from runner.errors import ConfigError
from runner.multiple_testing import adjust

# Four jobs' one-sided p-values, in job order.
P = [0.01, 0.04, 0.03, 0.005]


def test_holm_step_down_by_hand():
    # sorted: 0.005 x4 = 0.02, 0.01 x3 = 0.03, 0.03 x2 = 0.06, 0.04 x1 = 0.04 -> running max 0.06
    out = adjust(P, "holm", 0.05)
    assert out.p_adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert out.reject == [True, False, False, True]


def test_bh_step_up_by_hand():
    # sorted p(i) x m / i: 0.005x4/1 = 0.02, 0.01x4/2 = 0.02, 0.03x4/3 = 0.04, 0.04x4/4 = 0.04 (running min from the top)
    out = adjust(P, "bh", 0.05)
    assert out.p_adjusted == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert out.reject == [True, True, True, True]
    # at alpha 0.03 only the two smallest survive BH; Holm keeps only the smallest
    assert adjust(P, "bh", 0.03).reject == [True, False, False, True]
    assert adjust(P, "holm", 0.025).reject == [False, False, False, True]


def test_none_tests_each_job_alone_and_forty_jobs_need_correction():
    assert adjust(P, "none", 0.05).reject == [True, True, True, True]
    assert adjust(P, "none", 0.05).p_adjusted == P
    # 40 healthy configurations, one of which looks unlucky at p = 0.02: no sweep alarm after Holm
    # (0.02 x 40 = 0.8) or BH (0.02 x 40 / 1 = 0.8), an alarm without correction
    family = [0.02] + [0.5 + i / 100 for i in range(39)]
    assert not any(adjust(family, "holm").reject) and not any(adjust(family, "bh").reject)
    assert adjust(family, "holm").p_adjusted[0] == pytest.approx(0.8)
    assert adjust(family, "none").reject[0]


def test_empty_family_and_bad_settings():
    assert adjust([], "holm").reject == []
    with pytest.raises(ConfigError, match="sweep.correction"):
        adjust(P, "bonferonni")
    with pytest.raises(ConfigError, match="sweep.alpha"):
        adjust(P, "holm", 1.5)
