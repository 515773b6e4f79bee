"""The summary of a finished sweep: one row per job, the family-wise verdict, a table and a plot.

Rows come from what each job left in its directory under the sweep directory (``report.json`` when
it finished, ``failure.json`` when it failed, Hydra's ``.hydra/config.yaml`` for what it was asked
to do), so the summary works for every launcher and without a tracking server. With MLflow, child
runs of the parent that left no file (a job killed by the OS) are listed too, with their status: on
the row of their job directory when the run names it (the ``output_dir`` param), else on their own.
Each row also counts the job's generation-cache hits and misses; the summary totals them into the
sweep's cache hit rate (how much of the sweep was answered without running the model).

A job's verdict in the sweep is its own full decision (``report.json``'s ``decision``): every test
of the job (the accuracy gate and each extra gate) enters with the rule that decided it. Statistical
tests (paired, unpaired) contribute their p-value and their own alpha to the family-wise correction
(``runner.stats.multiple_testing``; regression and non-inferiority gates are corrected as separate
families); deterministic rules (an explicit threshold, the exact rule of sigma-0 tasks) keep their
verdict unchanged. ``sweep.correction=none`` therefore gives back exactly the jobs' own verdicts.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import OmegaConf

from runner.contract.errors import EXIT_ERROR, EXIT_OK
from runner.contract.spec import AccuracySpec
from runner.reports.cases import fmt, fmt_p
from runner.stats.decision_text import STATISTICAL_RULES
from runner.stats.decision_text import claim_gate
from runner.stats.multiple_testing import adjust
from runner.stats.data.verdicts import CODES, GO, INCONCLUSIVE, NO_GO, VERDICTS, WORDS, combine, exit_status, reported
from runner.sweep import release
from runner.sweep.html import render as render_html
from runner.tracking.naming import run_name

# one number per column: n, score, reference, difference, the bound (or threshold) and p-value are the deciding
# rule's, on the samples it used (runner/stats/decision_text.py); what other rules computed keeps its own name
COLUMNS = ["job", "configuration", "model", "quant", "spec", "task", "metric", "n", "score", "reference", "difference",
           "claim", "bound", "bound_line", "ci_low", "ci_high", "threshold", "theta", "test", "alpha", "p_value",
           "verdict", "p_adjusted", "sweep_verdict", "advice", "entry_reference", "run_score", "run_n",
           "unpaired_threshold", "unpaired_p_value", "cache_hits", "cache_misses", "error", "mlflow_run_id"]
FIGURES = ("n", "score", "reference", "difference", "claim", "bound", "bound_line", "ci_low", "ci_high", "threshold",
           "theta", "alpha", "p_value", "entry_reference", "run_score", "run_n", "unpaired_threshold",
           "unpaired_p_value")


@dataclass
class SweepConfig:
    """How a multirun's jobs are judged together (runner/sweep/callback.py, runner/stats/multiple_testing.py)."""

    correction: str = "holm"  # holm (family-wise error) | bh (false discovery rate) | none
    # None: each job is tested at its own task's alpha (CNN/DailyMail 0.002, perplexity 0.01, ...);
    # a number replaces every job's alpha, and the summary says so.
    alpha: Optional[float] = None
    name: Optional[str] = None  # the parent run's name; None: sweep-<time>


