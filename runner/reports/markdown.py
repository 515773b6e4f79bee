"""A markdown summary of jobs, for people: a pull request comment or GitHub's job summary
(appended to ``$GITHUB_STEP_SUMMARY`` when that variable names a file: it only locates it)."""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Sequence

from runner.files.paths import write_atomic
from runner.reports.cases import Case, fmt, fmt_p

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def markdown(cases: Sequence[Case], title: str, verdict: str) -> str:
    lines = [f"### {title}: {verdict}", "",
             "| job | verdict | score | reference | delta | p-value | n |", "|---|---|---:|---:|---:|---:|---:|"]
    for c in cases:
        lines.append(f"| {_label(c).replace('|', '/')} | {c.mark} {c.verdict} | {fmt(c.score)} | {fmt(c.reference)} | "
                     f"{fmt(c.difference, sign=True)} | {fmt_p(c.p_value)} | {c.n if c.n is not None else '-'} |")
    for c in cases:  # each verdict block folded under its one-line message
        if c.details:
            body = c.details.replace("```", "'''")
            summary = f"{c.mark} {html.escape(_label(c))}: {html.escape(c.message)}"
            lines += ["", f"<details><summary>{summary}</summary>", "", "```", body, "```", "", "</details>"]
    return "\n".join(lines) + "\n"


def _label(case: Case) -> str:
    return f"{case.classname}/{case.name}" if case.classname else case.name


def release_markdown(title: str, verdict: str, reason: str, cases: Sequence[Case]) -> str:
    """A release's verdict, its reason and its tasks by tier (runner/sweep/release.py)."""
    lines = [f"### {title}: {verdict}", "", reason, "", "| task | tier | verdict | blocks the release | details |",
             "|---|---|---|---|---|"]
    for c in cases:
        lines.append(f"| {c.name} | {c.tier} | {c.mark} {c.verdict} | {'yes' if c.failing or c.errored else 'no'}"
                     f" | {c.message.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def write_markdown(path: str | Path | None, text: str) -> list[Path]:
    """Write ``text`` to ``path`` (when given) and append it to the CI job summary (when there is one)."""
    written = []
    if path:
        target = Path(path).expanduser()
        write_atomic(target, text, 0o644)
        written.append(target)
    summary = os.environ.get(STEP_SUMMARY_ENV)
    if summary:
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
        written.append(Path(summary))
    return written

