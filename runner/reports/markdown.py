"""A markdown summary of jobs, for people: a pull request comment or GitHub's job summary
(appended to ``$GITHUB_STEP_SUMMARY`` when that variable names a file: it only locates it).

Every string a user or a model wrote (job names built from model ids, error messages quoting a
dataset path or a server's answer) is escaped before it lands here: GitHub renders HTML inside
markdown, so ``<img onerror=...>`` in an ``hf_id`` would otherwise become markup in the step summary.
Table cells also lose their ``|`` and line breaks; details go in a fence longer than any backtick run
they hold."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Sequence

from runner.contract.printable import printable
from runner.contract.secrets import redact_text
from runner.files.paths import write_atomic
from runner.reports.cases import Case, fmt, fmt_p

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def text(value: object) -> str:
    """``value`` as inert markdown text on one line: HTML escaped, table pipes and backticks neutralised."""
    one_line = " ".join(str(value).split())
    return html.escape(one_line).replace("|", "&#124;").replace("`", "&#96;")


def fenced(body: str) -> list[str]:
    """``body`` in a code fence no backtick run inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, body, fence]


def markdown(cases: Sequence[Case], title: str, verdict: str) -> str:
    """A heading with the verdict, one table row per case and each case's block folded below; a sweep's cases
    show the job's own verdict beside its verdict within the sweep."""
    sweep = any(c.job_verdict is not None for c in cases)
    head = "| job | job verdict | sweep verdict |" if sweep else "| job | verdict |"
    lines = [f"### {text(title)}: {text(verdict)}", "", head + " score | reference | delta | p-value | n |",
             "|---|---|" + ("---|" if sweep else "") + "---:|---:|---:|---:|---:|"]
    for c in cases:
        own = f" {text(c.job_verdict or '-')} |" if sweep else ""
        lines.append(f"| {text(_label(c))} |{own} {c.mark} {text(c.verdict)} | {fmt(c.score)} | {fmt(c.reference)} | "
                     f"{fmt(c.difference, sign=True)} | {fmt_p(c.p_value)} | {c.n if c.n is not None else '-'} |")
    if sweep:
        lines += ["", "job verdict: the job's own, at its task's alpha; sweep verdict: the job's within the sweep, "
                      "after the family-wise correction (what this report counts)."]
    for c in cases:  # each verdict block folded under its one-line message
        if c.details:
            lines += ["", f"<details><summary>{c.mark} {text(_label(c))}: {text(c.message)}</summary>", "",
                      *fenced(c.details), "", "</details>"]
    return "\n".join(lines) + "\n"


def _label(case: Case) -> str:
    return f"{case.classname}/{case.name}" if case.classname else case.name


def release_markdown(title: str, verdict: str, reason: str, cases: Sequence[Case]) -> str:
    """A release's verdict, its reason and its tasks by tier (runner/sweep/release.py)."""
    lines = [f"### {text(title)}: {text(verdict)}", "", text(reason), "", "| task | tier | verdict | blocks the release | details |",
             "|---|---|---|---|---|"]
    for c in cases:
        lines.append(f"| {text(c.name)} | {text(c.tier)} | {c.mark} {text(c.verdict)} | "
                     f"{'yes' if c.failing or c.errored else 'no'} | {text(c.message)} |")
    return "\n".join(lines) + "\n"


def write_markdown(path: str | Path | None, text: str) -> list[Path]:
    """Write ``text`` to ``path`` (when given) and append it to the CI job summary (when there is one)."""
    text = printable(redact_text(text))
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

