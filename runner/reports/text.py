"""What a job prints and writes for people: report.txt, the closing summary, and the notes on how many
samples are evaluated."""

from __future__ import annotations

from pathlib import Path

from runner.contract.spec import AccuracySpec
from runner.contract.task_config import ModelConfig, TaskConfig
from runner.stats.decision import Decision
from runner.stats.unpaired import HypothesisParams


def sample_count_notes(asked: int, planned: int, selected: int, checked: bool) -> list[str]:
    """Say, before anything is evaluated, when the number of samples differs from what the user asked."""
    notes = []
    if checked and planned != asked:
        notes.append(f"the reference entry fixes num_samples={planned} (task.num_samples={asked} not used); "
                     "use reference.mode=skip to evaluate another n")
    if selected != planned:
        why = ("the task draws the same number from every stratum (subject), rounding up" if selected > planned
               else "the dataset has fewer samples")
        notes.append(f"{selected} samples are evaluated, not {planned}: {why}; the statistics use n={selected}")
    return notes


def report_text(task: TaskConfig, model: ModelConfig, spec: AccuracySpec, score: float, evaluated: int,
                params: HypothesisParams, decision: Decision | None, mode: str, notes: list[str]) -> str:
    lines = [
        "=" * 72,
        f"{task.name} | {model.hf_id} | {spec.describe()}",
        f"{task.metric}: {score:.4f} on {evaluated} samples",
    ]
    if decision is not None:
        lines.append(decision.render())
    else:
        lines.append(f"no verdict (reference.mode={mode}); theta at n={params.num_samples}: {params.theta:.4f}")
    lines += [f"note: {n}" for n in notes]
    lines.append("=" * 72)
    return "\n".join(lines)


def summary_line(decision: Decision | None, exit_status: int, output_dir: Path, where: str) -> str:
    if decision is None:
        result = "NO VERDICT"
    else:
        result = f"{decision.verdict_line()} ({decision.test})"
    lines = [f"result: {result} (exit {exit_status})"]
    if decision is not None and decision.advice is not None:
        lines.append(f"to decide: {decision.advice.text()}")
    return "\n".join(lines + [
        f"outputs: {output_dir} (report.txt, report.json, results.json, samples.jsonl)",
        f"tracking: {where}",
    ])
