"""The sample reports in the docs, regenerated from real runs (issue 31: docs that match the code).

A page shows a report by putting a marker line right before a plain code fence::

    <!-- report: quant=w4a16 task=mmlu_0shot reference.against=baseline -->
    <!-- report from "decided by:": quant=w4a16 task=mmlu_0shot reference.against=baseline -->

The first shows the whole ``report.txt`` of ``python -m runner ARGS``; the second its decision block, from
the line starting with the quoted text up to the notes. This script runs each marked command on the real
(embedded) model and writes its report into the fence below the marker:

    python tools/doc_reports.py            # every marker of README.md and docs/; minutes on 2 cores
    python tools/doc_reports.py --check    # exit 1 when a block differs from what a run prints now

``tests/reports/test_doc_reports.py`` keeps the blocks honest without a model: it runs each marked command on
``backend=fake`` and compares the lines' labels (``decided by:``, ``  theta``...), so a renamed or added line
of the report fails the suite until the pages are regenerated.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r'^<!-- report(?: from "(?P<start>[^"]+)")?: (?P<args>.+?) -->$')
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


@dataclass(frozen=True)
class Sample:
    """One marked report block: where its fence's lines are, the command's arguments, where its excerpt starts."""

    page: Path
    first: int  # index of the first line inside the fence
    last: int  # index of the closing fence
    args: tuple[str, ...]
    start: str | None  # None: the whole report

    def shown(self) -> str:
        return "\n".join(self.page.read_text(encoding="utf-8").splitlines()[self.first:self.last])


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def samples(page: Path) -> list[Sample]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for i, line in enumerate(lines):
        match = MARKER.match(line.strip())
        if match is None:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```":
            raise ValueError(f"{page}:{i + 1}: a report marker must be followed by a plain ``` fence")
        last = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
        found.append(Sample(page, i + 2, last, tuple(shlex.split(match["args"])), match["start"]))
    return found


def excerpt(report: str, start: str | None) -> str:
    """The whole report, or its lines from the first starting with ``start`` up to the notes."""
    lines = report.strip("\n").splitlines()
    if start is None:
        return "\n".join(lines)
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    end = next((j for j in range(first, len(lines)) if lines[j].startswith(("note:", "===="))), len(lines))
    return "\n".join(lines[first:end])


def labels(text: str) -> list[str]:
    """What each line says, without its figures: the text before its first ``:`` or column gap, numbers as N.
    Notes depend on the situation (the host, the reference), so they are left out."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("note:"):
            continue
        head = re.split(r":|\s{2,}|\s\|", line.strip(), maxsplit=1)[0]
        out.append(NUMBER.sub("N", head))
    return out


def real_report(args: tuple[str, ...]) -> str:
    """``report.txt`` of ``python -m runner ARGS`` on the real backend, nothing logged."""
    with tempfile.TemporaryDirectory(prefix="doc-report-") as tmp:
        cmd = [sys.executable, "-m", "runner", *args, "tracking=none", f"hydra.run.dir={tmp}/run"]
        env = os.environ | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        done = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        report = Path(tmp) / "run" / "report.txt"
        if not report.is_file():
            raise SystemExit(f"`{shlex.join(cmd)}` wrote no report (exit {done.returncode}):\n{done.stderr[-3000:]}")
        return report.read_text(encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 where a block differs; write nothing")
    options = parser.parse_args()
    reports: dict[tuple[str, ...], str] = {}
    stale = 0
    for page in pages():
        for sample in reversed(samples(page)):  # bottom first: a rewritten block moves no later marker
            if sample.args not in reports:
                reports[sample.args] = real_report(sample.args)
            new = excerpt(reports[sample.args], sample.start)
            if new == sample.shown():
                continue
            stale += 1
            print(f"{page.relative_to(ROOT)}:{sample.first}: {'differs' if options.check else 'rewritten'}")
            if not options.check:
                lines = page.read_text(encoding="utf-8").splitlines()
                lines[sample.first:sample.last] = new.splitlines()
                page.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 1 if options.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
