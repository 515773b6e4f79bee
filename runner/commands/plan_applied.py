"""``python -m runner.plan OVERRIDES`` (or ``--task T --model M``): the sample size and test a job would be judged
with, and under ``--design paired --agreement A`` / ``--savings`` the paired test's figures at the job's own n, alpha
and beta.

The n is the matched entry's (an entry fixes it), the one the overrides set, or the task's default when no entry
matches yet: then the plan is printed all the same (a baseline is recorded at that n) and the lookup's error follows
on stderr, exit status 1. The paired figures are McNemar's on a 0/100 metric: an entry whose per-sample scores are
not 0/100 refuses them, an entry without per-sample scores is judged unpaired by a run, and the plan says so.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from runner.commands.plan_job import PlannedJob, planned_job, task_defaults
from runner.commands.plan_paired import (DEFAULT_TARGET, EXIT_USAGE, MODEL_TEXT, deff_key, infeasible_note,
                                         print_savings, savings)
from runner.contract.errors import EXIT_ERROR, ReferenceError_, UserError
from runner.contract.spec import AccuracySpec
from runner.references.noise import replicates_of
from runner.references.samples import load_rows
from runner.references.store import default_reference_dir, lookup
from runner.stats.numerics.cluster_variance import effective_sigma
from runner.stats.planning.fidelity import aa_pick_rate, samples_for
from runner.stats.planning.paired import PLANNING_AGREEMENTS, paired_feasible, paired_min_samples, paired_theta
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics.ztest import compute_threshold, min_samples_for_theta, theta_of



def available_tasks() -> list[str]:
    """Task config names shipped in conf/task."""
    import conf  # lazy: the config package is found when a task is named

    return sorted(p.stem for p in (Path(conf.__file__).parent / "task").glob("*.yaml"))


def planned(args: argparse.Namespace) -> PlannedJob | int:
    """The job the command line names (overrides, or ``--task``/``--model`` and spec flags), or a usage status."""
    if args.overrides:
        return planned_job(args.overrides, missing_ok=True)
    tasks = available_tasks()
    if args.task not in tasks:
        print(f"error: unknown task '{args.task}'\n  allowed: {', '.join(tasks)} (the files in conf/task)",
              file=sys.stderr)
        return EXIT_USAGE
    metric, defaults = task_defaults(args.task)
    spec = AccuracySpec(dtype=args.dtype, quant_algo=args.quant_algo, kv_cache_quant_algo=args.kv_cache_quant_algo,
                        spec_dec_algo=args.spec_dec_algo, extra_acc_spec=args.extra_acc_spec)
    ref_dir = args.references if args.references is not None else default_reference_dir()
    try:
        ref = lookup(ref_dir, args.task, metric, args.model, spec, defaults)
    except ReferenceError_ as err:
        return PlannedJob(args.task, args.model, metric, None, spec, "", defaults, err)
    return PlannedJob(args.task, args.model, metric, ref, spec, "")


def binary_scores(job: PlannedJob) -> bool | None:
    """Whether the matched entry's per-sample scores are all 0 or 100 (McNemar's test pairs them); None when the
    entry keeps none (or none matched)."""
    recorded = (job.reference.recorded if job.reference is not None else None) or {}
    if not recorded.get("samples"):
        return None
    assert job.reference is not None
    rows = load_rows(job.reference.path.parent, str(recorded["samples"]), recorded.get("samples_sha256"))
    return all(r.score in (0.0, 100.0) for r in rows.values())


def check_binary(job: PlannedJob) -> bool | None:
    """Refuses McNemar's figures for a metric that is not 0/100 per sample (lower is better, or an entry's
    per-sample scores say so); True when the entry's scores are 0/100, None when nothing tells."""
    binary = False if not job.test.higher_is_better else binary_scores(job)
    if binary is False:
        raise UserError("the paired plan (--design paired, --savings) is McNemar's test on a 0/100 metric; "
                        f"{job.metric} is not scored 0 or 100 per sample",
                        where=str(job.reference.path) if job.reference else f"task={job.task}",
                        given=f"task={job.task} ({job.metric}, "
                        f"{'higher' if job.test.higher_is_better else 'lower'} is better)",
                        allowed="a task scored right or wrong per sample (an accuracy)",
                        fix="leave out --design, --agreement and --savings: the same command without them plans this "
                        "metric (a run pairs it by a t, betting or bootstrap test, not planned here)")
    return binary


