"""From a score and its reference to one decision: the precedence of the rules, tried in order, and the
reference's measured noise applied after the rule that decided."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Mapping, Sequence

from runner.contract.evaluator import CorpusMetric
from runner.stats.data.claims import Claims
from runner.stats.data.entry import ReferenceEntry
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.indicators import TESTED, CleanSubset, CleanVerdict, IndicatorCheck, IndicatorData
from runner.stats.data.noise import MeasuredNoise
from runner.stats.data.verdicts import NO_GO
from runner.stats.data.paired_result import PairedResult
from runner.stats.data.pairing import PairedScores, is_binary, score_bounds
from runner.stats.data.tolerance import Tolerance
from runner.stats.decision import Decision
from runner.stats.numerics import scale
from runner.stats.numerics.indicators import paired_indicator
from runner.stats.rules.base import Case, EntryCase, EntryRule, Rule
from runner.stats.rules.clustered import Clustered
from runner.stats.rules.corpus import Corpus
from runner.stats.rules.paired import Paired
from runner.stats.rules.paired_binary import PairedBinary, mcnemar_exact
from runner.stats.rules.paired_continuous import PairedContinuous, continuous_method, paired_continuous
from runner.stats.rules.threshold import Threshold
from runner.stats.rules.unpaired import Unpaired
from runner.stats.settings import margin_points


def decide_against(reference: ReferenceEntry, scored: Sequence[Any], score: float, params: HypothesisParams,
                   stats: Any, chance_level: float | None, metric: str, rows: Mapping[str, Any] | None = None,
                   pairing_problem: str | None = None, gates: Sequence[Any] = (),
                   tolerance: Tolerance | None = None, cluster_key: str | None = None,
                   corpus: CorpusMetric | None = None, score_bounds: tuple[float, float] | None = None,
                   noise: MeasuredNoise | None = None, indicators: IndicatorData | None = None) -> Decision:
    """The decision of the first rule of :data:`RULES` that applies; ``params.num_samples`` is the number evaluated.

    ``rows``: the reference's per-sample scores by sample id (each with a ``score``), when the job loaded
    them; ``pairing_problem``: why they cannot be paired with ``scored`` (None: they can). The regression
    claim is tested at ``stats.margin``, the tolerance claim at ``tolerance`` (points). ``cluster_key``: the
    task's (a field of each sample's meta); with ``stats.cluster=auto`` the statistical rules use
    cluster-robust standard errors (:mod:`runner.stats.numerics.cluster_variance`). ``corpus``: the task's corpus metric over
    the samples' ``meta[CORPUS_ITEM]`` (None: the metric is the mean of the scores); its rules are the bootstrap's
    (:mod:`runner.stats.numerics.corpus_bootstrap`), resampling clusters where the job clusters. ``score_bounds``: the range of every
    per-sample score (the task's); with them a continuous metric's paired test is the finite-sample betting test.
    ``noise``: the reference's measured noise (:func:`floored`, :func:`host_failure_note`). ``indicators``: the
    run's and the reference's truncation and failure indicators (:func:`indicator_check`; None: not checked)."""

    def at(margin_stats: Any) -> Decision:
        entry = EntryCase(reference, scored, score, params, margin_stats, metric,
                          margin_points(margin_stats, reference.value), tolerance, [], rows, pairing_problem,
                          cluster_key, corpus, score_bounds)
        return _decided(entry, gates, chance_level)

    decision = at(stats)
    if noise is not None:
        decision = floored(decision, noise, decision.margin,
                           lambda line: at(replace(stats, margin=line, margin_unit="points")))
        label = host_failure_note(decision, noise, reference.value, reference.threshold)
        if label:
            decision.notes.append(label)
    if indicators is not None:
        def on_clean(clean: CleanSubset) -> Decision:
            return decide_against(reference, [s for s in scored if s.sample_id in clean.ids], clean.score,
                                  replace(params, num_samples=len(clean.ids)), stats, clean.chance_level, metric,
                                  rows=rows, pairing_problem=pairing_problem, gates=clean.gates, tolerance=tolerance,
                                  cluster_key=cluster_key, corpus=corpus, score_bounds=score_bounds, noise=noise)

        found = indicator_check(decision.alpha, indicators, pairing_problem, on_clean)
        if found is not None:
            decision.indicators = found
            decision.notes.extend(found.reasons())
    return decision


def _decided(entry: EntryCase, gates: Sequence[Any], chance_level: float | None) -> Decision:
    """The decision of the first rule of :data:`RULES` that applies to ``entry``."""
    rule = next(r for r in RULES if r.applies(entry) is None)
    found = rule.decide(entry)
    stats, tolerance = entry.stats, entry.tolerance
    decision = Decision(found.rule, found.passed, found.verdict, found.paired, list(gates), entry.notes,
                        claims=found.claims, tolerance=tolerance if found.claims is not None else None,
                        margin=entry.margin, gate=stats.gate, mode=stats.verdicts,
                        on_inconclusive=stats.on_inconclusive, cluster_mode=stats.cluster,
                        clustering=found.clustering, randomness=found.randomness, unpaired_test=found.unpaired_test,
                        advisor=found.advisor)
    if chance_level is not None and isinstance(rule, (Paired, Unpaired)):
        # an undefined paired theta (too few disagreements) says nothing about room above chance: only a
        # reference at or past chance is then worth a warning
        theta = decision.theta if decision.theta is not None else 0.0
        warning = scale.near_chance_warning(entry.reference.value, theta, chance_level,
                                            entry.params.higher_is_better)
        if warning:
            entry.notes.append(warning)
    if decision.tolerance is not None and not any("chance level" in n for n in entry.notes):
        note = scale.near_chance(entry.reference.value, decision.tolerance.points, chance_level,
                                 entry.params.higher_is_better)
        if note is not None:  # the look's own theta may be undefined (few disagreements): the tolerance is not
            entry.notes.append(note)
    return decision


PAIRED_RULES: tuple[Rule, ...] = (PairedBinary(), PairedContinuous())
"""The paired rules in the order they are tried: the first that applies decides."""

PAIRED = Paired(PAIRED_RULES, Clustered)
"""The paired rule of the table: its inner rules, clustering wrapping the chosen one when the job clusters."""

RULES: tuple[EntryRule, ...] = (Threshold(), Corpus(), PAIRED, Unpaired())
"""The precedence of the decision's rules: the first that applies decides."""


def paired_claims(pairs: PairedScores, params: HypothesisParams, stats: Any, margin: float, tolerance: float,
                  clusters: tuple[str, list[str]] | None, notes: list[str],
                  bounds: tuple[float, float] | None = None) -> tuple[PairedResult, Claims]:
    """Both claims of the paired rule the job would choose for these pairs, with its result: the entry point of the
    calibration grid and of tests that decide pairs without a reference entry. ``clusters``: the cluster key and
    each pair's cluster, when the job clusters; ``bounds``: the task's score bounds."""
    case = Case(pairs, params, stats, margin, tolerance, notes, bounds, clusters)
    found = PAIRED.chosen(case).decide(case)
    return found.result, found.claims


def paired_test(
    pairs: PairedScores,
    alpha: float,
    beta: float,
    higher_is_better: bool = True,
    method: str = "auto",
    seed: int = 0,
    tolerance: float = 0.0,
    gate: str = "regression",
    bounds: tuple[float, float] | None = None,
    truncation: float | None = None,
) -> PairedResult:
    """Run the fitting paired test: McNemar for binary scores, the betting test for other bounded scores, the
    t-test for unbounded ones.

    ``method`` is ``"auto"``, ``"mcnemar"``, ``"betting"``, ``"t"`` or ``"bootstrap"``. For binary scores a
    ``tolerance`` (the regression margin) moves McNemar's exact test to Tango's score test, which
    tests a shifted difference of paired proportions. ``bounds``: the range every per-sample score lies in
    (the task's ``score_bounds``); None: unbounded or unknown, except that binary scores are within [0, 100]
    (or [0, 1]).
    """
    bounds = score_bounds(pairs, bounds)
    if method == "mcnemar" or method == "auto" and is_binary(pairs):
        return mcnemar_exact(pairs.reference, pairs.new, alpha, beta, higher_is_better, gate=gate, margin=tolerance)
    method = continuous_method(method, bounds)
    return paired_continuous(pairs.reference, pairs.new, alpha, beta, higher_is_better, method=method, seed=seed,
                             tolerance=tolerance, gate=gate, bounds=bounds, truncation=truncation, ids=pairs.ids)


# --------------------------------------------------------------------------- the measured noise (reference.floor)
# A continuous paired rule tests its NO-GO claim against the larger of the margin and the A/A replicate's shift
# bound (the floor): a NO-GO at the margin that is not one at the floor is INCONCLUSIVE, "within the measured
# noise", and more samples are not advised (they cannot move a systematic shift). 0/100 rules keep their p-values
# (a symmetric flip only costs power); an exact rule or explicit threshold that fails on another host, where the
# replicate fails the same way, is labelled so.


def floored(decision: Decision, noise: MeasuredNoise, margin: float, redo: Callable[[float], Decision]) -> Decision:
    """``decision`` (at the stated ``margin``, points) with the floor applied: ``redo(line)`` decides again at the floor
    when it is above the margin and a continuous paired rule decided."""
    line = noise.floor
    if line is None or decision.paired is None or decision.paired.discordant is not None or decision.claims is None:
        return decision
    if line <= margin:
        decision.notes.append(f"noise floor {line:.4g} (the reference's A/A replicate) is within the margin {margin:g}")
        return decision
    raised = redo(line)
    raised.noise_floor, raised.stated_margin = line, margin
    raised.notes.append(f"noise floor: the NO-GO claim is tested against {line:.4g} = max(margin {margin:g}, the "
                        f"A/A shift's one-sided upper bound {line:.4g}) (reference.floor={noise.mode})")
    if decision.outcome == NO_GO and raised.outcome != NO_GO:
        raised.within_noise = True
        raised.notes.append(f"within the measured noise: a regression > {margin:g} is shown at the stated margin, but "
                            f"not one > the A/A floor {line:.4g}; more samples cannot move a systematic shift")
    return raised


def host_failure_note(decision: Decision, noise: MeasuredNoise, reference: float, threshold: float | None) -> str | None:
    """An exact rule or explicit threshold that failed on a host other than the reference's, where the entry's
    replicate fails the same way (it lost a sample an exact rule counts, or its shift reaches the line)."""
    if decision.rule not in ("explicit_threshold", "exact") or decision.outcome != NO_GO:
        return None
    room = abs(reference - (threshold if threshold is not None else reference))
    failing = [r for r in noise.replicates
               if (r.worse or 0) > 0 or (decision.rule == "explicit_threshold" and r.floor >= room)]
    if noise.host_differs is None or not failing:
        return None
    return (f"this failure is on a host other than the reference's ({noise.host_differs}), and the "
            f"reference's A/A replicate fails the same rule ({failing[0].describe()}): it may be the system's noise")


# --------------------------------------------------------------------------- truncation- and error-aware verdicts
# Each indicator a sample carries (the prompt cut, the token limit reached, the answer unparsed) is tested paired
# against the reference's rows; a run that shows one significantly more often compares truncations, not models:
# INCONCLUSIVE with the reason and the counts, and the verdict on the samples neither arm cut shown beside it. The
# backend's failures were left out of both arms by the job; above their cap the verdict is INCONCLUSIVE.


def indicator_check(alpha: float, data: IndicatorData, pairing_problem: str | None,
                    on_clean: Callable[[CleanSubset], Decision]) -> IndicatorCheck | None:
    """The indicators' check at ``alpha`` (its ``blocks``: the verdict is INCONCLUSIVE); None where there is nothing to
    check (a task without generated text, ``stats.indicators=off`` without failures). ``pairing_problem``: why the
    reference's rows are not this run's questions (then its arm is unknown); ``on_clean``: the decision on the clean
    samples, asked only when an indicator shows more often."""
    if (data.mode == "off" or not data.run) and data.failures is None:
        return None
    counts = {name: sum(1 for marks in data.run.values() if marks.get(name)) for name in TESTED}
    pairs = [] if pairing_problem is not None else [
        (data.reference[sid], marks) for sid, marks in data.run.items() if sid in data.reference]
    found = IndicatorCheck(data.mode, [], counts, len(data.run), bool(pairs), data.failures)
    if data.mode != "off" and pairs:
        for name in TESTED:
            both = [(bool(ref[name]), bool(run[name])) for ref, run in pairs
                    if ref.get(name) is not None and run.get(name) is not None]
            if both:
                found.tests.append(paired_indicator(name, both, alpha, data.allowances.get(name, 0.0)))
        if found.more_often and data.clean is not None:
            d = on_clean(data.clean)
            found.clean = CleanVerdict(len(data.clean.ids), d.outcome, d.verdict_line())
    return found
