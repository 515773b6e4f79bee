"""The sweep's figure (summary.png): one panel per task, each job's score against its reference and tolerance.

Every mark is in the legend. The tolerance band depends only on the reference, the tolerance and the metric's
direction (the drop a GO may show: ``[reference - tolerance, reference]`` when higher is better), so jobs judged
against the same reference get the same band whatever rule decided. A threshold line appears where a threshold
rule decided (TensorRT-LLM's unpaired test, an explicit threshold); a paired rule has none, and its claim's
one-sided bound is drawn instead, in score units. The marker's colour is the job's verdict within the sweep; a
ring of another colour is the job's own verdict where the correction changed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COLOURS = {"go": "#2a9d4b", "no-go": "#d62728", "inconclusive": "#bf8700", "no verdict": "#7f7f7f"}


@dataclass
class Drawn:
    """What the figure shows, for the tests: the legend's labels, each job's band (low, high) and the titles."""

    legend: list[str] = field(default_factory=list)
    bands: dict[str, tuple[float, float]] = field(default_factory=dict)
    titles: list[str] = field(default_factory=list)


def band(row: dict[str, Any]) -> tuple[float, float] | None:
    """The tolerance band of a row: the scores a GO may show, from the reference to one tolerance worse."""
    reference, width = row.get("reference"), row.get("tolerance") or row.get("theta")
    if reference is None or not width:
        return None
    return (reference - width, reference) if row.get("higher_is_better", True) else (reference, reference + width)


def plot(rows: list[dict[str, Any]], path: Path) -> Drawn:
    """Draw ``rows`` into ``path`` (PNG) and return what was drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = Drawn()
    tasks = list(dict.fromkeys(r["task"] for r in rows)) or ["(no jobs)"]
    width = sum(max(4.5, 1.5 + 1.2 * sum(r["task"] == t for r in rows)) for t in tasks)
    fig, axes = plt.subplots(1, len(tasks), figsize=(width, 4.4), squeeze=False)
    used: dict[str, Any] = {}
    for ax, task in zip(axes[0], tasks):
        mine = [r for r in rows if r["task"] == task]
        for x, r in enumerate(mine):
            _draw_row(ax, plt, x, r, used, drawn)
        parts = [(r["configuration"] or r["job"]).split() for r in mine]
        shared = set.intersection(*(set(p) for p in parts)) if len(parts) > 1 else set()
        labels = ["\n".join(w for w in p if w not in shared) or r["job"] for p, r in zip(parts, mine)]
        ax.set_xticks(range(len(mine)), labels, fontsize=8)
        ax.set_xlim(-0.6, max(len(mine), 1) - 0.4)
        title = f"{task}: score against the reference and tolerance"
        ax.set_title(title, fontsize=10)
        drawn.titles.append(title)
        ax.set_ylabel(mine[0]["metric"] if mine and mine[0]["metric"] else "score")
        ax.grid(axis="y", alpha=0.3)
    drawn.legend = list(used)
    fig.legend(list(used.values()), list(used), loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn


def _draw_row(ax: Any, plt: Any, x: int, r: dict[str, Any], used: dict[str, Any], drawn: Drawn) -> None:
    """One job's marks, each kind added to ``used`` (label -> legend handle) the first time it is drawn."""
    span = band(r)
    if span is not None:
        drawn.bands[r["job"]] = span
        used.setdefault("tolerance band (a GO may drop this far)",
                        ax.add_patch(plt.Rectangle((x - 0.35, span[0]), 0.7, span[1] - span[0], color="#9ecae1",
                                                   alpha=0.45, lw=0)))
    if r.get("reference") is not None:
        used.setdefault("reference", ax.hlines(r["reference"], x - 0.35, x + 0.35, colors="#1f4e79", lw=1.5))
    if r.get("threshold") is not None:
        used.setdefault("threshold (a threshold rule decided)",
                        ax.hlines(r["threshold"], x - 0.35, x + 0.35, colors="#d62728", lw=1.5, linestyles="--"))
    elif r.get("bound") is not None and r.get("reference") is not None and r.get("score") is not None:
        edge = r["reference"] + r["bound"]
        used.setdefault("one-sided bound of the claim (paired rule)",
                        ax.vlines(x + 0.12, min(edge, r["score"]), max(edge, r["score"]), colors="#555555", lw=1))
        ax.hlines(edge, x + 0.04, x + 0.2, colors="#555555", lw=1)
    if r.get("score") is None:
        ax.annotate(r["verdict"], (x, 0.02), xycoords=("data", "axes fraction"), ha="center", color="#d62728")
        return
    verdict = r["sweep_verdict"] if r.get("sweep_verdict") in COLOURS else "no verdict"
    (mark,) = ax.plot(x, r["score"], "o", ms=8, color=COLOURS[verdict])
    used.setdefault(f"score, {verdict} in the sweep", mark)
    own = r.get("verdict")
    if own in COLOURS and own != verdict:
        (ring,) = ax.plot(x, r["score"], "o", ms=13, mfc="none", mew=2, color=COLOURS[own])
        used.setdefault(f"ring: {own} alone (the job's own verdict)", ring)
