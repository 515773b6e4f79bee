"""The small protocols the rules answer: does a rule apply (and why not), what it decides, and its advice on an
INCONCLUSIVE outcome (:class:`Advisor`: the deciding rule names itself, or its inner rule, in the outcome). The dispatcher's
precedence table holds :class:`EntryRule` objects (threshold/exact, corpus, paired or unpaired), tried in order on
one :class:`EntryCase`; the paired rule tries its :class:`Rule` objects in order on one :class:`Case`. Clustering wraps
an inner rule (:class:`runner.stats.rules.clustered.Clustered`), it does not recurse through the dispatcher."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Protocol, Sequence

from runner.contract.evaluator import CorpusMetric
from runner.stats.data.claims import Claims
from runner.stats.data.entry import ReferenceEntry
from runner.stats.data.hypothesis import HypothesisParams, Verdict
from runner.stats.data.tolerance import Tolerance
from runner.stats.numerics import cluster_claims, cluster_variance, scale, ztest
from runner.stats.numerics.advice import Advice, AdviceCase
from runner.stats.data.paired_result import PairedResult
from runner.stats.data.pairing import PairedScores

AUTO = ("auto", "auto_t")
"""The ``stats.paired_test`` values that let the scores choose the paired rule (0/100: McNemar; bounded: betting;
unbounded: no claim under ``auto``, the t-test under ``auto_t``)."""


@dataclass
class Case:
    """What a paired rule decides on: the pairs, the test's numbers, the margin of the NO-GO claim and the tolerance
    of the GO claim (points), the notes the decision prints, the task's declared score bounds and, when the job
    clusters, the cluster key and each pair's cluster."""

    pairs: PairedScores
    params: HypothesisParams
    stats: Any
    margin: float
    tolerance: float
    notes: list[str]
    bounds: tuple[float, float] | None = None
    clusters: tuple[str, list[str]] | None = None


@dataclass(frozen=True)
class Found:
    """A rule's outcome: the test of the NO-GO claim, and both claims with the bounds that invert them."""

    result: PairedResult
    claims: Claims


class Advisor(Protocol):
    """What advises an INCONCLUSIVE decision: the rule that decided it."""

    def advise(self, case: AdviceCase) -> Advice | None:
        """How many more samples would reach a claim (None: none would, or the rule gives no such advice)."""
        ...


class Rule(Advisor, Protocol):
    """A paired rule of the decision: does it apply (and why not), both claims on the pairs, and its advice."""

    def applies(self, case: Case) -> str | None:
        """None when the rule decides this case; else why it does not (in words)."""
        ...

    def decide(self, case: Case) -> Found:
        """Both claims on the case's pairs."""
        ...


@dataclass
class EntryCase:
    """What the decision's precedence table reads: the reference entry, the run's scored samples and score, the
    test's numbers, the configured ``stats``, the margin of the NO-GO claim (points) and the tolerance of the GO
    claim, the notes the decision prints, and what the job loaded beside them (the reference's per-sample rows and
    why they cannot pair, the task's cluster key, corpus metric and score bounds)."""

    reference: ReferenceEntry
    scored: Sequence[Any]
    score: float
    params: HypothesisParams
    stats: Any
    metric: str
    margin: float
    tolerance: Tolerance | None
    notes: list[str]
    rows: Mapping[str, Any] | None = None
    pairing_problem: str | None = None
    cluster_key: str | None = None
    corpus: CorpusMetric | None = None
    bounds: tuple[float, float] | None = None
    labels: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Outcome:
    """What a rule of the table decided: its name (explicit_threshold | exact | paired | unpaired), whether no
    regression was shown, the unpaired report (always), the paired test and both claims where it made them, and
    what the decision records beside them."""

    rule: str
    passed: bool
    verdict: Verdict
    paired: PairedResult | None = None
    claims: Claims | None = None
    clustering: Any = None
    randomness: str | None = None
    unpaired_test: str | None = None
    advisor: Advisor | None = None  # the rule whose advice fits this outcome (the paired rule's: its inner rule)


class EntryRule(Protocol):
    """A rule of the decision's precedence table: the dispatcher tries them in order, the first that applies
    decides; its outcome names the rule that advises on it (:class:`Advisor`)."""

    def applies(self, entry: EntryCase) -> str | None:
        """None when the rule decides this entry; else why it does not (in words)."""
        ...

    def decide(self, entry: EntryCase) -> Outcome:
        """The rule's verdict (and claims, for a statistical rule) on the entry."""
        ...


def statistical(entry: EntryCase) -> EntryCase:
    """The entry as every statistical rule reads it: the unpaired sigma scaled to the reference's n where that
    differs, the rows dropped under ``stats.method=unpaired``, each sample's cluster under ``stats.cluster=auto``.
    Appends its notes to ``entry.notes``."""
    if entry.tolerance is None:
        raise ValueError("a statistical rule needs the tolerance of the GO claim")
    params, rows = entry.params, entry.rows
    n_ref = entry.reference.samples_measured
    if n_ref is not None and n_ref != params.num_samples:
        params = replace(params, reference_samples=n_ref)
        entry.notes.append(f"unpaired test: the reference was measured on {n_ref} samples and this run on "
                           f"{params.num_samples}: scale sigma sqrt(1/n + 1/n_ref)")
    if entry.stats.method == "unpaired":
        rows = None
    key = entry.cluster_key if entry.stats.cluster == "auto" else None
    labels = cluster_variance.labels_of(entry.scored, key) if key else None
    return replace(entry, params=params, rows=rows, cluster_key=key, labels=labels)


@dataclass(frozen=True)
class Report:
    """TensorRT-LLM's unpaired report, which every per-sample decision shows: the entry as the rule reads it (its
    sigma estimated from the reference's non-0/100 per-sample scores, and carrying the design effect when the job
    clusters), the z-test's verdict at the margin, and the design effect of the run's scores (None: unclustered)."""

    entry: EntryCase
    verdict: Verdict
    design_effect: cluster_variance.DesignEffect | None


def reported(entry: EntryCase) -> Report:
    """The per-sample rules' common start (:func:`statistical`, then the unpaired report); appends its notes."""
    e = statistical(entry)
    params, rows = e.params, e.rows
    if rows and not all(r.score in (0.0, 100.0) for r in rows.values()):
        sigma = scale.estimate_sigma(r.score for r in rows.values())
        e.notes.append(f"sigma {sigma:.3f} estimated from the reference's {len(rows)} per-sample scores "
                       f"(configured {params.sigma:g})")
        params = replace(params, sigma=sigma)
    deff = None
    if e.labels is not None and e.cluster_key is not None:
        params, deff = cluster_claims.unpaired_params(e.scored, e.labels, e.cluster_key, params, e.stats, e.notes)
    verdict = ztest.decide(e.score, e.reference.value, params, None, metric=e.metric, tolerance=e.margin)
    return Report(replace(e, params=params), verdict, deff)
