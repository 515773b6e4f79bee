"""What a job prints and writes for people: report.txt, the closing summary, and the notes on how many
samples are evaluated."""

from __future__ import annotations

from pathlib import Path

from runner.contract.spec import AccuracySpec
from runner.contract.task_config import ModelConfig, TaskConfig
from runner.stats.decision import Decision
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics.ztest import theta_of


def sample_count_notes(default: int, inherited: bool, planned: int, selected: int, checked: bool,
                       entry: str = "") -> list[str]:
    """Say, before anything is evaluated, when the number of samples differs from what the task or the user asked
    (``entry``: which reference entry, and when it was recorded, in words)."""
    notes = []
    if checked and inherited and planned != default:
        notes.append(f"the reference entry{f' ({entry})' if entry else ''} fixes num_samples={planned} (the task's "
                     f"default {default} is not used); set task.num_samples=N to evaluate another n")
    if selected != planned:
        why = ("the task draws the same number from every stratum (subject), rounding up" if selected > planned
               else "the dataset has fewer samples")
        notes.append(f"{selected} samples are evaluated, not {planned}: {why}; the statistics use n={selected}")
    return notes


def asked_n_note(params: HypothesisParams, reference_n: int, paired_pool: int | None) -> str:
    """What an n the user set means against a reference recorded with another n: a seeded subset of the
    reference's own samples (``paired_pool`` of them, paired), or an unpaired test at the n evaluated."""
    n = params.num_samples
    if paired_pool is not None:
        return (f"task.num_samples={n}: the reference was recorded with num_samples={reference_n}; this run evaluates "
                f"a seeded subset of {min(n, paired_pool)} of its {paired_pool} samples and pairs on them")
    at_ref = HypothesisParams(params.alpha, params.beta, params.sigma, reference_n, params.higher_is_better)
    return (f"task.num_samples={n}: the reference was recorded with num_samples={reference_n}; the unpaired test "
            f"uses the n evaluated, which detects drops of theta={theta_of(params):.2f} points "
            f"(theta={theta_of(at_ref):.2f} at n={reference_n})")


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
        lines.append(f"no verdict (reference.mode={mode}); theta at n={params.num_samples}: {theta_of(params):.4f}")
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
