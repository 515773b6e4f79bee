"""From a score and its reference to one decision, computed once and written everywhere.

Precedence (the first rule that applies decides):

1. **explicit threshold**: the reference entry registers ``threshold_override`` (or ``threshold``); the score is compared
   with it as upstream does (no p-value: the rule is deterministic).
2. **exact rule**: ``sigma`` is 0 (passkey retrieval): the threshold is the reference itself,
   so one lost passkey of 20 fails, as upstream.
3. **paired**: the reference kept per-sample scores for the same samples (same ids, seed,
   dataset source and prompts; ``stats.method=auto|paired``): McNemar's exact test for 0/100
   scores, the finite-sample betting test for other bounded scores, a paired t-test for unbounded ones. It needs far fewer samples for the same power.
4. **unpaired**: TensorRT-LLM's threshold test.

Rules 3 and 4 test two claims (:mod:`runner.stats.verdicts`): a drop beyond ``stats.margin`` (NO-GO)
and a drop within the tolerance (GO), with the interval that inverts both (:mod:`runner.stats.claims`);
neither shown is INCONCLUSIVE. Rules 1 and 2 are two-way: GO when they hold, NO-GO when they fail.
Extra gates (SCORE's consistency rate, a speculative run's acceptance length) can only make the verdict NO-GO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Protocol, Sequence

from runner.contract.errors import ConfigError
from runner.contract.evaluator import CorpusMetric
from runner.stats import claims as claim_rules, decision_text, paired as paired_stats
from runner.stats.clustered import rules as clustered_rules, variance as clustering
from runner.stats import pairing, scale
from runner.stats.corpus.rules import decide_corpus
from runner.stats.entry import ReferenceEntry
from runner.stats.settings import margin_points
from runner.stats.unpaired.ztest import HypothesisParams, Verdict, decide
from runner.stats.decision_text import RULES, STATISTICAL_RULES
from runner.stats.verdicts import GO, INCONCLUSIVE, NO_GO, Claims, Tolerance, combine, exit_status, reported

__all__ = ["RULES", "STATISTICAL_RULES", "Decision", "decide_against"]


class Gate(Protocol):
    """A further pass/fail check of a task against the same reference (SCORE's consistency rate)."""

    metric: str
    alpha: float

    @property
    def checked(self) -> bool: ...

    @property
    def passed(self) -> bool: ...

    @property
    def p_value(self) -> float: ...

    def render(self) -> str: ...

    def metrics(self) -> dict[str, float]: ...


@dataclass
class Decision:
    """The one decision of a job: the rule that decided, its claims and interval, every gate, the verdict."""

    rule: str  # explicit_threshold | exact | paired | unpaired
    passed: bool  # no regression shown by the accuracy rule (the NO-GO claim did not hold)
    verdict: Verdict  # the unpaired TensorRT-LLM test, always computed and shown
    paired: Any = None  # runner.stats.paired_result.PairedResult when a paired test decided
    gates: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sequential: Any = None  # runner.stats.sequential.monitor.SequentialResult when the gate looked sequentially
    claims: Claims | None = None  # None for the deterministic rules, and for looks that carried no information
    tolerance: Tolerance | None = None
    margin: float = 0.0
    gate: str = "regression"  # which claim wins when both are shown
    mode: str = "three_way"
    on_inconclusive: str = "inconclusive"
    advice: Any = None  # runner.stats.advice.Advice when INCONCLUSIVE
    # the clusters of the samples the deciding test used (runner.stats.clustered.variance.DesignEffect); None: stats.cluster
    # is off or the task declares no cluster key
    clustering: Any = None
    cluster_mode: str = "off"  # stats.cluster

    @property
    def all_passed(self) -> bool:
        """No regression shown anywhere (TensorRT-LLM's PASS: GO or INCONCLUSIVE)."""
        return self.passed and all(g.passed for g in self.gates)

    @property
    def both_shown(self) -> bool:
        return self.claims is not None and self.claims.regression and self.claims.within

    @property
    def outcome(self) -> str:
        """GO, NO-GO or INCONCLUSIVE. Extra gates can only make it NO-GO; the deterministic rules are
        two-way by construction (their registered threshold is the tolerance)."""
        if any(not g.passed for g in self.gates) or not self.passed and self.claims is None:
            return NO_GO
        if self.claims is None:
            return GO if self.rule not in STATISTICAL_RULES else INCONCLUSIVE
        return combine(self.claims.regression, self.claims.within, self.gate)

    @property
    def reported(self) -> str:
        return reported(self.outcome, self.mode)

    @property
    def exit_status(self) -> int:
        return exit_status(self.outcome, self.mode, self.on_inconclusive)

    @property
    def alpha(self) -> float:
        return self.verdict.params.alpha

    @property
    def n(self) -> int:
        return self.verdict.params.num_samples

    @property
    def p_value(self) -> float | None:
        """The p-value of the regression rule that decided (None for the deterministic rules)."""
        if self.sequential is not None:
            return self.sequential.p_value
        if self.rule == "paired":
            return self.paired.p_value
        if self.rule == "unpaired":
            return self.verdict.p_value
        return None

    @property
    def p_within(self) -> float | None:
        """The p-value of the tolerance claim (H0: drop >= tolerance)."""
        return self.claims.p_within if self.claims is not None else None

    @property
    def theta(self) -> float | None:
        if self.sequential is not None:
            return self.sequential.theta
        if self.rule == "paired":
            return self.paired.theta_paired if math.isfinite(self.paired.theta_paired) else None
        if self.rule == "explicit_threshold":
            return None
        return self.verdict.theta

    @property
    def difference(self) -> float:
        """new - reference in metric units (on the paired samples when a paired test decided)."""
        if self.sequential is not None:
            return self.sequential.looks[-1].estimate
        return self.paired.mean_diff if self.rule == "paired" else self.verdict.difference

    @property
    def ci(self) -> tuple[float, float] | None:
        """The two one-sided 1 - alpha bounds for new - reference (low, high), each on the side of its
        threshold that its claim decided (:meth:`Claims.agreeing`)."""
        if self.claims is None:
            return None
        tol = self.tolerance.points if self.tolerance is not None else 0.0
        return self.claims.agreeing(self.margin, tol, self.verdict.params.higher_is_better).ci

    @property
    def bounds(self) -> tuple[float, float] | None:
        """``(GO bound, NO-GO bound)`` for new - reference: the ends of :attr:`ci` that the two claims invert."""
        ci = self.ci
        if ci is None:
            return None
        return ci if self.verdict.params.higher_is_better else (ci[1], ci[0])

    def bounds_text(self) -> str:
        """Both bounds in words, each with the threshold it must pass and the digits that decide."""
        return decision_text.bounds_text(self)

    @property
    def ci_method(self) -> str:
        return self.claims.method if self.claims is not None else f"none: {self.no_interval}"

    @property
    def no_interval(self) -> str:
        return ("a deterministic rule has no interval" if self.rule not in STATISTICAL_RULES
                else "no look carried information (no discordant pair)")

    @property
    def test(self) -> str:
        if self.sequential is not None:
            return self.sequential.test
        return {"explicit_threshold": "explicit threshold", "exact": "exact rule (sigma 0)",
                "unpaired": "TensorRT-LLM unpaired z-test"}.get(self.rule) or self.paired.method

    def hypothesis(self) -> str:
        """The claims tested, in words, in the metric's own direction."""
        return decision_text.hypothesis(self)

    def figures(self) -> decision_text.Figures:
        """The deciding rule's figures on the samples it used: what every table shows."""
        return decision_text.figures(self)

    def tests(self) -> list[dict[str, Any]]:
        """Every claim of the job, each with its rule, p-value and alpha (what a sweep corrects for
        multiplicity): the regression claim, the tolerance claim, and the extra gates."""
        out = [{"name": "accuracy", "rule": self.rule, "gate": "regression", "p_value": self.p_value,
                "alpha": self.alpha, "passed": self.passed}]
        if self.claims is not None:
            out.append({"name": "accuracy", "rule": self.rule, "gate": "noninferiority", "p_value": self.p_within,
                        "alpha": self.alpha, "passed": self.claims.within})
        for g in self.gates:
            if g.checked:  # a gate with a deterministic rule (acceptance length) keeps its own verdict in a sweep
                rule = getattr(g, "rule", "unpaired")
                out.append({"name": g.metric, "rule": rule, "gate": "regression",
                            "p_value": g.p_value if rule in STATISTICAL_RULES else None,
                            "alpha": g.alpha, "passed": g.passed})
        return out

    def to_dict(self) -> dict[str, Any]:
        """The record written to report.json and read by the sweep summary."""
        return decision_text.to_dict(self)

    def metrics(self) -> dict[str, float]:
        """MLflow metrics: the same figures as the report (undefined ones are left out)."""
        return decision_text.metrics(self)

    def verdict_line(self) -> str:
        """The verdict in words: what was shown, or what was not."""
        return decision_text.verdict_line(self)

    def render(self) -> str:
        """The report block: the verdict first, then the tests it rests on."""
        return decision_text.render(self)



def _deterministic_rule(reference: ReferenceEntry, params: HypothesisParams) -> str | None:
    if reference.threshold is not None:
        return "explicit_threshold"
    if params.sigma == 0:
        return "exact"
    return None


def decide_against(reference: ReferenceEntry, scored: Sequence[Any], score: float, params: HypothesisParams,
                   stats: Any, chance_level: float | None, metric: str, rows: Mapping[str, Any] | None = None,
                   pairing_problem: str | None = None, gates: Sequence[Any] = (),
                   tolerance: Tolerance | None = None, cluster_key: str | None = None,
                   corpus: CorpusMetric | None = None, score_bounds: tuple[float, float] | None = None) -> Decision:
    """Apply the precedence of the module docstring; ``params.num_samples`` is the number evaluated.

    ``rows``: the reference's per-sample scores by sample id (each with a ``score``), when the job loaded
    them; ``pairing_problem``: why they cannot be paired with ``scored`` (None: they can). The regression
    claim is tested at ``stats.margin``, the tolerance claim at ``tolerance`` (points). ``cluster_key``: the
    task's (a field of each sample's meta); with ``stats.cluster=auto`` the statistical rules use
    cluster-robust standard errors (:mod:`runner.stats.clustered.variance`). ``corpus``: the task's corpus metric over
    the samples' ``meta[CORPUS_ITEM]`` (None: the metric is the mean of the scores); its rules are the bootstrap's
    (:mod:`runner.stats.corpus.bootstrap`), resampling clusters where the job clusters. ``score_bounds``: the range of every
    per-sample score (the task's); with them a continuous metric's paired test is the finite-sample betting test."""

    notes: list[str] = []
    margin = margin_points(stats, reference.value)
    common = dict(margin=margin, gate=stats.gate, mode=stats.verdicts, on_inconclusive=stats.on_inconclusive,
                  cluster_mode=stats.cluster)
    rule = _deterministic_rule(reference, params)
    if rule is not None:
        if margin or stats.tolerance is not None:
            notes.append(f"stats.margin and stats.tolerance do not apply to the {rule.replace('_', ' ')} rule of this "
                         "entry: its verdict is GO when the rule holds, NO-GO when it fails")
        verdict = decide(score, reference.value, params, reference.threshold, metric=metric)
        return Decision(rule, verdict.passed, verdict, None, list(gates), notes, **common)
    if tolerance is None:
        raise ValueError("a statistical rule needs the tolerance of the GO claim")

    n_ref = reference.samples_measured
    if n_ref is not None and n_ref != params.num_samples:
        params = replace(params, reference_samples=n_ref)
        notes.append(f"unpaired test: the reference was measured on {n_ref} samples and this run on "
                     f"{params.num_samples}: scale sigma sqrt(1/n + 1/n_ref)")
    if stats.method == "unpaired":
        rows = None
    key = cluster_key if stats.cluster == "auto" else None
    labels = clustering.labels_of(scored, key) if key else None
    if corpus is not None:
        found = decide_corpus(reference, scored, score, params, stats, corpus, metric, rows, pairing_problem, labels,
                              margin, tolerance.points, notes)
        return Decision("paired" if found.paired is not None else "unpaired",
                        (found.paired or found.verdict).passed, found.verdict, found.paired, list(gates), notes,
                        claims=found.claims, tolerance=tolerance, **common)
    if rows and not all(r.score in (0.0, 100.0) for r in rows.values()):
        sigma = scale.estimate_sigma(r.score for r in rows.values())
        notes.append(f"sigma {sigma:.3f} estimated from the reference's {len(rows)} per-sample scores "
                     f"(configured {params.sigma:g})")
        params = replace(params, sigma=sigma)
    unpaired_deff = None
    if labels is not None:
        params, unpaired_deff = clustered_rules.unpaired_params(scored, labels, key, params, stats, notes)
    verdict = decide(score, reference.value, params, None, metric=metric, tolerance=margin)

    result = claims = None
    if rows is not None:
        problem = pairing_problem
        if problem is not None:
            pairing.unpaired_because(problem, stats.method, reference, "per-sample scores", notes)
        else:
            new_scores = {s.sample_id: s.score for s in scored}
            pairs = pairing.pair_scores({k: r.score for k, r in rows.items()}, new_scores)
            complete = pairs.n_matched == len(new_scores)
            if complete or stats.method == "paired":
                clusters = None if labels is None else (key, [labels[i] for i in pairs.ids])
                result, claims = _paired(pairs, params, stats, margin, tolerance.points, clusters, notes,
                                         score_bounds)
                if not complete:
                    notes.append(f"paired test on the {pairs.n_matched} of {len(new_scores)} samples the reference also scored")
            else:
                notes.append(f"unpaired test: only {pairs.n_matched} of {len(new_scores)} samples have reference scores "
                             "(another subset); stats.method=paired uses the matched ones")
    elif stats.method == "paired":
        raise ConfigError("a paired test needs the reference's per-sample scores, and this entry has none",
                          where=f"{reference.path} entry {reference.index}", given="stats.method=paired",
                          fix="record the reference again with reference.mode=record, or use stats.method=auto|unpaired")
    if claims is None:
        claims = claim_rules.unpaired(verdict, margin, tolerance.points)
        if unpaired_deff is not None and unpaired_deff.applied != 1.0:
            claims = replace(claims, method="Wald, sigma x sqrt(design effect) (inverts the z-test both ways)")

    deff = result.design_effect if result is not None else unpaired_deff
    shown = claims.regression
    claims = clustered_rules.too_few(claims, deff, stats, notes)
    passed = result.passed if result is not None else verdict.passed
    decision = Decision("paired" if result is not None else "unpaired", passed or shown != claims.regression,
                        verdict, result, list(gates), notes, claims=claims, tolerance=tolerance, **common,
                        clustering=deff)
    if chance_level is not None:
        # an undefined paired theta (too few disagreements) says nothing about room above chance: only a
        # reference at or past chance is then worth a warning
        theta = decision.theta if decision.theta is not None else 0.0
        warning = scale.near_chance_warning(reference.value, theta, chance_level, params.higher_is_better)
        if warning:
            notes.append(warning)
    return decision


def _paired(pairs: Any, params: HypothesisParams, stats: Any, margin: float, tolerance: float,
            clusters: tuple[str, list[str]] | None, notes: list[str],
            bounds: tuple[float, float] | None = None) -> tuple[Any, Claims]:
    """The paired test of the regression claim, and both claims with their interval; ``clusters``: the cluster
    key and each pair's cluster, when the job clusters (each claim then needs both the clustered test of the mean
    difference and the independent test: :func:`runner.stats.clustered.rules.paired`); ``bounds``: the task's score
    bounds."""

    if clusters is not None:
        independent = _paired(pairs, params, stats, margin, tolerance, None, notes, bounds)
        return clustered_rules.paired(pairs, params, stats, margin, tolerance, *clusters, notes, independent)
    kw = dict(method=stats.paired_test, seed=stats.bootstrap_seed, bounds=bounds,
              truncation=getattr(stats, "betting_truncation", None))
    result = paired_stats.paired_test(pairs, params.alpha, params.beta, params.higher_is_better, tolerance=margin,
                                      gate="regression", **kw)
    if result.discordant is not None:
        b, c = result.discordant
        return result, claim_rules.binary(b, c, result.n, params.alpha, params.higher_is_better, margin, tolerance,
                                          not result.passed)
    within = paired_stats.paired_test(pairs, params.alpha, params.beta, params.higher_is_better, tolerance=tolerance,
                                      gate="noninferiority", **kw)
    if result.method != paired_stats.BETTING:
        notes.append(_asymptotic_note(stats.paired_test, paired_stats.score_bounds(pairs, bounds) is not None))
    return result, claim_rules.continuous(result, within)


def _asymptotic_note(chosen: str, bounded: bool) -> str:
    """Why a continuous metric's verdict rests on a test whose alpha holds only for large n."""
    if bounded:
        return (f"stats.paired_test={chosen}: an asymptotic test; with few changed samples or skewed differences its "
                "false GO / NO-GO rate can exceed alpha (stats.paired_test=auto uses the finite-sample betting test)")
    return ("the task declares no score bounds (an unbounded metric): the paired t-test decides, and its alpha holds "
            "only for large n; no test of an unbounded mean holds it at every n (Bahadur & Savage 1956)")

