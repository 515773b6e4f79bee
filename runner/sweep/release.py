"""The release verdict of a sweep under a release policy (``gate=<name>``): the summary's rows, read by tier.

Each job's row carries its own tests (``report.json``'s decision); they are read here, before the sweep's
own correction, into the plain evidence :func:`runner.stats.rules.release.decide_release` judges (Holm across
the NO-GO claims of the critical and supporting tiers together, advisory reported only). A sweep that varies
more than the task (``quant=w8a16,w4a16``) holds one release per configuration: its overrides other than
the task's. A policy task that did not run is a failed job of its tier; a task run but not listed is an
error (``gate.unlisted: error``: the release fails) or advisory with a note.

Exit status (``release_exit``): 1 when a release is FAILED (a critical job failed or did not run, a task
outside the policy, a sweep stopped early), else the job codes: 0 GO, 3 NO-GO, 4 INCONCLUSIVE (unless
``stats.on_inconclusive``/``stats.verdicts`` map it); the worst release of the sweep decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from runner.contract.errors import (EXIT_ERROR, EXIT_INCONCLUSIVE, EXIT_INTERRUPTED, EXIT_OK, EXIT_REGRESSION,
                                     EXIT_TERMINATED)
from runner.reports.cases import Case, fmt
from runner.stats.decision_text import STATISTICAL_RULES
from runner.stats.rules.release import ADVISORY, FAILED, Claim, Release, TaskEvidence, decide_release
from runner.stats.data.verdicts import CODES, GO, INCONCLUSIVE, NO_GO, WORDS, exit_status, inconclusive_fails, reported

ORDER = (FAILED, NO_GO, INCONCLUSIVE, GO)
"""Worst first: the sweep's release verdict is the worst of its releases."""


@dataclass(frozen=True)
class ReleaseResult:
    """One release of the sweep: the policy's verdict on one configuration's tasks."""

    policy: str
    label: str  # the configuration without its task ("" when the sweep varies only the task)
    release: Release
    exit_status: int

    @property
    def title(self) -> str:
        return f"release {self.policy}" + (f" [{self.label}]" if self.label else "")


def judge_releases(policy: Any, rows: list[dict[str, Any]], mode: str, on_inconclusive: str,
                   stopped: str | None = None, stop_status: int | None = None) -> list[ReleaseResult]:
    """The releases of the sweep's ``rows`` (read before the sweep's own correction pops their tests); a sweep
    ``stopped`` early fails every release, with the signal's ``stop_status`` when a signal stopped it."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(_release_label(row), []).append(row)
    results = []
    for label, mine in groups.items():
        evidence = [_evidence(row, policy) for row in mine]
        ran = {row["task"] for row in mine}
        evidence += [TaskEvidence(task, entry.tier, error="did not run in this sweep")
                     for task, entry in policy.tasks.items() if task not in ran]
        release = decide_release(evidence, policy.max_supporting_failures, policy.correction,
                                  getattr(policy, "critical_share", 0.8))
        unlisted = sorted(ran - set(policy.tasks))
        if unlisted and policy.unlisted == "error":
            release = replace(release, verdict=FAILED, reason=f"task {', '.join(unlisted)} is not in the policy "
                              f"(gate.unlisted=error): add it with a tier, or leave it out of the sweep")
        if stopped:
            release = replace(release, verdict=FAILED, reason=f"the sweep stopped early: {stopped}")
        status = EXIT_ERROR if release.verdict == FAILED else exit_status(release.verdict, mode, on_inconclusive)
        if stopped and stop_status is not None:
            status = stop_status
        results.append(ReleaseResult(policy.name, label, release, status))
    return results


def _release_label(row: dict[str, Any]) -> str:
    """The configuration of a row without the task's overrides: what one release is. (A sweep whose jobs share
    every override labels each configuration with its job's name: one release then.)"""
    configuration = row.get("configuration")
    if not configuration or configuration == row["job"]:
        return ""
    return " ".join(o for o in configuration.split() if not o.lstrip("+~").startswith("task"))


def _evidence(row: dict[str, Any], policy: Any) -> TaskEvidence:
    entry = policy.tasks.get(row["task"])
    tier, note = (entry.tier, None) if entry is not None else (ADVISORY, "not in the policy: reported only")
    if row["verdict"] in ("failed", "incomplete"):
        return TaskEvidence(row["task"], tier, error=" ".join(str(row["error"] or row["verdict"]).split())[:300],
                            note=note)
    tests = row.get("_tests") or []
    claims = tuple(Claim(t["p_value"] if t["rule"] in STATISTICAL_RULES else None, t["alpha"], not t["passed"])
                   for t in tests if t["gate"] == "regression")
    within = [t["passed"] for t in tests if t["gate"] == "noninferiority"]
    return TaskEvidence(row["task"], tier, claims, all(within) if within else None, row.get("_gate", "regression"),
                        advice=row.get("advice"), note=note)


