"""What ``runner.compare`` prints and writes: report.txt, report.json and JUnit, as a job writes them.

The decision block is the job's own (:meth:`runner.stats.decision.Decision.render`); around it the comparison
says what was compared, how many samples paired and were dropped, the two scores, the minimum detectable
effect at this n, and which samples flipped (the first few here, all of them in report.json).
"""

from __future__ import annotations

import json
from pathlib import Path

from runner.contract.printable import printable
from runner.contract.secrets import redact_text
from runner.files.paths import write_atomic
from runner.reports.cases import Case
from runner.reports.comparison import Comparison, summary
from runner.reports.junit import write_junit
from runner.reports.markdown import markdown, write_markdown
from runner.stats.data.paired_result import min_discordant_to_reject
from runner.stats.data.verdicts import WORDS, inconclusive_fails

SHOWN_FLIPS = 20


def _ids(ids: list[str], result: Comparison) -> str:
    """The first flipped samples, each with the row a person looks up where its id is not one (an lm-eval doc
    index: the document's own id, or "doc index N")."""
    def label(sid: str) -> str:
        row = result.b.samples[sid].row or result.a.samples[sid].row
        return sid if not row or row == sid else f"{sid} ({row})"
    shown = ", ".join(label(i) for i in ids[:SHOWN_FLIPS])
    return shown + (f", ... ({len(ids) - SHOWN_FLIPS} more in report.json)" if len(ids) > SHOWN_FLIPS else "")


def mde_line(result: Comparison) -> str:
    """The minimum detectable effect of the deciding test at this n, or why there is none."""
    d = result.decision
    theta = d.theta
    if theta is not None:
        return (f"{theta:.3f} points at n={d.n} (the smallest {'drop' if result.higher_is_better else 'increase'} "
                f"caught with {1 - d.verdict.params.beta:.0%} probability by the {d.test})")
    return (f"undefined at n={d.n}: fewer than {min_discordant_to_reject(d.alpha)} discordant pairs, so the exact "
            "test cannot flag any regression")


def report_text(result: Comparison, exit_status: int) -> str:
    d, a, b = result.decision, result.a, result.b
    direction = "higher is better" if result.higher_is_better else "lower is better"
    shown = d.figures()  # the deciding rule's figures, on the samples it used
    on = f"on the {shown.n} paired samples" if result.paired else "each on all its samples (unpaired)"
    lines = [
        "=" * 72,
        "runner.compare: B (candidate) against A (reference)",
        f"A (reference): {a.describe()}",
        f"B (candidate): {b.describe()}",
        f"paired:      {len(result.common) if result.paired else 0} samples; dropped {len(result.a_only)} only in A, "
        f"{len(result.b_only)} only in B" + ("" if result.paired else f" (not paired: {result.problem})"),
        f"scores:      A {shown.reference:.3f}, B {shown.score:.3f} ({a.metric}, {direction}; {on})",
        f"MDE:         {mde_line(result)}",
        d.render(),
    ]
    if result.paired:
        worse, better = ("A right, B wrong", "A wrong, B right") if set(_scores(result)) <= {0.0, 100.0} else (
            "B worse than A", "B better than A")
        lines.append(f"flipped:     {len(result.worse)} {worse}: {_ids(result.worse, result) or '-'}")
        lines.append(f"             {len(result.better)} {better}: {_ids(result.better, result) or '-'}")
    lines += [f"note: {n}" for n in result.notes]
    lines.append("=" * 72)
    lines.append(f"result: {d.verdict_line()} (exit {exit_status})")
    return "\n".join(lines)


def _scores(result: Comparison) -> list[float]:
    return [s.samples[i].score for s in (result.a, result.b) for i in result.common]


def report_payload(result: Comparison) -> dict[str, object]:
    """report.json: the job's decision record, what was compared, the pairing and every flipped sample."""
    d = result.decision
    side = {r: {"where": run.where, "kind": run.kind, "task": run.task, "metric": run.metric,
                "num_samples": len(run.samples), "mean": run.mean, "seed": run.seed,
                "dataset_source": run.dataset_source} for r, run in (("a", result.a), ("b", result.b))}
    return {"command": "compare", "reference": side["a"], "candidate": side["b"], **summary(result),
            "higher_is_better": result.higher_is_better, "decision": d.to_dict(), "verdict": d.outcome,
            "exit_status": d.exit_status, "unpaired_test": d.verdict.to_dict(),
            "paired_test": d.paired.to_dict() if d.paired is not None else None, "decided_by": d.rule,
            "passed": d.all_passed, "advice": d.advice.to_dict() if d.advice is not None else None,
            "notes": result.notes}


def case(result: Comparison, text: str) -> Case:
    """The comparison as one CI test case (its verdict as a job's)."""
    d = result.decision
    task = result.b.task or result.a.task or "samples"
    message = f"{d.verdict_line()}; {d.test}: B {d.verdict.score:.4f} vs A {d.verdict.reference:.4f}"
    if d.advice is not None:
        message += f"; {d.advice.text()}"
    return Case(f"compare-{task}", WORDS[d.outcome], message, text, d.verdict.score, d.verdict.reference,
                d.difference, d.p_value, d.n, inconclusive_fails=inconclusive_fails(d.mode, d.on_inconclusive))


def write_reports(result: Comparison, out_dir: Path, markdown_path: str | None = None) -> tuple[str, list[Path]]:
    """report.txt, report.json and junit.xml in ``out_dir`` (and the markdown summary when asked); the text."""
    text = printable(redact_text(report_text(result, result.decision.exit_status)))  # printed too
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / "report.txt", text + "\n", 0o644)
    write_atomic(out_dir / "report.json", json.dumps(report_payload(result), indent=2, default=str) + "\n", 0o644)
    one = case(result, text)
    written = [out_dir / "report.txt", out_dir / "report.json", write_junit(out_dir / "junit.xml", [one], "runner compare")]
    written += write_markdown(markdown_path, markdown([one], "runner compare", one.verdict.upper()))
    return text, written
