"""From a score and its reference to one decision: the precedence of the rules, tried in order."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from runner.contract.errors import ConfigError
from runner.contract.evaluator import CorpusMetric
from runner.stats.data import pairing
from runner.stats.data.claims import Claims
from runner.stats.data.entry import ReferenceEntry
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.paired_result import PairedResult
from runner.stats.data.pairing import PairedScores, is_binary, score_bounds
from runner.stats.data.tolerance import Tolerance
from runner.stats.decision import Decision
from runner.stats.numerics import cluster_variance as clustering, scale
from runner.stats.numerics.ztest import decide, unpaired_claims
from runner.stats.rules import clustered as clustered_rules
from runner.stats.rules.base import Case, Entry, EntryRule, Outcome, Rule, statistical
from runner.stats.rules.clustered import Clustered
from runner.stats.rules.corpus import Corpus
from runner.stats.rules.threshold import Threshold
from runner.stats.rules import unpaired_exact
from runner.stats.rules.paired_binary import PairedBinary, mcnemar_exact
from runner.stats.rules.paired_continuous import PairedContinuous, paired_continuous
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
    entry = Entry(reference, scored, score, params, stats, metric, margin, tolerance, notes, rows, pairing_problem,
                  cluster_key, corpus, score_bounds)
    rule = next(r for r in RULES if r.applies(entry) is None)
    found = rule.decide(entry)
    decision = Decision(found.rule, found.passed, found.verdict, found.paired, list(gates), notes,
                        claims=found.claims, tolerance=tolerance if found.claims is not None else None,
                        margin=margin, gate=stats.gate, mode=stats.verdicts, on_inconclusive=stats.on_inconclusive,
                        cluster_mode=stats.cluster, clustering=found.clustering, randomness=found.randomness,
                        unpaired_test=found.unpaired_test)
    if chance_level is not None and isinstance(rule, Sampled):
        # an undefined paired theta (too few disagreements) says nothing about room above chance: only a
        # reference at or past chance is then worth a warning
        theta = decision.theta if decision.theta is not None else 0.0
        warning = scale.near_chance_warning(reference.value, theta, chance_level, params.higher_is_better)
        if warning:
            notes.append(warning)
    return decision


class Sampled:
    """The statistical rule on per-sample scores: paired (the first of :data:`PAIRED_RULES` that applies) when the
    reference's rows pair with the run's, else unpaired (TensorRT-LLM's z-test, or the exact test of two binomials
    under ``stats.unpaired_test=exact``)."""

    def applies(self, entry: Entry) -> str | None:
        return None

    def decide(self, entry: Entry) -> Outcome:
        e = statistical(entry)
        assert e.tolerance is not None
        reference, scored, stats, notes, margin, rows = e.reference, e.scored, e.stats, e.notes, e.margin, e.rows
        params, key, labels = e.params, e.cluster_key, e.labels
        if rows and not all(r.score in (0.0, 100.0) for r in rows.values()):
            sigma = scale.estimate_sigma(r.score for r in rows.values())
            notes.append(f"sigma {sigma:.3f} estimated from the reference's {len(rows)} per-sample scores "
                         f"(configured {params.sigma:g})")
            params = replace(params, sigma=sigma)
        unpaired_deff = None
        if labels is not None:
            params, unpaired_deff = clustered_rules.unpaired_params(scored, labels, key, params, stats, notes)
        verdict = decide(e.score, reference.value, params, None, metric=e.metric, tolerance=margin)

        result = claims = None
        if rows is not None:
            problem = e.pairing_problem
            if problem is not None:
                pairing.unpaired_because(problem, stats.method, reference, "per-sample scores", notes)
            else:
                new_scores = {s.sample_id: s.score for s in scored}
                pairs = pairing.pair_scores({k: r.score for k, r in rows.items()}, new_scores)
                complete = pairs.n_matched == len(new_scores)
                if complete or stats.method == "paired":
                    clusters = None if labels is None else (key, [labels[i] for i in pairs.ids])
                    result, claims = _paired(pairs, params, stats, margin, e.tolerance.points, clusters, notes,
                                             e.bounds)
                    if not complete:
                        notes.append(f"paired test on the {pairs.n_matched} of {len(new_scores)} samples the "
                                     "reference also scored")
                else:
                    notes.append(f"unpaired test: only {pairs.n_matched} of {len(new_scores)} samples have reference "
                                 "scores (another subset); stats.method=paired uses the matched ones")
        elif stats.method == "paired":
            raise ConfigError("a paired test needs the reference's per-sample scores, and this entry has none",
                              where=f"{reference.path} entry {reference.index}", given="stats.method=paired",
                              fix="record the reference again with reference.mode=record, or use "
                                  "stats.method=auto|unpaired")
        exact = claims is None and getattr(stats, "unpaired_test", "ztest") == "exact"
        if exact:
            if unpaired_deff is not None:
                raise ConfigError("the exact unpaired test treats samples as independent, and this job clusters them",
                                  where="stats.unpaired_test", given=f"exact with stats.cluster=auto ({key})",
                                  fix="stats.cluster=off, or stats.unpaired_test=ztest (its sigma carries the design "
                                      "effect)")
            claims, p_regression = unpaired_exact.decide(scored, reference.value, params, margin, e.tolerance.points)
            verdict = replace(verdict, passed=not claims.regression, p_value=p_regression)
            notes.append(f"unpaired rule: the {unpaired_exact.TEST} decides both claims (stats.unpaired_test=exact); "
                         "the z-test's threshold is shown for comparison")
        elif claims is None:
            claims = unpaired_claims(verdict, margin, e.tolerance.points)
            if unpaired_deff is not None and unpaired_deff.applied != 1.0:
                claims = replace(claims, method="Wald, sigma x sqrt(design effect) (inverts the z-test both ways)")
            excess = unpaired_exact.excess_note(params, [s.score for s in scored], margin, e.tolerance.points)
            if excess is not None and unpaired_deff is None:
                notes.append(excess)

        deff = result.design_effect if result is not None else unpaired_deff
        shown = claims.regression
        claims = clustered_rules.too_few(claims, deff, stats, notes, paired=result is not None)
        passed = result.passed if result is not None else verdict.passed
        return Outcome("paired" if result is not None else "unpaired", passed or shown != claims.regression, verdict,
                       result, claims, clustering=deff, randomness=_randomness(result, claims, stats),
                       unpaired_test=unpaired_exact.TEST if exact else None)


RULES: tuple[EntryRule, ...] = (Threshold(), Corpus(), Sampled())
"""The precedence of the decision's rules: the first that applies decides."""


