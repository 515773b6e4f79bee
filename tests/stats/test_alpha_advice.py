"""The fixed-look advice of a paired 0/100 job reaches its claim with the probability it states (issue 47)."""

from __future__ import annotations

from runner.stats.numerics.advice import binary_spread, more_samples
from runner.stats.numerics.paired_binomial import enumeration as en


def test_fixed_look_binary_advice_reaches_go_about_80_percent():
    """n0 = 100, 2 losses and 2 wins, tolerance 2.75: the normal formula's N (328) reached GO 0.716 of the time
    (exact); with the exact tests' continuity term it reaches 0.75-0.85."""
    spread, share = binary_spread(2, 2, 100)  # the observed difference, the truth the advice assumes
    advice = more_samples(0.0, spread, 100, 0.0, 2.75, 0.05, discordance=share)
    assert advice.target == "GO"
    reach = en.region_rate(en.go_cutoffs(advice.n_total, -0.0275, 0.05), advice.n_total, share, 0.5)
    assert 0.75 <= reach <= 0.85


def test_fixed_look_binary_advice_reaches_no_go_about_80_percent():
    """n0 = 200, 14 losses and 6 wins (McNemar p 0.058): the normal formula's N reached NO-GO 0.77 of the time."""
    spread, share = binary_spread(14, 6, 200)
    advice = more_samples(4.0, spread, 200, 0.0, 5.0, 0.05, discordance=share)
    assert advice.target == "NO-GO"
    reach = en.region_rate(en.mcnemar_cutoffs(advice.n_total, 0.05), advice.n_total, share,
                           (share - 0.04) / (2 * share))
    assert 0.78 <= reach <= 0.85
