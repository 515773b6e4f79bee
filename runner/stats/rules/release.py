"""One release verdict from the verdicts of a release's tasks, each with a tier (docs/release-gates.md).

A release policy gives every task a tier:

* **critical**: a NO-GO blocks the release; every one must be GO for the release to be GO;
* **supporting**: more than ``max_supporting_failures`` (K) NO-GOs block the release;
* **advisory**: reported only; never blocks.

Multiplicity: every regression claim (NO-GO) that can block the release, those of the critical and of
the supporting tier together, is one family, corrected with Holm at each test's own alpha
(:func:`runner.stats.multiple_testing.adjust`), so the chance that a release where nothing regressed
is blocked by a false alarm stays within the tests' alphas however many tasks and tiers there are
(one family per tier would add the tiers' alphas: 0.0975 for one critical and one supporting task at
0.05). Advisory tasks keep each job's own verdict (no correction: they decide nothing). The GO claims need
no correction: the release is GO only when *every* critical task shows GO, an intersection-union test,
whose chance of a false GO is at most the largest alpha of its tests (Berger 1982) without any
adjustment. Deterministic rules (an explicit threshold, the exact rule) keep their verdict.

The rules, in order: a failed critical job -> FAILED (no verdict can be given); a critical NO-GO ->
NO-GO; more than K supporting NO-GOs -> NO-GO; every critical task GO and at most K supporting tasks
NO-GO or failed -> GO; else INCONCLUSIVE, naming the tasks that need samples (or a rerun). A failed
supporting job counts as a possible NO-GO: the release is GO only if it would be GO even so.
Pure: plain numbers in, a :class:`Release` out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from runner.stats.multiple_testing import adjust
from runner.stats.numerics import graphical
from runner.stats.data.verdicts import GO, INCONCLUSIVE, NO_GO, combine
from runner.stats.data.claims import DeclaredRule

CRITICAL, SUPPORTING, ADVISORY = "critical", "supporting", "advisory"
TIERS = (CRITICAL, SUPPORTING, ADVISORY)
FAILED = "FAILED"
"""The release could not be judged: a critical job failed or did not run (exit status 1)."""


@dataclass(frozen=True)
class Claim:
    """One regression test of a task (NO-GO when shown)."""

    p_value: Optional[float]  # None: a deterministic rule, whose own ``shown`` stands
    alpha: float
    shown: bool  # what the job decided alone


@dataclass(frozen=True)
class TaskEvidence:
    """What one task's job showed, and its tier in the policy."""

    name: str
    tier: str
    claims: tuple[Claim, ...] = ()  # none and no ``within``: the job gave no verdict (no reference)
    within: Optional[bool] = None  # the GO claim, at the task's own alpha; None: the rule has none (GO unless NO-GO)
    gate: str = "regression"  # stats.gate: what a verdict follows when both claims are shown
    error: Optional[str] = None  # the job failed or did not run: why
    advice: Optional[str] = None  # how many more samples would decide (the job's own advice)
    note: Optional[str] = None  # e.g. "not in the policy: reported only"


@dataclass(frozen=True)
class TaskVerdict:
    """A task's verdict inside the release: after its tier's correction, and whether it blocks the release."""

    name: str
    tier: str
    verdict: str  # go | no-go | inconclusive | failed | no verdict
    p_adjusted: Optional[float]  # the smallest adjusted p-value of its regression claims (None: none had one)
    blocking: bool  # this task is (part of) why the release is not GO
    advice: Optional[str] = None
    error: Optional[str] = None
    note: Optional[str] = None


@dataclass(frozen=True)
class Release:
    """The release verdict: GO, NO-GO, INCONCLUSIVE or FAILED, why, and its tasks' verdicts."""

    verdict: str
    reason: str
    tasks: tuple[TaskVerdict, ...]
    max_supporting_failures: int
    correction: str

    @property
    def need_samples(self) -> list[TaskVerdict]:
        """The undecided tasks whose decision would change the release: critical tasks that are not GO yet."""
        return [t for t in self.tasks if t.tier == CRITICAL and t.verdict == "inconclusive"]


GRAPH = "graph"
"""The release's own correction beside Holm, BH and none: Bretz et al.'s graph of the tiers
(:func:`runner.stats.numerics.graphical.tiers`), the critical tasks holding ``critical_share`` of alpha."""
RELEASE_CORRECTIONS = ("holm", "bh", "none", GRAPH)


def decide_release(evidence: Sequence[TaskEvidence], max_supporting_failures: int,
                   correction: str = "holm", critical_share: float = 0.8) -> Release:
    """The release verdict of ``evidence`` (one entry per task run; tiers as :data:`TIERS`); ``critical_share``:
    the critical tasks' share of alpha under ``correction="graph"``."""
    unknown = sorted({e.tier for e in evidence} - set(TIERS))
    if unknown:
        raise ValueError(f"unknown tier(s) {unknown}; allowed: {', '.join(TIERS)}")
    rejected, p_adj = _corrected(evidence, correction, critical_share)
    verdicts = [_task_verdict(e, rejected.get(id(e), ()), p_adj.get(id(e))) for e in evidence]
    return _release(verdicts, max_supporting_failures, correction)