@dataclass
class Summary:
    rows: list[dict[str, Any]]
    correction: str
    alpha: float | None  # None: each test at its own task's alpha
    sweep_dir: Path
    files: dict[str, Path] = field(default_factory=dict)
    stopped: str | None = None  # what ended the multirun before all its jobs returned (a killed worker)
    mode: str = "three_way"  # stats.verdicts of the sweep
    on_inconclusive: str = "inconclusive"
    releases: list[release.ReleaseResult] = field(default_factory=list)  # under a release policy (gate=...)
    stop_status: int | None = None  # a signal stopped the sweep: its exit status (143 SIGTERM, 130 SIGINT)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["verdict"] in ("failed", "incomplete")]

    @property
    def flagged(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["sweep_verdict"] == "no-go"]

    @property
    def undecided(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["sweep_verdict"] == "inconclusive"]

    @property
    def verdict(self) -> str:
        """FAILED, NO-GO (a job shows a regression after the correction), GO (every judged job shows its drop
        within tolerance), INCONCLUSIVE, or NO VERDICT."""
        if self.failed or self.stopped:
            return "FAILED"
        if self.flagged:
            return NO_GO
        if self.undecided:
            return INCONCLUSIVE
        return GO if any(r["sweep_verdict"] == "go" for r in self.rows) else "NO VERDICT"

    @property
    def exit_status(self) -> int:
        """1 when a job failed or the sweep stopped early, else the verdict's status as a job's
        (0 GO, 3 NO-GO, 4 INCONCLUSIVE unless ``stats.verdicts``/``stats.on_inconclusive`` map it).
        Under a release policy: the release's (runner/sweep/release.py). A sweep a signal stopped: the
        signal's status (143 SIGTERM, 130 SIGINT), as the process exits with it."""
        if self.stop_status is not None:
            return self.stop_status
        if self.releases:
            return release.release_exit(self.releases)
        if self.verdict == "FAILED":
            return EXIT_ERROR
        if self.verdict == "NO VERDICT":
            return EXIT_OK
        return exit_status(self.verdict, self.mode, self.on_inconclusive)

    @property
    def cache(self) -> dict[str, Any]:
        """The generation cache over the sweep: hits, misses, requests and the hit rate (None when no
        job asked its cache anything: ``cache=off``, or every job failed before evaluating)."""
        hits = sum(r["cache_hits"] or 0 for r in self.rows)
        requests = hits + sum(r["cache_misses"] or 0 for r in self.rows)
        return {"hits": hits, "misses": requests - hits, "requests": requests,
                "hit_rate": hits / requests if requests else None}

    @property
    def alpha_text(self) -> str:
        return ("at each job's own alpha" if self.alpha is None
                else f"at alpha {self.alpha:g}, replacing the tasks' own alphas (sweep.alpha)")

    def render_cache(self) -> str:
        cache = self.cache
        if cache["hit_rate"] is None:
            return "generation cache: no requests (cache=off, or no job evaluated)"
        return (f"generation cache: {cache['hits']} of {cache['requests']} requests answered from the cache "
                f"(hit rate {100 * cache['hit_rate']:.1f}%)")

    def render(self) -> str:
        lines = ["=" * 100, f"sweep summary: {len(self.rows)} jobs in {self.sweep_dir}",
                 f"{'job':<32} {'n':>5} {'score':>8} {'ref':>8} {'delta':>8} {'bound':>8} {'thresh':>8} {'p':>8} "
                 f"{'p_adj':>8}  verdict -> sweep"]
        for r in self.rows:
            lines.append(f"{r['job'][:32]:<32} {r['n'] if r['n'] is not None else '-':>5} {fmt(r['score']):>8} "
                         f"{fmt(r['reference']):>8} {fmt(r['difference'], sign=True):>8} {fmt(r['bound'], sign=True):>8} "
                         f"{fmt(r['threshold']):>8} {fmt_p(r['p_value']):>8} {fmt_p(r['p_adjusted']):>8}  "
                         f"{r['verdict']} -> {r['sweep_verdict']}" + (f"  ({_clip(r['error'], 80)})" if r["error"] else ""))
        lines.append(COLUMN_NOTE)
        lines.append(self.render_cache())
        if self.stopped:
            lines.append(f"sweep stopped early: {_clip(self.stopped, 200)}")
        lines.append(f"sweep verdict: {reported(self.verdict, self.mode) if self.verdict in VERDICTS else self.verdict}"
                     f" ({self.correction} correction {self.alpha_text}; {len(self.flagged)} NO-GO, "
                     f"{len(self.undecided)} INCONCLUSIVE, {len(self.failed)} failed)"
                     + (" -> the release verdict below decides the exit status"
                        if self.releases and self.stop_status is None else f" -> exit {self.exit_status}"))
        advice = [r for r in self.undecided if r.get("advice")]
        for r in advice:
            lines.append(f"  {r['job']}: {r['advice']}")
        lines += release.render(self.releases, self.mode)
        if self.files:
            lines.append("summary: " + ", ".join(str(p) for p in self.files.values()))
        lines.append("=" * 100)
        return "\n".join(lines)

    def log_to(self, client: Any, parent_id: str) -> None:
        """Table, plot, counts and the generation cache's totals on the parent run."""
        for path in self.files.values():
            client.log_artifact(parent_id, str(path))
        cache = self.cache
        counts = {"jobs": len(self.rows), "jobs_failed": len(self.failed), "jobs_flagged": len(self.flagged),
                  "jobs_no_go": len(self.flagged), "jobs_inconclusive": len(self.undecided),
                  "jobs_go": sum(r["sweep_verdict"] == "go" for r in self.rows),
                  "jobs_regressed_uncorrected": sum(r["verdict"] == "no-go" for r in self.rows),
                  "cache_hits": cache["hits"], "cache_requests": cache["requests"]}
        if cache["hit_rate"] is not None:
            counts["cache_hit_rate"] = cache["hit_rate"]
        for key, value in counts.items():
            client.log_metric(parent_id, key, float(value))
        client.set_tag(parent_id, "sweep.verdict", self.verdict)
        client.set_tag(parent_id, "sweep.regressed", ", ".join(_names(self.flagged))[:5000] or "none")
        client.set_tag(parent_id, "mlflow.note.content", self.note()[:50000])  # the run page's description
        word = WORDS.get(self.verdict, self.verdict.lower())
        client.set_tag(parent_id, "verdict", word)  # the children's column shows the parent's too
        client.log_metric(parent_id, "verdict", float(CODES.get(word, CODES["failed"])))
        if self.releases:
            release.log_to(self.releases, client, parent_id)

    def note(self) -> str:
        """The parent run's description in MLflow: the verdict, the children that regressed and the table."""
        lines = [f"**Sweep verdict: {self.verdict}** ({len(self.rows)} jobs in `{self.sweep_dir}`, {self.correction} "
                 f"correction {self.alpha_text})", ""]
        for title, rows in (("Regressed (NO-GO)", self.flagged), ("Inconclusive", self.undecided),
                            ("Failed", self.failed)):
            if rows:
                lines += [f"{title}: " + ", ".join(f"`{name}`" for name in _names(rows)), ""]
        lines += ["| run | score | reference | delta | p | p adjusted | verdict -> sweep |", "|---|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {name} | {fmt(r['score'])} | {fmt(r['reference'])} | {fmt(r['difference'], sign=True)} | "
                  f"{fmt_p(r['p_value'])} | {fmt_p(r['p_adjusted'])} | {r['verdict']} -> {r['sweep_verdict']} |"
                  for name, r in zip(_names(self.rows), self.rows)]
        return "\n".join(lines)

    def release_suites(self) -> list[tuple[str, str, str, list[Any]]]:
        """Each release as (title, verdict, reason, one case per task) for the CI reports."""
        return [(r.title, r.release.verdict, r.release.reason, release.cases(r, self.mode, self.on_inconclusive))
                for r in self.releases]


