"""One evaluation job as a CI test case: what JUnit XML and markdown summaries are written from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

MARKS = {"go": "✅", "no-go": "❌", "inconclusive": "❔", "failed": "💥", "incomplete": "⚠️", "no verdict": "➖"}


@dataclass(frozen=True)
class Case:
    name: str  # e.g. "w4a16-perplexity" or a sweep's job directory
    verdict: str  # go | no-go | inconclusive | failed | incomplete | no verdict
    message: str  # one line: what decided
    details: str = ""  # the verdict block, or the error
    score: Optional[float] = None
    reference: Optional[float] = None
    difference: Optional[float] = None
    p_value: Optional[float] = None
    n: Optional[int] = None
    time_s: Optional[float] = None
    inconclusive_fails: bool = True  # INCONCLUSIVE is a failed test unless stats.verdicts/on_inconclusive map it to a pass
    tier: Optional[str] = None  # a release's task: critical | supporting | advisory (runner/sweep/release.py)
    blocking: Optional[bool] = None  # a release's task: whether it blocks the release (None: a job, judged alone)
    classname: Optional[str] = None  # JUnit's classname, stable across runs (model/quant); None: the suite's name
    job_verdict: Optional[str] = None  # a sweep's job: its own verdict at its task's alpha (``verdict`` is the sweep's)

    @property
    def failing(self) -> bool:
        """A failed test case: NO-GO, or INCONCLUSIVE when it is not mapped to a pass; a release's task
        only when it blocks the release (an advisory NO-GO is reported, not failed)."""
        if self.blocking is not None:
            return self.blocking and not self.errored
        return self.verdict == "no-go" or (self.verdict == "inconclusive" and self.inconclusive_fails)

    @property
    def errored(self) -> bool:
        """An errored test case: the job failed or never finished (a release's task: only when it blocks)."""
        return self.verdict in ("failed", "incomplete") and self.blocking is not False

    @property
    def mark(self) -> str:
        return MARKS.get(self.verdict, "")


def from_row(row: dict[str, Any], inconclusive_fails: bool = True, details: str = "", time_s: float | None = None,
             model_name: str | None = None) -> Case:
    """A sweep summary row (runner/sweep/summary.py) as a case; its sweep verdict is what counts. The case is
    named ``task`` in class ``model/quant`` (stable across sweeps, so a CI system keeps each one's history) and
    carries the job's verdict block (``details``) and evaluation time."""
    verdict = row.get("sweep_verdict") or row.get("verdict") or "incomplete"
    own = row.get("verdict") or "incomplete"
    if row.get("error"):
        message = " ".join(str(row["error"]).split())[:300]
    elif row.get("test"):
        message = compared(row["test"], row.get("score"), row.get("reference"), row.get("difference"), row.get("n")) \
            + f", p {fmt_p(row.get('p_value'))} (adjusted {fmt_p(row.get('p_adjusted'))})"
    else:
        message = verdict
    if row.get("sweep_verdict") and verdict != own:  # the correction changed it: both, named
        message = f"job verdict {own}, sweep verdict {verdict}: {message}"
    if row.get("advice"):
        message += f"; {row['advice']}"
    if row.get("noise"):
        message += f"; noise: {row['noise']}"
    name, classname = str(row.get("job")), None
    if row.get("task") and row.get("quant"):
        name, classname = str(row["task"]), f"{model_name or row.get('model')}/{row['quant']}"
    error = str(row.get("error") or "")
    return Case(name, verdict, message, "\n\n".join(p for p in (details, error) if p), row.get("score"),
                row.get("reference"), row.get("difference"), row.get("p_value"), row.get("n"), time_s,
                inconclusive_fails=inconclusive_fails, classname=classname,
                job_verdict=own if row.get("sweep_verdict") else None)


def compared(rule: str, score: Any, reference: Any, difference: Any, n: Any) -> str:
    """The deciding rule's figures in one phrase, all on the samples it used."""
    on = f" on {n} samples" if n is not None else ""
    return f"{rule}: score {fmt(score)} vs reference {fmt(reference)}{on} (delta {fmt(difference, sign=True)})"


def fmt_p(value: Any) -> str:
    """A p-value: four decimals, or scientific notation below 0.001 (1.2e-22 is not 0.0000)."""
    if value is None or value != value:
        return "-"
    return f"{value:.1e}" if 0 < value < 1e-3 else f"{value:.4f}"


def fmt(value: Any, digits: int = 2, sign: bool = False) -> str:
    """A figure for a table: ``-`` when there is none (None or NaN)."""
    if value is None or value != value:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"