PAIRED_RULES: tuple[Rule, ...] = (PairedBinary(), PairedContinuous())
"""The paired rules in the order they are tried: the first that applies decides."""


def _paired(pairs: Any, params: HypothesisParams, stats: Any, margin: float, tolerance: float,
            clusters: tuple[str, list[str]] | None, notes: list[str],
            bounds: tuple[float, float] | None = None) -> tuple[Any, Claims]:
    """Both claims of the first paired rule that applies, with their interval; ``clusters``: the cluster key and
    each pair's cluster, when the job clusters (the rule is then wrapped: each claim needs both the clustered
    test of the mean difference and the rule's own, :class:`runner.stats.rules.clustered.Clustered`);
    ``bounds``: the task's score bounds."""
    case = Case(pairs, params, stats, margin, tolerance, notes, bounds, clusters)
    rule: Rule = next(r for r in PAIRED_RULES if r.applies(case) is None)
    if clusters is not None:
        rule = Clustered(rule)
    found = rule.decide(case)
    return found.result, found.claims


def _randomness(result: Any, claims: Claims, stats: Any) -> str | None:
    """What chance entered a paired verdict: a seeded bootstrap's resamples (the seed is printed and recorded), or
    none (the betting test's order is fixed by the sample ids); None for the exact and t rules, which have none."""
    if result is None or result.discordant is not None:
        return None
    said = f"{result.method} {claims.method}".lower()
    if "bootstrap" in said:
        return f"stats.bootstrap_seed={stats.bootstrap_seed}: the paired bootstrap's resamples"
    if "betting" in said:
        return "none: the betting test bets in the order of the SHA-256 of the sample ids (no seed)"
    return None



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
    if method == "auto":
        method = "mcnemar" if is_binary(pairs) else ("betting" if bounds is not None else "t")
    if method == "mcnemar":
        return mcnemar_exact(pairs.reference, pairs.new, alpha, beta, higher_is_better, gate=gate, margin=tolerance)
    if method == "betting" and bounds is None:
        raise ConfigError("the betting test needs bounded scores, and this task declares no score bounds",
                          where="stats.paired_test", given="betting",
                          fix="stats.paired_test=auto (the t-test for an unbounded metric such as perplexity)")
    return paired_continuous(pairs.reference, pairs.new, alpha, beta, higher_is_better, method=method, seed=seed,
                             tolerance=tolerance, gate=gate, bounds=bounds, truncation=truncation, ids=pairs.ids)