def _corrected(evidence: Sequence[TaskEvidence], correction: str,
               critical_share: float = 0.8) -> tuple[dict[int, list[bool]], dict[int, float]]:
    """Per task: which of its statistical claims are rejected after the correction, and its smallest adjusted
    p-value. The claims that can block (critical and supporting tiers) are one family; advisory claims stand
    alone."""
    rejected: dict[int, list[bool]] = {}
    smallest: dict[int, float] = {}
    for tiers in ((CRITICAL, SUPPORTING), (ADVISORY,)):
        family = [(e, c) for e in evidence if e.tier in tiers and e.error is None
                  for c in e.claims if c.p_value is not None]
        method = "none" if tiers == (ADVISORY,) else correction
        p_values, alphas = [c.p_value for _, c in family], [c.alpha for _, c in family]
        if method == GRAPH:
            graph = graphical.tiers([e.tier == CRITICAL for e, _ in family], critical_share) if family else None
            rejects = graphical.reject(graph, p_values, alphas) if graph else []
            p_adjusted = graphical.adjusted(graph, p_values, alphas) if graph else []
        else:
            adjusted = adjust(p_values, alphas, method)
            rejects, p_adjusted = adjusted.reject, adjusted.p_adjusted
        for (e, _), reject, p in zip(family, rejects, p_adjusted):
            rejected.setdefault(id(e), []).append(reject)
            smallest[id(e)] = min(p, smallest.get(id(e), p))
    return rejected, smallest


def _task_verdict(e: TaskEvidence, rejected: Sequence[bool], p_adjusted: float | None) -> TaskVerdict:
    if e.error is not None:
        verdict = "failed"
    elif not e.claims and e.within is None:
        verdict = "no verdict"
    else:
        regression = any(rejected) or any(c.shown for c in e.claims if c.p_value is None)
        if e.within is None:
            verdict = "no-go" if regression else "go"
        else:
            verdict = {GO: "go", NO_GO: "no-go", INCONCLUSIVE: "inconclusive"}[combine(regression, e.within, e.gate)]
    return TaskVerdict(e.name, e.tier, verdict, p_adjusted, False, e.advice, e.error, e.note)


def _release(tasks: list[TaskVerdict], k: int, correction: str) -> Release:
    def names(items: list[TaskVerdict]) -> str:
        return ", ".join(t.name for t in items)

    def blocked(items: list[TaskVerdict], verdict: str, reason: str) -> Release:
        chosen = {id(t) for t in items}
        marked = tuple(TaskVerdict(t.name, t.tier, t.verdict, t.p_adjusted, id(t) in chosen, t.advice, t.error, t.note)
                       for t in tasks)
        return Release(verdict, reason, marked, k, correction)

    critical = [t for t in tasks if t.tier == CRITICAL]
    supporting = [t for t in tasks if t.tier == SUPPORTING]
    failed = [t for t in critical if t.verdict == "failed"]
    if failed:
        return blocked(failed, FAILED, f"critical task {failed[0].name} failed: {failed[0].error}"
                       + (f" (and {names(failed[1:])})" if failed[1:] else ""))
    no_go = [t for t in critical if t.verdict == "no-go"]
    if no_go:
        return blocked(no_go, NO_GO, f"critical task {names(no_go)} is NO-GO"
                       + (f" (p adjusted {_p(no_go[0].p_adjusted)}, {_FAMILY[correction]})"
                          if no_go[0].p_adjusted is not None and correction in _FAMILY else ""))
    supporting_no_go = [t for t in supporting if t.verdict == "no-go"]
    if len(supporting_no_go) > k:
        count = len(supporting_no_go)
        return blocked(supporting_no_go, NO_GO, f"{count} supporting task{'s are' if count > 1 else ' is'} NO-GO "
                       f"({names(supporting_no_go)}), more than the {k} the policy allows")
    unknown = [t for t in supporting if t.verdict == "failed"]
    undecided = [t for t in critical if t.verdict != "go"]
    if not undecided and len(supporting_no_go) + len(unknown) <= k:
        within = f"; {len(supporting_no_go)} supporting NO-GO, {k} allowed" if supporting_no_go else ""
        return blocked([], GO, f"every critical task is GO ({names(critical)}){within}")
    parts = []
    unjudged = [t for t in undecided if t.verdict == "no verdict"]
    waiting = [t for t in undecided if t.verdict != "no verdict"]
    if unjudged:
        parts.append(f"critical task {names(unjudged)} has no verdict (no reference to judge it against: "
                     "reference.mode=skip or no entry): more samples cannot decide it; run it with "
                     "reference.mode=check against a recorded reference")
    if waiting:
        parts.append(f"critical task {names(waiting)} is not decided yet "
                     f"({', '.join(sorted({t.verdict for t in waiting}))}): more samples would decide")
    if len(supporting_no_go) + len(unknown) > k:
        parts.append(f"supporting task {names(unknown)} failed: counted as a possible NO-GO, more than "
                     f"{k} supporting tasks could be NO-GO; rerun it")
        undecided = undecided + unknown
    return blocked(undecided, INCONCLUSIVE, "; ".join(parts))


_FAMILY = {"holm": "Holm across the critical and supporting tiers",
           GRAPH: "the tiers' graph (Bretz et al. 2009) across the critical and supporting tiers"}


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


CLAIMS = (
    DeclaredRule("release: the tiers' graph (Bretz et al. 2009), critical share 0.8",
                 "a release policy with gate.correction=graph",
                 ("NO-GO of the release, nothing regressed", "GO of the release, a critical task at tolerance"),
                 "none: an intersection-union test for GO, the graph's weighted Bonferroni closure for NO-GO"),
    DeclaredRule("release: Holm across the tiers", "a release policy's verdict from its tasks' verdicts",
         ("NO-GO of the release, nothing regressed", "GO of the release, a critical task at tolerance"),
         "none: an intersection-union test for GO, one Holm family for NO-GO"),
)
"""The rules of this module and their claims, as the calibration grid measures them."""