COLUMN_NOTE = ("n score ref delta: the deciding rule's, on the samples it used; bound: the one-sided bound of the\n"
               "claim the verdict rests on (INCONCLUSIVE: the nearer); thresh: a threshold rule's line; p: that claim's")


def _names(rows: list[dict[str, Any]]) -> list[str]:
    """The children's MLflow run names (``model/quant-task``), the job directory where a row has none."""
    return [str(r.get("run_name") or r["job"]) for r in rows]


def _clip(text: str, width: int) -> str:
    """One line of at most ``width`` characters (errors rendered for a person span several lines)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 3] + "..."


def build(sweep_dir: Path, correction: str, alpha: float | None, client: Any = None, parent_id: str | None = None,
          stopped: str | None = None, mode: str = "three_way", on_inconclusive: str = "inconclusive",
          policy: Any = None, stop_status: int | None = None) -> Summary:
    """Collect the jobs' rows, correct their tests for multiplicity, and write summary.{csv,html,json,png}
    in ``sweep_dir``. ``alpha``: None tests each at its task's alpha; a number replaces them all.
    ``stopped``: why the multirun ended before all its jobs returned; the sweep then fails, with
    ``stop_status`` when a signal stopped it (the releases too).
    ``policy``: a release policy (``gate``): the release verdicts, from the jobs' own tests."""
    dirs = sorted(_job_dirs(sweep_dir), key=_job_order)
    rows = [_row(d) for d in dirs]
    _label_configurations(rows, dirs)
    if client is not None and parent_id:
        rows += _orphans(client, parent_id, dict(zip(dirs, rows)))
    releases = release.judge_releases(policy, rows, mode, on_inconclusive, stopped, stop_status) if policy is not None else []
    judge(rows, correction, alpha)
    summary = Summary(rows, correction, alpha, sweep_dir, stopped=stopped, mode=mode, on_inconclusive=on_inconclusive,
                      releases=releases, stop_status=stop_status)
    summary.files = write(summary)
    return summary


