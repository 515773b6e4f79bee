"""The paired rule of the precedence table: it decides when the reference's per-sample scores pair with the run's
(all of them, or those that match under ``stats.method=paired``). The first of its inner rules that applies to the
pairs decides (McNemar/Tango for 0/100 scores, the betting, t or bootstrap test for others); when the job clusters,
the chosen rule is wrapped (:class:`runner.stats.rules.clustered.Clustered`). The inner rules and the wrapper are
given as values: a rule imports no other rule."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runner.stats.data import pairing
from runner.stats.data.claims import Claims
from runner.stats.data.paired_result import PairedResult
from runner.stats.data.pairing import PairedScores
from runner.stats.numerics import cluster_claims
from runner.stats.rules.base import Case, EntryCase, Outcome, Rule, reported


class Paired:
    """The per-sample rule on pairs: ``inner`` tried in order, ``wrap`` around the chosen one when the job
    clusters."""

    def __init__(self, inner: Sequence[Rule], wrap: Callable[[Rule], Rule]) -> None:
        self.inner = tuple(inner)
        self.wrap = wrap

    def applies(self, entry: EntryCase) -> str | None:
        if entry.rows is None or entry.stats.method == "unpaired":
            return "no per-sample reference scores to pair with (or stats.method=unpaired)"
        if entry.pairing_problem is not None:
            return entry.pairing_problem
        pairs = _pairs(entry)
        if pairs.n_matched < _run_size(entry) and entry.stats.method != "paired":
            return f"only {pairs.n_matched} of {_run_size(entry)} samples have reference scores"
        return None

    def decide(self, entry: EntryCase) -> Outcome:
        pairs, n = _pairs(entry), _run_size(entry)
        report = reported(entry)
        e = report.entry
        assert e.tolerance is not None
        clusters = None if e.labels is None or e.cluster_key is None else (e.cluster_key,
                                                                          [e.labels[i] for i in pairs.ids])
        case = Case(pairs, e.params, e.stats, e.margin, e.tolerance.points, e.notes, e.bounds, clusters)
        rule = self.chosen(case)
        found = rule.decide(case)
        if pairs.n_matched < n:
            e.notes.append(f"paired test on the {pairs.n_matched} of {n} samples the reference also scored")
        result, claims = found.result, found.claims
        shown = claims.regression
        claims = cluster_claims.too_few(claims, result.design_effect, e.stats, e.notes, paired=True)
        return Outcome("paired", result.passed or shown != claims.regression, report.verdict, result, claims,
                       clustering=result.design_effect, randomness=_randomness(result, claims, e.stats), advisor=rule)

    def chosen(self, case: Case) -> Rule:
        """The first inner rule that applies to the case's pairs (wrapped when it clusters)."""
        rule = next(r for r in self.inner if r.applies(case) is None)
        return self.wrap(rule) if case.clusters is not None else rule


def _pairs(entry: EntryCase) -> PairedScores:
    assert entry.rows is not None
    return pairing.pair_scores({k: r.score for k, r in entry.rows.items()}, {s.sample_id: s.score for s in entry.scored})


def _run_size(entry: EntryCase) -> int:
    """How many distinct samples the run scored."""
    return len({s.sample_id for s in entry.scored})


def _randomness(result: PairedResult, claims: Claims, stats: Any) -> str | None:
    """What chance entered a paired verdict: a seeded bootstrap's resamples (the seed is printed and recorded), or
    none (the betting test's order is fixed by the sample ids); None for the exact and t rules, which have none."""
    if result.discordant is not None:
        return None
    said = f"{result.method} {claims.method}".lower()
    if "bootstrap" in said:
        return f"stats.bootstrap_seed={stats.bootstrap_seed}: the paired bootstrap's resamples"
    if "betting" in said:
        return "none: the betting test bets in the order of the SHA-256 of the sample ids (no seed)"
    return None