def paired_figures(args: argparse.Namespace, job: PlannedJob, p: HypothesisParams,
                   binary: bool | None) -> dict[str, Any]:
    """McNemar's theta at the job's n (and the n for ``--target-theta``), with what a run of the job would pair."""
    agreement, model, deff = args.agreement, args.regression_model, args.design_effect
    theta = paired_theta(p.num_samples, agreement, p.alpha, p.beta, model=model, design_effect=deff)
    out: dict[str, Any] = {"agreement": agreement, "regression_model": model, "paired_theta": theta,
                           "paired_feasible": paired_feasible(theta, agreement, model)}
    if args.target_theta is not None:
        out["paired_min_num_samples"] = paired_min_samples(args.target_theta, agreement, p.alpha, p.beta, model=model,
                                                           design_effect=deff)
        out["paired_target_feasible"] = paired_feasible(args.target_theta, agreement, model)
    if job.method == "unpaired":
        out["paired_by_run"] = "no: stats.method=unpaired"
    elif job.reference is None:
        out["paired_by_run"] = "once a reference is recorded with its per-sample scores (reference.mode=record)"
    elif binary is None:
        out["paired_by_run"] = ("no: the entry keeps no per-sample scores, so a run decides by the unpaired test; "
                                "record the reference with this runner (reference.mode=record) to pair")
    else:
        out["paired_by_run"] = "yes: the entry keeps per-sample 0/100 scores"
    return out


def aa_figures(job: PlannedJob, p: HypothesisParams, target: float | None) -> dict[str, Any] | None:
    """What the entry's A/A replicate plans (None: no replicate): the agreement two runs of the reference's model
    keep (the pick-change rate's one-sided 95% upper bound) and McNemar's samples for a drop of ``target`` (else the
    job's theta) at it; a teacher-forced entry's token figures."""
    reps = replicates_of(job.reference) if job.reference is not None else []
    if not reps:
        return None
    out: dict[str, Any] = {}
    rate = aa_pick_rate(reps)
    if rate is not None:
        theta = target if target is not None else theta_of(p)
        out |= {"pick_change_rate": rate[0], "pick_change_upper": rate[1], "agreement": 1 - rate[1],
                "theta": theta, "paired_min_num_samples": samples_for(theta, 1 - rate[1], p.alpha, p.beta)}
    tokens = [f"{r.perturbation}: {r.tokens.short()}" for r in reps if r.tokens is not None]
    if tokens:
        out["tokens"] = tokens
    return out or None


def applied(args: argparse.Namespace) -> int:
    """Print the plan of the job the command line names; 1 when no reference entry matches it yet."""
    job = planned(args)
    if isinstance(job, int):
        return job
    ref, p = job.reference, job.test
    if args.design_effect != 1:
        p = HypothesisParams(p.alpha, p.beta, effective_sigma(p.sigma, args.design_effect), p.num_samples,
                             p.higher_is_better)
    explicit = ref is not None and ref.threshold is not None
    threshold = None
    if ref is not None:
        threshold = ref.threshold if explicit else compute_threshold(ref.value, p.num_samples, p.sigma, p.alpha,
                                                                     p.higher_is_better)
    out: dict[str, Any] = {
        "reference": None if ref is None else ref.value, "num_samples": p.num_samples, "alpha": p.alpha,
        "beta": p.beta, "sigma": p.sigma, "theta": theta_of(p), "threshold": threshold,
        "higher_is_better": p.higher_is_better, "explicit_threshold": explicit, "metric": job.metric,
        "calibration": job.calibration,
    } | deff_key(args.design_effect)
    if args.target_theta is not None:
        out["target_theta"] = args.target_theta
        out["min_num_samples"] = min_samples_for_theta(args.target_theta, p.sigma, p.alpha, p.beta)
    binary = check_binary(job) if args.design == "paired" or args.savings else None
    if args.design == "paired":
        out["paired"] = paired_figures(args, job, p, binary)
    if args.savings:
        out["savings"] = savings(args.target_theta if args.target_theta is not None else DEFAULT_TARGET,
                                 job.test.sigma, p.alpha, p.beta,
                                 (args.agreement,) if args.agreement is not None else PLANNING_AGREEMENTS,
                                 args.regression_model, args.design_effect)
    aa = aa_figures(job, p, args.target_theta)
    if aa is not None:
        out["aa"] = aa
    if job.missing is not None:
        out["missing_reference"] = job.missing.what
    if args.json:
        print(json.dumps(out))
    else:
        _print(args, job, p, out)
    if job.missing is not None:
        print(job.missing.render(), file=sys.stderr)
        return EXIT_ERROR
    return 0