def judge(rows: list[dict[str, Any]], correction: str, alpha: float | None) -> None:
    """Set each row's ``sweep_verdict`` (and ``p_adjusted`` of its accuracy test) from its tests."""
    tests = [(row, t) for row in rows for t in row.pop("_tests", [])]
    for gate in ("regression", "noninferiority"):
        family = [(row, t) for row, t in tests
                  if t["rule"] in STATISTICAL_RULES and t["gate"] == gate and t["p_value"] is not None]
        adjusted = adjust([t["p_value"] for _, t in family], [alpha or t["alpha"] for _, t in family], correction)
        for (row, t), p_adj, reject in zip(family, adjusted.p_adjusted, adjusted.reject):
            t["p_adjusted"] = p_adj
            t["sweep_passed"] = not reject if gate == "regression" else reject
    by_row: dict[int, list[dict[str, Any]]] = {}
    for row, t in tests:
        t.setdefault("sweep_passed", t["passed"])  # deterministic rules and p-less claims keep their own
        by_row.setdefault(id(row), []).append(t)
        if t["name"] == "accuracy" and t["gate"] == row.get("_p_gate", "regression"):
            row["p_adjusted"] = t.get("p_adjusted")
    for r in rows:
        r.pop("_p_gate", None)
        mine, gate = by_row.get(id(r)), r.pop("_gate", "regression")
        if mine:
            regression = any(not t["sweep_passed"] for t in mine if t["gate"] == "regression")
            within = [t["sweep_passed"] for t in mine if t["gate"] == "noninferiority"]
            if not within:  # a deterministic rule: GO when it holds
                r["sweep_verdict"] = "no-go" if regression else "go"
            else:
                r["sweep_verdict"] = WORDS[combine(regression, within[0], gate)]
        elif r["verdict"] in ("failed", "incomplete"):
            r["sweep_verdict"] = r["verdict"]
        else:
            r["sweep_verdict"] = "no verdict"


def _label_configurations(rows: list[dict[str, Any]], dirs: list[Path]) -> None:
    """A job's configuration: its overrides that differ between the jobs (what the sweep varied)."""

    per_job = [list(OmegaConf.load(d / ".hydra" / "overrides.yaml")) for d in dirs]
    common = set.intersection(*(set(o) for o in per_job)) if per_job else set()
    for row, overrides in zip(rows, per_job):
        row["configuration"] = " ".join(o for o in overrides if o not in common) or row["job"]


def _job_dirs(sweep_dir: Path) -> list[Path]:
    return [d for d in sweep_dir.iterdir() if d.is_dir() and (d / ".hydra").is_dir()] if sweep_dir.is_dir() else []


def _job_order(path: Path) -> tuple[int, str]:
    head = path.name.split("-", 1)[0]
    return (int(head) if head.isdigit() else 1 << 30, path.name)


