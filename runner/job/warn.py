"""A job's warnings: said once on the console when they arise (the log line names its level, so the text carries
no "warning:" of its own) and kept among the job's notes for report.txt, report.json and MLflow; the copy of the
report printed at the end leaves out what was already said (:func:`console_notes`)."""

from __future__ import annotations

import logging
import re

from runner.job.state import Job

log = logging.getLogger("runner")
LEVEL_PREFIX = re.compile(r"^warning:\s*", re.IGNORECASE)


def warn(job: Job, note: str) -> None:
    """Log ``note`` at WARNING level now, keep it in the job's notes, and mark it said on the console."""
    log.warning(LEVEL_PREFIX.sub("", note))
    job.notes.append(note)
    job.said.append(note)


def console_notes(job: Job) -> list[str]:
    """The notes the printed report shows: those not already said as a warning while the job ran."""
    said = set(job.said)
    return [note for note in job.notes if note not in said]
