"""Write the CI-facing reports of a finished job or sweep (``report.junit``, ``report.markdown``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.errors import UserError
from runner.exports.cases import Case, from_row
from runner.exports.junit import write_junit
from runner.exports.markdown import markdown, write_markdown
from runner.stats.verdicts import WORDS, inconclusive_fails


def job_case(cfg: Any, outcome: Any = None, error: BaseException | None = None) -> Case:
    """The job as a case: its verdict block when it finished, its error when it did not."""
    name = f"{cfg.quant.name}-{cfg.task.name}"
    if outcome is None:
        text = error.render() if isinstance(error, UserError) else f"{type(error).__name__}: {error}"
        return Case(name, "failed", " ".join(text.split())[:300], text)
    decision = outcome.decision
    report = Path(outcome.output_dir) / "report.txt"
    details = report.read_text() if report.is_file() else ""
    if decision is None:
        return Case(name, "no verdict", f"score {outcome.score:.4f}, no verdict (reference.mode={cfg.reference.mode})",
                    details, outcome.score)
    message = f"{decision.verdict_line()}; {decision.test}: score {outcome.score:.4f} vs reference " \
              f"{decision.verdict.reference:.4f}"
    if decision.advice is not None:
        message += f"; {decision.advice.text()}"
    return Case(name, WORDS[decision.outcome], message, details, outcome.score, decision.verdict.reference,
                decision.difference, decision.p_value, decision.n,
                inconclusive_fails=inconclusive_fails(cfg.stats.verdicts, cfg.stats.on_inconclusive))


def publish_job(cfg: Any, outcome: Any = None, error: BaseException | None = None) -> list[Path]:
    case = job_case(cfg, outcome, error)
    written = []
    if cfg.report.junit:
        written.append(write_junit(cfg.report.junit, [case], f"runner {cfg.model.name}"))
    written += write_markdown(cfg.report.markdown, markdown([case], f"runner {cfg.model.hf_id}", case.verdict.upper()))
    return written


def publish_sweep(config: Any, summary: Any) -> list[Path]:
    fails = inconclusive_fails(summary.mode, summary.on_inconclusive)
    cases = [from_row(r, fails) for r in summary.rows]
    written = []
    if config.report.junit:
        written.append(write_junit(config.report.junit, cases, f"sweep {summary.sweep_dir.name}"))
    written += write_markdown(config.report.markdown, markdown(cases, f"runner sweep {summary.sweep_dir}", summary.verdict))
    return written