def _print(args: argparse.Namespace, job: PlannedJob, p: HypothesisParams, out: dict[str, Any]) -> None:
    ref = job.reference
    direction = "higher is better" if p.higher_is_better else "lower is better"
    print(f"task         {job.task} ({job.metric}, {direction})")
    print(f"model        {job.model}")
    print(f"spec         {job.spec.describe()}")
    if job.dataset:
        print(f"dataset      {job.dataset}")
    if ref is None:
        print("reference    none registered yet (see the error below): the n, alpha, beta and sigma are the task's")
    else:
        print(f"reference    {ref.value:.3f}   ({ref.path}, entry {ref.index})")
        if ref.note:
            print(f"note         {ref.note}")
    print(f"num_samples  {p.num_samples}")
    print(f"alpha        {p.alpha:g}")
    print(f"beta         {p.beta:g}")
    print(f"sigma        {p.sigma:g}" + ("" if args.design_effect == 1 else
                                          f"   (sigma x sqrt(design effect {args.design_effect:g}))"))
    print(f"theta        {theta_of(p):.3f}   (smallest drop detected with probability {1 - p.beta:.0%})")
    if job.calibration:
        print(f"calibration  {job.calibration}")
    if ref is None:
        print("threshold    - (reference + z(alpha) * sqrt(2 sigma^2 / n), once a reference is recorded)")
    else:
        how = ("explicit, from the reference entry" if out["explicit_threshold"]
               else "reference + z(alpha) * sqrt(2 sigma^2 / n)")
        print(f"threshold    {out['threshold']:.3f}   ({how})")
    aa = out.get("aa") or {}
    if "pick_change_rate" in aa:
        n = aa["paired_min_num_samples"]
        print(f"A/A          answers change at {aa['pick_change_rate']:.3f} (95% upper {aa['pick_change_upper']:.3f}) "
              "between two runs of the reference's model (its replicate): "
              + (f"at agreement {aa['agreement']:.3f} McNemar's test needs about {n} samples to catch a drop of "
                 f"{aa['theta']:.4g} points" if n else f"a drop of {aa['theta']:.4g} points does not fit agreement "
                                                       f"{aa['agreement']:.3f}"))
    for line in aa.get("tokens", []):
        print(f"A/A          {line}")
    paired = out.get("paired")
    if paired is not None:
        mark = "" if paired["paired_feasible"] else (
            f"; larger than the {100 * (1 - args.agreement):g} points of disagreement the agreement allows")
        print(f"paired theta {paired['paired_theta']:.3f}   (McNemar's exact test on the same samples, agreement "
              f"{args.agreement:g}{mark})")
        print(f"             {MODEL_TEXT[args.regression_model]}")
        print(f"paired run   {paired['paired_by_run']}")
    if args.target_theta is not None:
        if paired is not None:
            print(f"smallest n with theta <= {args.target_theta:g}: {out['min_num_samples']} unpaired, "
                  f"{paired['paired_min_num_samples']} paired at agreement {args.agreement:g}")
            if not paired["paired_target_feasible"]:
                print(infeasible_note(args.target_theta, args.agreement, p.alpha, p.beta, args.regression_model))
        else:
            print(f"smallest n with theta <= {args.target_theta:g}: {out['min_num_samples']}")
    if "savings" in out:
        print()
        print_savings(out["savings"])
