"""Multiplicity correction at each test's own alpha: the textbook procedures when alphas are equal."""

from __future__ import annotations

import random

import pytest

from runner.errors import ConfigError
from runner.multiple_testing import adjust, validate


@pytest.mark.parametrize("method, sm", [("holm", "holm"), ("bh", "fdr_bh")])
def test_equal_alphas_reject_what_statsmodels_rejects(method, sm):
    from statsmodels.stats.multitest import multipletests

    rng = random.Random(3)
    for _ in range(200):
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