def release_exit(results: list[ReleaseResult]) -> int:
    """The sweep's exit status under a policy: the worst release's."""
    codes = {r.exit_status for r in results}
    for code in (EXIT_TERMINATED, EXIT_INTERRUPTED, EXIT_ERROR, EXIT_REGRESSION, EXIT_INCONCLUSIVE):
        if code in codes:
            return code
    return EXIT_OK


def overall(results: list[ReleaseResult]) -> str:
    """The worst release verdict of the sweep."""
    return min((r.release.verdict for r in results), key=ORDER.index)


def render(results: list[ReleaseResult], mode: str) -> list[str]:
    """The release verdicts as printed under the sweep summary."""
    lines = []
    for r in results:
        rel = r.release
        shown = reported(rel.verdict, mode) if rel.verdict != FAILED else FAILED
        lines.append(f"{r.title} verdict: {shown} -> exit {r.exit_status}")
        lines.append(f"  reason: {rel.reason}")
        lines.append(f"  {'tier':<11} {'task':<24} {'verdict':<13} {'p_adj':>8}  blocks")
        for t in rel.tasks:
            lines.append(f"  {t.tier:<11} {t.name[:24]:<24} {t.verdict:<13} {fmt(t.p_adjusted, 4):>8}  "
                         f"{'yes' if t.blocking else 'no'}" + (f"  ({t.note})" if t.note else "")
                         + (f"  ({_clip(t.error)})" if t.error else ""))
        for t in rel.need_samples:
            if t.verdict == "no verdict":
                lines.append(f"  needs a reference: {t.name}: no verdict without one (reference.mode=check)")
            else:
                lines.append(f"  needs samples: {t.name}: {t.advice or 'no advice (see the job report)'}")
    return lines


def cases(result: ReleaseResult, mode: str, on_inconclusive: str) -> list[Case]:
    """One JUnit/markdown case per task of the release: failed (or errored) only where it blocks the release."""
    fails = inconclusive_fails(mode, on_inconclusive)
    out = []
    for t in result.release.tasks:
        blocks = t.blocking and (t.verdict != "inconclusive" or fails)
        role = ("blocks the release" if blocks else "reported only" if t.tier == ADVISORY
                else "does not block the release")
        message = f"{t.tier}: {t.verdict.upper()}, {role}" + (f"; p adjusted {fmt(t.p_adjusted, 4)}"
                                                              if t.p_adjusted is not None else "")
        message += "".join(f"; {part}" for part in (t.note, t.error, t.advice) if part)
        out.append(Case(f"[{t.tier}] {t.name}", t.verdict, message, f"{result.title}: {result.release.reason}",
                        inconclusive_fails=fails, tier=t.tier, blocking=blocks))
    return out


def to_dict(result: ReleaseResult) -> dict[str, Any]:
    rel = result.release
    return {"policy": result.policy, "configuration": result.label, "verdict": rel.verdict, "reason": rel.reason,
            "exit_status": result.exit_status, "correction": rel.correction,
            "max_supporting_failures": rel.max_supporting_failures,
            "tasks": [vars(t) for t in rel.tasks]}


def log_to(results: list[ReleaseResult], client: Any, parent_id: str) -> None:
    """The release verdict on the sweep's parent run: tags (verdict, reason, each task's tier and verdict) and
    metrics (``release_verdict`` as the ``verdict`` metric's codes, ``release_exit_status``)."""
    verdict = overall(results)
    word = WORDS.get(verdict, "failed")
    client.set_tag(parent_id, "release.policy", results[0].policy)
    client.set_tag(parent_id, "release.verdict", verdict)
    client.set_tag(parent_id, "release.reason", "; ".join(
        (f"[{r.label}] " if r.label else "") + r.release.reason for r in results)[:5000])
    for r in results:
        prefix = "release." + (f"{r.label}." if r.label else "")
        for t in r.release.tasks:  # MLflow's tag keys: letters, digits, _ - . / and spaces
            client.set_tag(parent_id, re.sub(r"[^\w\-. /]", "_", f"{prefix}task.{t.name}")[:250], f"{t.tier}: {t.verdict}")
    client.set_tag(parent_id, "verdict", word)  # the parent's verdict is the release's
    client.log_metric(parent_id, "verdict", float(CODES[word]))
    client.log_metric(parent_id, "release_verdict", float(CODES[word]))
    client.log_metric(parent_id, "release_exit_status", float(release_exit(results)))


def _clip(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 3] + "..."
