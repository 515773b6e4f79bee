"""The deterministic rules, first in the precedence: an entry's explicit threshold (the score must reach it), or
a reference with sigma 0 (the score must equal it). TensorRT-LLM's report decides them
(:func:`runner.stats.numerics.ztest.decide`); no claim is made, so the margin and the tolerance do not apply."""

from __future__ import annotations

from runner.stats.numerics.ztest import decide
from runner.stats.rules.base import EntryCase, Outcome
from runner.stats.numerics.advice import Advice, AdviceCase


class Threshold:
    """The explicit-threshold rule, or the exact rule of a sigma-0 reference."""

    def applies(self, entry: EntryCase) -> str | None:
        if _name(entry) is None:
            return "the entry has no explicit threshold and a nonzero sigma"
        return None

    def decide(self, entry: EntryCase) -> Outcome:
        rule = _name(entry)
        assert rule is not None
        if entry.margin or entry.stats.tolerance is not None:
            entry.notes.append(f"stats.margin and stats.tolerance do not apply to the {rule.replace('_', ' ')} rule "
                               "of this entry: its verdict is GO when the rule holds, NO-GO when it fails")
        verdict = decide(entry.score, entry.reference.value, entry.params, entry.reference.threshold,
                         metric=entry.metric)
        return Outcome(rule, verdict.passed, verdict, advisor=self)

    def advise(self, case: AdviceCase) -> Advice | None:
        """None: a deterministic rule is never INCONCLUSIVE, and no sample count changes it."""
        return None


def _name(entry: EntryCase) -> str | None:
    if entry.reference.threshold is not None:
        return "explicit_threshold"
    if entry.params.sigma == 0:
        return "exact"
    return None
