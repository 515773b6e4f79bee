"""How a decision reads: the deciding rule's figures, the record written to report.json, the MLflow metrics and
the report block.

Every table shows one number per column, and all of a row's numbers come from the rule that decided, on the
samples it used (:func:`figures`): a paired test on 20 of an entry's 40 samples shows the reference's mean on
those 20, the new run's mean on them and their difference, never the entry's value beside the paired delta.
What other rules computed keeps its own name (``unpaired_threshold``, ``entry_reference``, ``run_score``). The
report leads with the verdict block; the blocks of the tests it rests on follow, the ones that did not decide
labelled so."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from runner.stats.data.verdicts import GO, INCONCLUSIVE, NO_GO, combine, decisive
from runner.stats.numerics import ztest

# a decision is a runner.stats.decision.Decision, typed Any here: that module imports this one
Decision = Any

RULES = ("explicit_threshold", "exact", "paired", "unpaired")
STATISTICAL_RULES = ("paired", "unpaired")
THRESHOLD_RULES = ("explicit_threshold", "exact", "unpaired")  # rules that compare the score with a line
CLUSTER_KEYS = ("cluster_key", "clusters", "clustered_n", "design_effect", "design_effect_estimated", "cluster_df", "clusters_carrying")
RULE = "=" * 64


@dataclass(frozen=True)
class Figures:
    """The deciding rule's figures, on the samples it used: what each table's columns show.

    ``claim``: the claim whose bound and p-value are shown: the one the verdict rests on (GO or NO-GO), for
    INCONCLUSIVE the nearer one (the smaller p-value); None for a deterministic rule or a look without
    information. ``bound`` is that claim's one-sided bound for new - reference and ``line`` what it must pass
    (-tolerance for GO, -margin for NO-GO; mirrored when lower is better). ``threshold``: the line of a rule
    that compares the score itself (an explicit threshold, the exact rule, TensorRT-LLM's unpaired test)."""

    rule: str
    n: int
    reference: float
    score: float
    difference: float
    claim: str | None
    bound: float | None
    line: float | None
    threshold: float | None
    room: float | None
    p_value: float | None


def claim_gate(claim: str | None) -> str:
    """The family of a shown claim's p-value in a sweep's correction (:func:`Decision.tests`): GO's is the
    non-inferiority test's, the others' the regression test's."""
    return "noninferiority" if claim == GO else "regression"


def figures(d: Decision) -> Figures:
    v, hib = d.verdict, d.verdict.params.higher_is_better
    if d.rule == "paired" and d.paired is not None:
        n, reference, score = d.paired.n, d.paired.reference_mean, d.paired.new_mean
    else:
        n, reference, score = v.params.num_samples, v.reference, v.score
    claim = bound = line = None
    p = d.p_value
    bounds = d.bounds
    if d.claims is not None and bounds is not None:
        shown = combine(d.claims.regression, d.claims.within, d.gate)
        if shown == INCONCLUSIVE:
            p_reg, p_in = _or_one(d.p_value), _or_one(d.p_within)
            shown = GO if p_in < p_reg else NO_GO
        claim = shown
        tol = d.tolerance.points if d.tolerance is not None else 0.0
        if claim == GO:
            bound, line, p = bounds[0], -tol if hib else tol, d.p_within
        else:
            bound, line = bounds[1], -d.margin if hib else d.margin
    threshold_rule = d.rule in THRESHOLD_RULES
    return Figures(d.rule, n, reference, score, d.difference, claim, bound, line,
                   v.threshold if threshold_rule else None, v.room if threshold_rule else None, p)


def _or_one(p: float | None) -> float:
    return 1.0 if p is None or not math.isfinite(p) else p


def others(d: Decision) -> dict[str, Any]:
    """Figures of what did not decide, under their own names: the entry's value and the whole run's score (where
    the rule used fewer samples), TensorRT-LLM's unpaired test when another rule decided."""
    v = d.verdict
    out: dict[str, Any] = {"entry_reference": v.reference, "run_score": v.score, "run_n": v.params.num_samples}
    if d.rule not in THRESHOLD_RULES:
        out |= {"unpaired_threshold": v.threshold, "unpaired_room": v.room, "unpaired_p_value": v.p_value}
    return out


def hypothesis(d: Decision) -> str:
    """The claims tested, in words, in the metric's own direction."""
    v = d.verdict
    if d.rule == "explicit_threshold":
        return f"score {'>=' if v.params.higher_is_better else '<='} the registered threshold {v.threshold:g}"
    if d.rule == "exact":
        return f"score {'>=' if v.params.higher_is_better else '<='} the reference {v.reference:g} (exact rule)"
    worse = "drop" if v.params.higher_is_better else "increase"
    a_worse = "a drop" if v.params.higher_is_better else "an increase"
    tol = d.tolerance.points if d.tolerance else 0.0
    return (f"NO-GO when {a_worse} > {d.margin:g} is shown (H0: {worse} <= {d.margin:g}); "
            f"GO when {a_worse} < {tol:.4g} is shown (H0: {worse} >= {tol:.4g}); each at alpha {d.alpha:g}")


def bounds_text(d: Decision) -> str:
    """Both bounds in words, each with the threshold it must pass and the digits that decide."""
    go, no_go = d.bounds
    hib = d.verdict.params.higher_is_better
    tol = d.tolerance.points if d.tolerance is not None else 0.0
    # new - reference: GO needs the GO bound past -t (an increase: below +t), NO-GO the other bound past -m
    go_b, go_t = decisive(go, -tol if hib else tol, d.claims.within, above=hib)
    ng_b, ng_t = decisive(no_go, -d.margin if hib else d.margin, d.claims.regression, above=not hib)
    gt, lt = (">", "<") if hib else ("<", ">")
    return (f"one-sided {1 - d.alpha:.0%} bounds: GO bound {go_b} (GO iff {gt} {go_t}), "
            f"NO-GO bound {ng_b} (NO-GO iff {lt} {ng_t}); together a {1 - 2 * d.alpha:.0%} interval "
            f"({d.ci_method})")


def to_dict(d: Decision) -> dict[str, Any]:
    """The record written to report.json and read by the sweep summary: ``reference``, ``score``,
    ``difference``, ``n``, ``bound``, ``threshold`` and ``p_value`` are the deciding rule's (:func:`figures`)."""
    ci, f = d.ci, figures(d)
    v = d.verdict
    return {
        "verdict": d.outcome, "reported": d.reported, "exit_status": d.exit_status,
        "both_shown": d.both_shown, "verdicts": d.mode, "on_inconclusive": d.on_inconclusive,
        "stats_gate": d.gate,
        "rule": d.rule, "test": d.test, "hypothesis": hypothesis(d),
        "margin": d.margin, "tolerance": d.tolerance.points if d.tolerance else None,
        "noise_floor": d.noise_floor, "stated_margin": d.stated_margin, "within_noise": d.within_noise,
        "tolerance_source": d.tolerance.source if d.tolerance else None,
        "regression_shown": not d.all_passed, "within_tolerance_shown": bool(d.claims and d.claims.within),
        "passed": d.all_passed, "accuracy_passed": d.passed,
        "n": f.n, "score": f.score, "reference": f.reference, "difference": f.difference,
        "claim": f.claim, "bound": f.bound, "bound_line": f.line, "threshold": f.threshold, "room": f.room,
        "p_value": f.p_value, "p_regression": d.p_value, "p_within": d.p_within, "theta": d.theta,
        "alpha": d.alpha, "beta": v.params.beta, "sigma": v.params.sigma,
        "ci_low": ci[0] if ci else None, "ci_high": ci[1] if ci else None,
        "ci_level": 1 - 2 * d.alpha, "ci_method": d.ci_method,
        "go_bound": d.bounds[0] if ci else None, "no_go_bound": d.bounds[1] if ci else None,
        "bound_level": 1 - d.alpha,
        **others(d),
        "advice": d.advice.to_dict() if d.advice is not None else None,
        "tests": d.tests(),
        "sequential": d.sequential.to_dict() if d.sequential is not None else None,
        "stats_cluster": d.cluster_mode,
        "randomness": d.randomness,
    } | (d.clustering.to_dict() if d.clustering is not None else dict.fromkeys(CLUSTER_KEYS))


def metrics(d: Decision) -> dict[str, float]:
    """MLflow metrics: the same figures as the report (undefined ones are left out). ``score``, ``reference``,
    ``delta``, ``n``, ``bound``, ``threshold`` and ``p_value`` are the deciding rule's, as in every table."""
    r = to_dict(d)
    out = {"reference": r["reference"], "score": r["score"], "delta": r["difference"], "n": float(r["n"]),
           "bound": r["bound"], "bound_line": r["bound_line"], "threshold": r["threshold"], "room": r["room"],
           "passed": float(r["passed"]), "accuracy_passed": float(r["accuracy_passed"]),
           "num_samples": float(r["run_n"]), "entry_reference": r["entry_reference"], "run_score": r["run_score"],
           "alpha": r["alpha"], "sigma": r["sigma"], "margin": r["margin"], "tolerance": r["tolerance"],
           "p_value": r["p_value"], "p_regression": r["p_regression"], "p_within": r["p_within"],
           "go_bound": r["go_bound"], "no_go_bound": r["no_go_bound"], "theta": r["theta"],
           "diff_ci_low": r["ci_low"], "diff_ci_high": r["ci_high"],
           "go": float(d.outcome == GO), "no_go": float(d.outcome == NO_GO),
           "inconclusive": float(d.outcome == INCONCLUSIVE),
           "unpaired_p_value": d.verdict.p_value, "unpaired_passed": float(d.verdict.passed),
           "unpaired_threshold": r.get("unpaired_threshold"), "unpaired_room": r.get("unpaired_room")}
    if d.advice is not None and d.advice.n_more is not None:
        out |= {"more_samples": float(d.advice.n_more), "samples_to_decide": float(d.advice.n_total)}
        if d.advice.discordant is not None:
            out["discordant_to_decide"] = float(d.advice.discordant)
    if d.clustering is not None:
        out |= {"clusters": float(d.clustering.clusters), "design_effect": d.clustering.applied}
    if d.paired is not None:
        p = d.paired.to_dict()
        out |= {"paired_p_value": p["p_value"], "paired_n": float(p["n"]), "paired_mean_diff": p["mean_diff"]}
        out |= {f"paired_{k}": float(p[k]) for k in ("theta_paired", "discordant_b", "discordant_c") if p[k] is not None}
    for g in d.gates:
        out |= g.metrics()
    if d.sequential is not None:
        out |= d.sequential.metrics()
    return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(float(v))}


