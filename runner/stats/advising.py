"""The advice a decision gets: the deciding rule's own (:class:`runner.stats.rules.base.Advisor`), read from the
finished decision: McNemar's spread for 0/100 pairs, the betting test's own simulation for bounded continuous pairs,
the paired sd, or the unpaired sigma against the reference's n, for the next planned look of an extendable run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.stats.numerics.advice import Advice, AdviceCase
from runner.stats.rules.extension import ExtensionResult

if TYPE_CHECKING:
    from runner.stats.decision import Decision


def for_decision(decision: Decision, n_ref: int | None) -> Advice | None:
    """The advice for a decision from the observed data (``n_ref``: the unpaired reference's own n); the job
    asks for it at a fixed-n test and at an extendable run's look (not at a planned sequential design), where
    it is computed for the planned looks left and their bounds."""
    if decision.claims is None or decision.tolerance is None or decision.advisor is None:
        return None
    params = decision.verdict.params
    drop = -decision.difference if params.higher_is_better else decision.difference
    seq = decision.sequential
    looks = seq.next_looks() if isinstance(seq, ExtensionResult) else None
    case = AdviceCase(drop, decision.margin, decision.tolerance.points, params, decision.paired, n_ref, looks,
                      decision.claims.method, decision.claims.least_n)
    return decision.advisor.advise(case)
