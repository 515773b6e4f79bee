"""A sweep's verdict for each job: its tests judged as families of claims (docs/statistics.md, "Sweeps").

The NO-GO (regression) claims of all jobs are one family, corrected by ``sweep.correction``: the sweep is NO-GO
when any job regresses, a union of claims. The GO (tolerance) claims are corrected by ``sweep.go_correction``,
``none`` by default: the sweep is GO only when every job is, an intersection-union test (Berger 1982) that holds
its alpha unadjusted; ``holm``/``bh`` when the per-job GOs pick among alternatives. Deterministic rules keep their
verdict. A verdict the correction changed gets advice.
"""

from __future__ import annotations

from typing import Any

from runner.reports.cases import fmt_p
from runner.stats.decision import STATISTICAL_RULES
from runner.stats.multiple_testing import adjust
from runner.stats.data.verdicts import WORDS, combine


def judge(rows: list[dict[str, Any]], correction: str, alpha: float | None, go_correction: str = "none") -> None:
    """Set each row's ``sweep_verdict`` (and ``p_adjusted`` of the claim it shows) from its tests.

    The regression (NO-GO) claims are one family, corrected with ``correction``; the tolerance (GO) claims
    are corrected with ``go_correction``, ``none`` by default: the sweep is GO only when every job is, an
    intersection-union test that holds its alpha unadjusted. A row whose verdict the correction changed gets
    ``advice`` saying why and what would decide it."""
    tests = [(row, t) for row in rows for t in row.pop("_tests", [])]
    sizes: dict[str, int] = {}
    for gate, method in (("regression", correction), ("noninferiority", go_correction)):
        family = [(row, t) for row, t in tests
                  if t["rule"] in STATISTICAL_RULES and t["gate"] == gate and t["p_value"] is not None]
        sizes[gate] = len(family)
        adjusted = adjust([t["p_value"] for _, t in family], [alpha or t["alpha"] for _, t in family], method)
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
            if r["sweep_verdict"] != r["verdict"]:
                r["advice"] = _changed_advice(r, mine, correction, go_correction, sizes, alpha)
        elif r["verdict"] in ("failed", "incomplete"):
            r["sweep_verdict"] = r["verdict"]
        else:
            r["sweep_verdict"] = "no verdict"


def _changed_advice(row: dict[str, Any], tests: list[dict[str, Any]], correction: str, go_correction: str,
                    sizes: dict[str, int], alpha: float | None) -> str:
    """Why the family-wise correction changed a job's verdict, and the two ways to a decision: more samples for
    that job, or the setting that states the sweep's claim differently."""
    was = row["verdict"].upper()
    lost = [t for t in tests if t.get("p_adjusted") is not None and t["passed"] != t["sweep_passed"]]
    gate = lost[0]["gate"] if lost else "regression"
    t = lost[0] if lost else {}
    level = alpha or t.get("alpha")
    figures = (f" (p {fmt_p(t.get('p_value'))}, {method_name(correction if gate == 'regression' else go_correction)}-"
               f"adjusted {fmt_p(t.get('p_adjusted'))}, not below alpha {level:g})" if t else "")
    if gate == "regression":
        return (f"{was} alone, {row['sweep_verdict'].upper()} in the sweep: its regression claim does not survive "
                f"{method_name(correction)} across the sweep's {sizes['regression']} NO-GO claims{figures}; to decide "
                "it, add samples to this job (its report's to-decide line sizes it alone), or judge each job alone "
                "with sweep.correction=none when the jobs are separate questions")
    return (f"{was} alone, {row['sweep_verdict'].upper()} in the sweep: its GO claim does not survive "
            f"{method_name(go_correction)} across the sweep's {sizes['noninferiority']} GO claims{figures}, asked "
            "for by sweep.go_correction (a sweep that picks among alternatives); to decide it, add samples to this "
            "job, or set sweep.go_correction=none when the claim is that every job is GO (an intersection-union "
            "test, valid without correction)")


def method_name(method: str) -> str:
    """A correction as prose names it."""
    return {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no correction"}.get(method, method)
