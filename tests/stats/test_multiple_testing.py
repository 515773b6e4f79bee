"""Multiplicity correction at each test's own alpha: the textbook procedures when alphas are equal."""

from __future__ import annotations

import random

import pytest

from runner.contract.errors import ConfigError
from runner.stats.multiple_testing import adjust, validate


@pytest.mark.parametrize("method, sm", [("holm", "holm"), ("bh", "fdr_bh")])
def test_equal_alphas_reject_what_statsmodels_rejects(method, sm, monkeypatch):
    import gc

    from statsmodels.stats.multitest import multipletests

    # statsmodels' holm runs gc.collect() on every call: in a worker holding torch and a model that is ~0.5 s a
    # call. Collecting garbage changes no result, so the oracle runs without it.
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    rng = random.Random(3)
    for _ in range(50):  # 50 random families of 1-12 tests
        m = rng.randint(1, 12)
        p = [rng.random() ** 3 for _ in range(m)]
        ours = adjust(p, [0.05] * m, method)
        reject, corrected, _, _ = multipletests(p, alpha=0.05, method=sm)
        assert ours.reject == list(reject)
        assert ours.p_adjusted == pytest.approx(list(corrected))


def test_none_is_each_test_at_its_own_alpha():
    out = adjust([0.001, 0.002, 0.009, 0.011], [0.002, 0.002, 0.01, 0.01], "none")
    assert out.reject == [True, False, True, False]  # p < alpha, strictly


def test_holm_with_mixed_alphas_by_hand():
    # u = p / alpha = (0.5, 0.3, 2.0): order 0.3, 0.5, 2.0 -> u_adj 0.9, max(0.9, 1.0), max(1.0, 2.0)
    out = adjust([0.001, 0.015, 0.1], [0.002, 0.05, 0.05], "holm")
    assert out.reject == [False, True, False]
    assert out.p_adjusted == pytest.approx([0.002, 0.045, 0.1])


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="sweep.correction"):
        validate("bonferroni", None)
    with pytest.raises(ConfigError, match="sweep.alpha"):
        validate("holm", 1.5)


# Four jobs' one-sided p-values, in job order, all at alpha 0.05.
P = [0.01, 0.04, 0.03, 0.005]
A = [0.05] * 4


def test_holm_step_down_by_hand():
    # sorted: 0.005 x4 = 0.02, 0.01 x3 = 0.03, 0.03 x2 = 0.06, 0.04 x1 = 0.04 -> running max 0.06
    out = adjust(P, A, "holm")
    assert out.p_adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert out.reject == [True, False, False, True]


def test_bh_step_up_by_hand():
    # sorted p(i) x m / i: 0.005x4/1 = 0.02, 0.01x4/2 = 0.02, 0.03x4/3 = 0.04, 0.04x4/4 = 0.04 (running min from the top)
    out = adjust(P, A, "bh")
    assert out.p_adjusted == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert out.reject == [True, True, True, True]
    # at alpha 0.03 only the two smallest survive BH; Holm at 0.025 keeps only the smallest
    assert adjust(P, [0.03] * 4, "bh").reject == [True, False, False, True]
    assert adjust(P, [0.025] * 4, "holm").reject == [False, False, False, True]


def test_forty_jobs_need_correction():
    assert adjust(P, A, "none").reject == [True, True, True, True]
    assert adjust(P, A, "none").p_adjusted == P
    # 40 healthy configurations, one of which looks unlucky at p = 0.02: no sweep alarm after Holm
    # (0.02 x 40 = 0.8) or BH (0.02 x 40 / 1 = 0.8), an alarm without correction
    family = [0.02] + [0.5 + i / 100 for i in range(39)]
    alphas = [0.05] * 40
    assert not any(adjust(family, alphas, "holm").reject) and not any(adjust(family, alphas, "bh").reject)
    assert adjust(family, alphas, "holm").p_adjusted[0] == pytest.approx(0.8)
    assert adjust(family, alphas, "none").reject[0]


def test_empty_family():
    assert adjust([], [], "holm").reject == []