def _row(job_dir: Path) -> dict[str, Any]:
    """The job's row; a job whose files cannot be read is a failed row that says why, never a crash."""
    try:
        return _read_row(job_dir)
    except Exception as err:  # a truncated or hand-edited file: one row, not the whole summary
        row: dict[str, Any] = dict.fromkeys(COLUMNS)
        return row | {"job": job_dir.name, "verdict": "failed",
                      "error": f"the job's files cannot be read ({type(err).__name__}: {err})"[:500]}


def _read_row(job_dir: Path) -> dict[str, Any]:

    asked = OmegaConf.load(job_dir / ".hydra" / "config.yaml")
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    model_name = OmegaConf.select(asked, "model.name", default=None) or asked.model.hf_id
    row |= {"job": job_dir.name, "model": asked.model.hf_id, "quant": asked.quant.name, "task": asked.task.name,
            "run_name": run_name(model_name, asked.quant.name, asked.task.name),
            "metric": asked.task.metric, "spec": f"quant_algo={asked.quant.quant_algo}", "error": ""}
    report, failure = job_dir / "report.json", job_dir / "failure.json"
    if report.is_file():
        payload = json.loads(report.read_text())

        decision = payload.get("decision")
        cache = payload.get("generation_cache") or {}  # None with cache=off
        metric = payload.get("metric") or asked.task.metric  # as the task resolved it (task=lm_eval: never auto)
        row |= {"spec": AccuracySpec(**payload["spec"]).describe(), "n": payload.get("num_evaluated"), "metric": metric,
                "score": payload["metrics"].get(metric), "mlflow_run_id": payload.get("mlflow_run_id"),
                "cache_hits": cache.get("hits"), "cache_misses": cache.get("misses")}
        if decision:
            row |= {k: decision[k] for k in FIGURES if k in decision}
            row["test"] = decision["rule"]
            row["_p_gate"] = claim_gate(decision.get("claim"))
            row["verdict"] = WORDS[decision["verdict"]]
            row["advice"] = (decision.get("advice") or {}).get("text")
            row["_tests"] = [dict(t) for t in decision["tests"]]
            row["_gate"] = decision.get("stats_gate", "regression")
        else:
            row["verdict"] = "no verdict"
    elif failure.is_file():
        payload = json.loads(failure.read_text())
        row |= {"verdict": "failed", "error": payload["error"], "mlflow_run_id": payload.get("mlflow_run_id")}
    else:
        row |= {"verdict": "incomplete", "error": "the job left neither report.json nor failure.json (killed?)"}
    for key in FIGURES:
        if isinstance(row[key], float) and not math.isfinite(row[key]):
            row[key] = None
    return row


