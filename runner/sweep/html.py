"""The sweep's self-contained HTML report: the verdict first, one styled row per job (the deciding rule's n,
score, reference and delta on the samples it used, the bound its verdict rests on, the CI, its p-value before
and after the correction, the rule that decided), the plot embedded, and the full table below. One file: it can be attached to a CI run or mailed."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from runner.reports.cases import fmt

COLOURS = {"go": "#1a7f37", "no-go": "#cf222e", "inconclusive": "#bf8700", "failed": "#8250df", "incomplete": "#9a6700",
           "no verdict": "#57606a"}
STYLE = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em;color:#1f2328}
h1{font-size:1.4em;margin-bottom:.2em} .banner{display:inline-block;padding:.3em .8em;border-radius:6px;color:#fff;
font-weight:600;font-size:1.2em} p.meta{color:#57606a} table{border-collapse:collapse;margin:1em 0;font-size:.92em}
th,td{padding:4px 10px;border-bottom:1px solid #d0d7de;text-align:right} th{background:#f6f8fa}
td.l,th.l{text-align:left} .pill{padding:1px 8px;border-radius:10px;color:#fff;font-weight:600}
img{max-width:100%;border:1px solid #d0d7de;border-radius:6px} details{margin-top:1.5em} .err{color:#cf222e;text-align:left}
"""


def _pill(verdict: str) -> str:
    return f"<span class='pill' style='background:{COLOURS.get(verdict, '#57606a')}'>{html.escape(verdict)}</span>"


def render(summary: Any, full_table: str, plot: Path | None) -> str:
    verdict = summary.verdict
    colour = COLOURS.get(verdict.lower(), COLOURS["failed"]) if verdict != "NO VERDICT" else COLOURS["no verdict"]
    rows = []
    for r in summary.rows:
        ci = "-" if r.get("ci_low") is None else f"[{fmt(r['ci_low'], sign=True)}, {fmt(r.get('ci_high'), sign=True)}]"
        error = f"<td class='err'>{html.escape(' '.join(str(r['error']).split())[:200])}</td>" if r.get("error") else \
            f"<td class='l'>{html.escape(str(r['advice']))}</td>" if r.get("advice") else "<td></td>"
        bound = "-" if r.get("bound") is None else \
            f"{html.escape(str(r.get('claim')))} {fmt(r['bound'], sign=True)} vs {fmt(r.get('bound_line'), sign=True)}"
        if r.get("bound") is None and r.get("threshold") is not None:
            bound = f"threshold {fmt(r['threshold'])}"
        rows.append(
            f"<tr><td class='l'>{html.escape(str(r.get('job')))}</td><td class='l'>{html.escape(str(r.get('task')))}</td>"
            f"<td class='l'>{html.escape(str(r.get('quant')))}</td><td>{r.get('n') if r.get('n') is not None else '-'}</td>"
            f"<td>{fmt(r.get('score'))}</td><td>{fmt(r.get('reference'))}</td>"
            f"<td>{fmt(r.get('difference'), sign=True)}</td><td>{bound}</td><td>{ci}</td>"
            f"<td>{fmt(r.get('p_value'), 4)}</td><td>{fmt(r.get('p_adjusted'), 4)}</td>"
            f"<td class='l'>{html.escape(str(r.get('test') or '-'))}</td>"
            f"<td class='l'>{_pill(r.get('verdict') or 'incomplete')}</td>"
            f"<td class='l'>{_pill(r.get('sweep_verdict') or r.get('verdict') or 'incomplete')}</td>{error}</tr>")
    image = ""
    if plot is not None and plot.is_file():
        image = f"<img alt='score and threshold per configuration' src='data:image/png;base64,{base64.b64encode(plot.read_bytes()).decode()}'>"
    stopped = f"<p class='err'><b>Sweep stopped early</b>: {html.escape(summary.stopped)}</p>" if summary.stopped else ""
    stopped += "".join(f"<p><b>{html.escape(r.title)}</b> {_pill(r.release.verdict.lower())} "
                       f"{html.escape(r.release.reason)}</p>" for r in summary.releases)  # gate=...: the release verdicts
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>sweep: {html.escape(verdict)}</title>"
        f"<style>{STYLE}</style></head><body><h1>Sweep summary</h1>"
        f"<span class='banner' style='background:{colour}'>{html.escape(verdict)}</span>"
        f"<p class='meta'>{len(summary.rows)} jobs in {html.escape(str(summary.sweep_dir))}; "
        f"{html.escape(summary.claims_text)}; {len(summary.flagged)} flagged, {len(summary.failed)} failed. "
        f"{html.escape(summary.render_cache())}.</p>{stopped}"
        "<table><tr><th class='l'>job</th><th class='l'>task</th><th class='l'>quant</th><th>n</th><th>score</th>"
        "<th>reference</th><th>delta</th><th>bound</th><th>CI of delta</th><th>p-value</th><th>p adjusted</th><th class='l'>decided by</th>"
        "<th class='l'>job verdict</th><th class='l'>sweep verdict</th><th class='l'>error or advice</th></tr>" + "".join(rows) + "</table>"
        f"{image}<p class='meta'>n, score, reference, delta: the deciding rule's, on the samples it used (a paired test "
        "on part of an entry: the entry's mean on those samples); delta: score - reference (CI: two-sided 1 - 2 alpha); "
        "bound: the one-sided bound of the claim the verdict rests on (the nearer one when INCONCLUSIVE) and the line "
        "it must pass; p-value: one-sided, of that claim (none for a deterministic rule); p adjusted: after the family-wise correction; job verdict: the "
        "job's own, at its task's alpha (its report, the MLflow tag verdict); sweep verdict: the job's within the sweep, "
        "after the correction (the tag sweep_verdict); the banner is the sweep's.</p>"
        f"<details><summary>every column</summary>{full_table}</details></body></html>\n")
