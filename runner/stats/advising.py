"""The advice a decision gets: which sizing of :mod:`runner.stats.numerics.advice` fits the test that decided (McNemar's
spread for 0/100 pairs, the betting test's own simulation for bounded continuous pairs, the paired sd, or the
unpaired sigma against the reference's n), for the next planned look of an extendable run."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from runner.stats.numerics import betting_advice
from runner.stats.numerics.advice import Advice, binary_spread, more_samples
from runner.stats.rules.extension import ExtensionResult

if TYPE_CHECKING:
    from runner.stats.decision import Decision

def for_decision(decision: Decision, n_ref: int | None) -> Advice | None:
    """The advice for a decision from the observed data (``n_ref``: the unpaired reference's own n); the job
    asks for it at a fixed-n test and at an extendable run's look (not at a planned sequential design), where
    it is computed for the planned looks left and their bounds."""
    if decision.claims is None or decision.tolerance is None:
        return None
    params = decision.verdict.params
    drop = -decision.difference if params.higher_is_better else decision.difference
    seq = decision.sequential
    looks = seq.next_looks() if isinstance(seq, ExtensionResult) else None
    common = dict(drop=drop, margin=decision.margin, tolerance=decision.tolerance.points, alpha=params.alpha,
                  looks=looks)
    p = decision.paired
    inflate = math.sqrt(p.design_effect.applied) if p is not None and p.design_effect is not None else 1.0
    if p is not None and p.discordant is not None:
        spread, share = binary_spread(p.discordant[0], p.discordant[1], p.n)
        return more_samples(spread=spread * inflate, n=p.n, discordance=share, **common)
    if p is not None and p.betting is not None and p.design_effect is None and looks is None:
        return betting_advice.more_samples(p.betting, p.n, params.higher_is_better, drop, decision.margin,
                                           decision.tolerance.points, params.alpha)
    if p is not None:
        return more_samples(spread=(p.sd_diff or 0.0) * inflate, n=p.n, **common)
    return more_samples(spread=params.sigma, n=params.num_samples, n_ref=n_ref or params.num_samples, **common)
