"""From a score and its reference to one decision: the precedence of the rules, tried in order."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from runner.contract.evaluator import CorpusMetric
from runner.stats.data.claims import Claims
from runner.stats.data.entry import ReferenceEntry
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.paired_result import PairedResult
from runner.stats.data.pairing import PairedScores, is_binary, score_bounds
from runner.stats.data.tolerance import Tolerance
from runner.stats.decision import Decision
from runner.stats.numerics import scale
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
                   corpus: CorpusMetric | None = None, score_bounds: tuple[float, float] | None = None) -> Decision:
    """The decision of the first rule of :data:`RULES` that applies; ``params.num_samples`` is the number evaluated.

    ``rows``: the reference's per-sample scores by sample id (each with a ``score``), when the job loaded
    them; ``pairing_problem``: why they cannot be paired with ``scored`` (None: they can). The regression
    claim is tested at ``stats.margin``, the tolerance claim at ``tolerance`` (points). ``cluster_key``: the
    task's (a field of each sample's meta); with ``stats.cluster=auto`` the statistical rules use
    cluster-robust standard errors (:mod:`runner.stats.numerics.cluster_variance`). ``corpus``: the task's corpus metric over
    the samples' ``meta[CORPUS_ITEM]`` (None: the metric is the mean of the scores); its rules are the bootstrap's
    (:mod:`runner.stats.numerics.corpus_bootstrap`), resampling clusters where the job clusters. ``score_bounds``: the range of every
    per-sample score (the task's); with them a continuous metric's paired test is the finite-sample betting test."""

    notes: list[str] = []
    margin = margin_points(stats, reference.value)
    entry = EntryCase(reference, scored, score, params, stats, metric, margin, tolerance, notes, rows, pairing_problem,
                  cluster_key, corpus, score_bounds)
    rule = next(r for r in RULES if r.applies(entry) is None)
    found = rule.decide(entry)
    decision = Decision(found.rule, found.passed, found.verdict, found.paired, list(gates), notes,
                        claims=found.claims, tolerance=tolerance if found.claims is not None else None,
                        margin=margin, gate=stats.gate, mode=stats.verdicts, on_inconclusive=stats.on_inconclusive,
                        cluster_mode=stats.cluster, clustering=found.clustering, randomness=found.randomness,
                        unpaired_test=found.unpaired_test)
    if chance_level is not None and isinstance(rule, (Paired, Unpaired)):
        # an undefined paired theta (too few disagreements) says nothing about room above chance: only a
        # reference at or past chance is then worth a warning
        theta = decision.theta if decision.theta is not None else 0.0
        warning = scale.near_chance_warning(reference.value, theta, chance_level, params.higher_is_better)
        if warning:
            notes.append(warning)
    return decision


PAIRED_RULES: tuple[Rule, ...] = (PairedBinary(), PairedContinuous())
"""The paired rules in the order they are tried: the first that applies decides."""

PAIRED = Paired(PAIRED_RULES, Clustered)
"""The paired rule of the table: its inner rules, clustering wrapping the chosen one when the job clusters."""

RULES: tuple[EntryRule, ...] = (Threshold(), Corpus(), PAIRED, Unpaired())
"""The precedence of the decision's rules: the first that applies decides."""


def _paired(pairs: Any, params: HypothesisParams, stats: Any, margin: float, tolerance: float,
            clusters: tuple[str, list[str]] | None, notes: list[str],
            bounds: tuple[float, float] | None = None) -> tuple[Any, Claims]:
    """Both claims of the first paired rule that applies, with their interval; ``clusters``: the cluster key and
    each pair's cluster, when the job clusters; ``bounds``: the task's score bounds."""
    found = PAIRED.found(Case(pairs, params, stats, margin, tolerance, notes, bounds, clusters))
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