def verdict_line(d: Decision) -> str:
    """The verdict in words: what was shown, or what was not."""
    worse = "drop" if d.verdict.params.higher_is_better else "increase"
    a_worse = "a drop" if d.verdict.params.higher_is_better else "an increase"
    tol = d.tolerance.points if d.tolerance else 0.0
    failed = [g.metric for g in d.gates if not g.passed]
    out = d.outcome
    if failed:
        why = f"failed gate: {', '.join(failed)}{'' if d.passed else ' and accuracy'}"
    elif d.within_noise:
        why = (f"within the measured noise: {a_worse} > {d.stated_margin or 0:g} is shown, but not one > the "
               f"reference's A/A floor {d.margin:.4g}")
    elif d.indicators is not None and d.indicators.blocks:  # the truncation- and error-aware verdict
        why = d.indicators.headline()
    elif d.claims is None:
        why = (("the deterministic rule " + ("holds" if d.passed else "fails"))
               if d.rule not in STATISTICAL_RULES else d.no_interval)
    elif d.both_shown:
        why = (f"worse, but within tolerance: {a_worse} > {d.margin:g} and < {tol:.4g} are both shown; "
               f"stats.gate={d.gate} decides")
    elif out == NO_GO:
        why = f"{a_worse} larger than {d.margin:g} is shown"
    elif out == GO:
        why = f"the {worse} is shown to be smaller than the tolerance {tol:.4g}"
    else:
        why = f"neither {a_worse} > {d.margin:g} nor one < {tol:.4g} is shown"
    line = f"{out} ({why})"
    if d.mode == "two_way":
        line = f"{d.reported} (two-way rule, as TensorRT-LLM's; three-way: {line})"
    elif out == INCONCLUSIVE and d.on_inconclusive != "inconclusive":
        line += f"; stats.on_inconclusive={d.on_inconclusive}"
    return line