def _orphans(client: Any, parent_id: str, by_dir: dict[Path, dict[str, Any]]) -> list[dict[str, Any]]:
    """Child runs that left no file in the sweep directory (e.g. a job killed by the OS). A run whose
    ``output_dir`` param is a job directory completes that job's row (its run id and MLflow status);
    the others become rows of their own."""
    known = {r["mlflow_run_id"] for r in by_dir.values()}
    rows_at = {str(d.resolve()): r for d, r in by_dir.items() if r["mlflow_run_id"] is None}
    parent = client.get_run(parent_id)
    runs = client.search_runs([parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'")
    out = []
    for run in runs:
        if run.info.run_id in known:
            continue
        output_dir = run.data.params.get("output_dir")
        row = rows_at.pop(str(Path(output_dir).resolve()), None) if output_dir else None
        if row is not None:
            row["mlflow_run_id"] = run.info.run_id
            row["error"] = f"{row['error']}; MLflow status {run.info.status}"
            continue
        tags = run.data.tags
        out.append(dict.fromkeys(COLUMNS) | {
            "job": run.info.run_name, "run_name": run.info.run_name, "model": tags.get("model"), "quant": tags.get("quant"),
            "task": tags.get("task"),
            "verdict": "incomplete", "error": f"MLflow status {run.info.status}; no output in the sweep directory",
            "mlflow_run_id": run.info.run_id})
    return out


def write(summary: Summary) -> dict[str, Path]:
    import pandas as pd

    base = summary.sweep_dir
    base.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(summary.rows, columns=COLUMNS)
    for count in ("n", "cache_hits", "cache_misses"):  # counts stay integers next to jobs without one
        frame[count] = frame[count].astype("Int64")
    files = {"csv": base / "summary.csv", "html": base / "summary.html", "json": base / "summary.json",
             "png": base / "summary.png"}
    frame.to_csv(files["csv"], index=False)
    plot(summary.rows, files["png"])
    table = frame.to_html(index=False, na_rep="-", float_format=lambda v: f"{v:.4g}", border=0, classes="summary")
    files["html"].write_text(render_html(summary, table, files["png"]))
    files["json"].write_text(json.dumps({"verdict": summary.verdict, "exit_status": summary.exit_status,
                                         "correction": summary.correction, "alpha": summary.alpha,
                                         "stopped": summary.stopped, "generation_cache": summary.cache,
                                         "release": [release.to_dict(r) for r in summary.releases] or None,
                                         "rows": summary.rows}, indent=2, default=str) + "\n")
    return files


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Score against threshold per configuration, one panel per task, with the theta band: the range
    between the reference and reference - theta (regressions smaller than theta may pass unnoticed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r["task"] for r in rows)) or ["(no jobs)"]
    width = sum(max(4.5, 1.5 + 1.2 * sum(r["task"] == t for r in rows)) for t in tasks)
    fig, axes = plt.subplots(1, len(tasks), figsize=(width, 4.2), squeeze=False)
    colours = {"go": "#2a9d4b", "no-go": "#d62728", "inconclusive": "#bf8700", "no verdict": "#7f7f7f"}
    for ax, task in zip(axes[0], tasks):
        mine = [r for r in rows if r["task"] == task]
        for x, r in enumerate(mine):
            if r["reference"] is not None and r["theta"] is not None:
                line = r["threshold"] if r["threshold"] is not None else r["unpaired_threshold"]
                lower = r["reference"] - r["theta"] if (line or 0) <= r["reference"] else r["reference"]
                ax.add_patch(plt.Rectangle((x - 0.35, lower), 0.7, r["theta"], color="#9ecae1", alpha=0.45, lw=0,
                                           label="theta band" if x == 0 else None))
                ax.hlines(r["reference"], x - 0.35, x + 0.35, colors="#1f4e79", lw=1.5,
                          label="reference" if x == 0 else None)
            if r["threshold"] is not None:
                ax.hlines(r["threshold"], x - 0.35, x + 0.35, colors="#d62728", lw=1.5, linestyles="--",
                          label="threshold" if x == 0 else None)
            if r["score"] is not None:
                verdict = r["sweep_verdict"] if r["sweep_verdict"] in colours else "no verdict"
                ax.plot(x, r["score"], "o", ms=8, color=colours[verdict])
            else:
                ax.annotate(r["verdict"], (x, 0.02), xycoords=("data", "axes fraction"), ha="center", color="#d62728")
        parts = [(r["configuration"] or r["job"]).split() for r in mine]
        shared = set.intersection(*(set(p) for p in parts)) if len(parts) > 1 else set()
        labels = ["\n".join(w for w in p if w not in shared) or r["job"] for p, r in zip(parts, mine)]
        ax.set_xticks(range(len(mine)), labels, fontsize=8)
        ax.set_xlim(-0.6, max(len(mine), 1) - 0.4)
        ax.set_title(f"{task}: score vs threshold", fontsize=10)
        ax.set_ylabel(mine[0]["metric"] if mine and mine[0]["metric"] else "score")
        ax.grid(axis="y", alpha=0.3)
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=f"score ({k})") for k, c in colours.items()]
    first = axes[0][0].get_legend_handles_labels()
    fig.legend(first[0] + handles, first[1] + [h.get_label() for h in handles], loc="lower center", ncol=3,
               fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
