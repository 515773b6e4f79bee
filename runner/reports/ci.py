"""Write the CI-facing reports of a finished job or sweep (``report.junit``, ``report.markdown``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from runner.contract.errors import UserError
from runner.reports.cases import Case, compared, fmt_p, from_row
from runner.reports.config import ReportConfig
from runner.reports.junit import write_junit, write_junit_suites
from runner.reports.markdown import markdown, release_markdown, write_markdown
from runner.stats.data.verdicts import WORDS, inconclusive_fails


@dataclass(frozen=True)
class JobLabel:
    """What names a job in its CI reports and where they go: read from its config, even when it did not start."""

    quant: str
    task: str
    model_name: str
    model_id: str
    reference_mode: str
    verdicts: str
    on_inconclusive: str
    report: ReportConfig


def job_case(label: JobLabel, outcome: Any = None, error: BaseException | None = None) -> Case:
    """The job as a case: its verdict block when it finished, its error when it did not."""
    name, classname = label.task, f"{label.model_name}/{label.quant}"
    if outcome is None:
        text = error.render() if isinstance(error, UserError) else f"{type(error).__name__}: {error}"
        return Case(name, "failed", " ".join(text.split())[:300], text, classname=classname)
    decision = outcome.decision
    details, time_s = job_files(Path(outcome.output_dir))
    if decision is None:
        return Case(name, "no verdict", f"score {outcome.score:.4f}, no verdict (reference.mode={label.reference_mode})",
                    details, outcome.score, time_s=time_s, classname=classname)
    shown = decision.figures()  # the deciding rule's, on the samples it used: one number per column
    message = f"{decision.verdict_line()}; " + compared(decision.test, shown.score, shown.reference, shown.difference,
                                                        shown.n) + f", p {fmt_p(shown.p_value)}"
    if decision.advice is not None:
        message += f"; {decision.advice.text()}"
    return Case(name, WORDS[decision.outcome], message, details, shown.score, shown.reference,
                shown.difference, shown.p_value, shown.n, time_s,
                inconclusive_fails=inconclusive_fails(label.verdicts, label.on_inconclusive), classname=classname)


def job_files(job_dir: Path) -> tuple[str, float | None]:
    """A job's verdict block (report.txt) and the seconds it spent answering and scoring (report.json); what
    a job that never finished did not write is empty."""
    report, payload = job_dir / "report.txt", job_dir / "report.json"
    details = report.read_text(encoding="utf-8") if report.is_file() else ""
    try:
        time_s = json.loads(payload.read_text(encoding="utf-8")).get("eval_time_s") if payload.is_file() else None
    except (OSError, ValueError, AttributeError):
        time_s = None
    return details, time_s if isinstance(time_s, (int, float)) else None


def sweep_case(sweep_dir: Path, row: dict[str, Any], fails: bool) -> Case:
    """A sweep's job as a case, with the verdict block, time and model name its directory holds."""
    job_dir = sweep_dir / str(row.get("job"))
    details, time_s = job_files(job_dir)
    config = job_dir / ".hydra" / "config.yaml"
    model_name = OmegaConf.select(OmegaConf.load(config), "model.name", default=None) if config.is_file() else None
    return from_row(row, fails, details, time_s, model_name)


def publish_job(label: JobLabel, outcome: Any = None, error: BaseException | None = None) -> list[Path]:
    """The JUnit and markdown reports of one job (those its ``report`` settings ask for)."""
    case = job_case(label, outcome, error)
    written = []
    if label.report.junit:
        written.append(write_junit(label.report.junit, [case], f"runner {label.model_name}"))
    written += write_markdown(label.report.markdown, markdown([case], f"runner {label.model_id}", case.verdict.upper()))
    return written


def publish_sweep(config: Any, summary: Any) -> list[Path]:
    """The sweep's JUnit and markdown reports: one case per job, or under a release policy (``gate=...``)
    one testsuite per release with one case per task (``summary.release_suites``)."""
    if summary.releases:
        return publish_releases(config, summary)
    fails = inconclusive_fails(summary.mode, summary.on_inconclusive)
    cases = [sweep_case(summary.sweep_dir, r, fails) for r in summary.rows]
    written = []
    if config.report.junit:  # one suite per sweep, named after it (not its timestamped directory)
        written.append(write_junit(config.report.junit, cases, sweep_suite_name(config)))
    name = getattr(getattr(config, "sweep", None), "name", None)  # the heading names the sweep as its suite does
    written += write_markdown(config.report.markdown, markdown(cases, sweep_suite_name(config) if name else
                                                               f"runner sweep {summary.sweep_dir}", summary.verdict))
    return written


def sweep_suite_name(config: Any) -> str:
    """The sweep's JUnit suite: its ``sweep.name`` (the MLflow parent run's), never its timestamped directory."""
    name = getattr(getattr(config, "sweep", None), "name", None)
    return f"runner sweep {name}" if name else "runner sweep"


def publish_releases(config: Any, summary: Any) -> list[Path]:
    """A release policy's reports: each release a testsuite (its tasks, tier and verdict) and a markdown table."""
    suites = summary.release_suites()  # [(title, verdict, reason, cases)]
    written = []
    if config.report.junit:
        written.append(write_junit_suites(config.report.junit, [(title, cases) for title, _, _, cases in suites]))
    written += write_markdown(config.report.markdown, "\n".join(release_markdown(*suite) for suite in suites))
    return written