def compared(d: Decision) -> str:
    """What the rule compared: both figures on the samples it used, and the entry's value where it differs."""
    f, v = figures(d), d.verdict
    used = "paired samples" if f.rule == "paired" else "samples"
    line = f"new {f.score:.3f} vs reference {f.reference:.3f} on the {f.n} {used} the {f.rule.replace('_', ' ')} rule used"
    if f.rule == "paired" and (f.n != v.params.num_samples or f"{f.reference:.3f}" != f"{v.reference:.3f}"):
        line += (f" (the reference entry's value {v.reference:.3f} and this run's {v.score:.3f} on its "
                 f"{v.params.num_samples} are not what it compares)")
    return line


def render(d: Decision) -> str:
    """The verdict block first, then the blocks of the tests it rests on; a test that did not decide says so."""
    ci = d.ci
    lines = [f"decided by:  {d.test} ({d.rule.replace('_', ' ')} rule)", f"hypothesis:  {hypothesis(d)}"]
    if d.tolerance is not None and d.claims is not None:
        lines.append(f"tolerance:   {d.tolerance.describe()}")
    lines.append(f"compared:    {compared(d)}")
    p = d.p_value
    lines.append(f"p-value:     {'n/a (deterministic rule)' if p is None else f'{p:.4g}'}"
                 + ("" if d.p_within is None else f" (regression); {d.p_within:.4g} (within tolerance)"))
    if ci is not None:
        lines.append(f"difference:  {d.difference:+.3f} (new - reference); {bounds_text(d)}")
    else:
        lines.append(f"difference:  {d.difference:+.3f} (new - reference); no interval ({d.no_interval})")
    if d.clustering is not None:
        lines.append(f"clusters:    {d.clustering.describe()}")
    if d.randomness is not None:
        lines.append(f"randomness:  {d.randomness}")
    lines.append(f"verdict:     {verdict_line(d)}")
    if d.advice is not None:
        lines.append(f"to decide:   {d.advice.text()}")
    lines.append(RULE)
    parts = ["\n".join(lines)]
    if d.paired is not None:
        parts.append(d.paired.render())
    if d.rule in THRESHOLD_RULES:
        parts.append(ztest.render(d.verdict))
    if d.sequential is not None:
        parts.append(d.sequential.render())
    parts += [g.render() for g in d.gates]
    if d.rule not in THRESHOLD_RULES:
        parts.append(ztest.render(d.verdict, f"TensorRT-LLM unpaired test (not deciding: the {d.rule} test decided)"))
    return "\n".join(parts)
