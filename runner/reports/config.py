"""Where CI-facing reports go (``report.junit``, ``report.markdown``); None: not written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class ReportConfig:
    junit: Optional[str] = None  # JUnit XML: one test case for a job, one per job for a sweep
    markdown: Optional[str] = None  # a markdown summary (also appended to $GITHUB_STEP_SUMMARY when set)
