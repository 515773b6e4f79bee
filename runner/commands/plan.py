"""``python -m runner.plan``: how many samples a test needs, and what the runner would apply.

Two questions, answered without loading a model:

* ``--sigma S --alpha A --beta B --num-samples-total N``: the sample-volume table of
  TensorRT-LLM's ``compute_theta_and_thresholds.py`` (theta and threshold - reference for
  n = 32, 64, ... and the total), to choose n when adding a task.
* ``--task T --model M [spec flags]``: the reference, n, alpha, beta, sigma, theta and threshold
  a run of that model and spec would be judged with (task defaults from the Hydra config,
  then the reference entry's overrides).
* ``--design paired --agreement A`` (table mode): the paired theta (McNemar's exact test on a
  0/100 metric, when both runs answer the same samples and agree on a fraction A of them) next
  to the unpaired one, and with ``--target-theta`` the paired n next to the unpaired n.
* ``--savings``: samples needed for a target theta (default 3 points), unpaired versus paired at
  agreement 0.90, 0.95 and 0.98 (or ``--agreement A``).
* ``--design-effect D`` (any mode but ``--sequential``): clustered questions (a task's ``cluster_key``,
  ``stats.cluster=auto``): sigma becomes ``sigma sqrt(D)``, so theta and the threshold offset grow by
  ``sqrt(D)`` and the samples needed by ``D``; the paired theta is that of ``n / D`` samples.

Imports stay light (Hydra only in the second mode) so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


from runner.contract.errors import EXIT_ERROR, UserError, ConfigError
from runner.contract.spec import AccuracySpec
from runner.stats.sequential import plan as plan_sequential
from runner.stats.clustered.variance import effective_sigma
from runner.stats.planning import PLANNING_AGREEMENTS, paired_feasible, paired_min_samples, paired_theta
from runner.stats.unpaired.ztest import check_params, compute_threshold, min_samples_for_theta, plan_rows, HypothesisParams

EXIT_USAGE = 2
"""Bad command line (argparse's own status)."""

# The planning script's defaults upstream (MMLU-like: Bernoulli scores, 8192 rows).
TABLE_DEFAULTS = {"sigma": 50.0, "alpha": 0.05, "beta": 0.2, "num_samples_total": 8192}


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m runner.plan",
        description="Plan sample volumes and show the statistical test the runner would apply.",
        epilog=(
            "examples:\n"
            "  python -m runner.plan --sigma 50 --alpha 0.05 --beta 0.2 --num-samples-total 14042\n"
            "  python -m runner.plan --sigma 50 --num-samples-total 14042 --target-theta 3\n"
            "  python -m runner.plan --num-samples-total 4096 --design paired --agreement 0.95 --target-theta 3\n"
            "  python -m runner.plan --savings\n"
            "  python -m runner.plan --sigma 50 --num-samples-total 4096 --target-theta 3 --design-effect 1.8\n"
            "  python -m runner.plan task=mmlu model=llama31_8b quant=fp8_kv\n"
            "  python -m runner.plan --task mmlu --model meta-llama/Llama-3.1-8B-Instruct --quant-algo FP8\n"
            "exit status: 0 ok, 1 no matching reference, 2 bad command line"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    table = p.add_argument_group("sample-volume table (default mode)")
    table.add_argument("--sigma", type=float, help=f"per-sample standard deviation (default {TABLE_DEFAULTS['sigma']:g})")
    table.add_argument("--alpha", type=float, help=f"type I error rate (default {TABLE_DEFAULTS['alpha']:g})")
    table.add_argument("--beta", type=float, help=f"type II error rate (default {TABLE_DEFAULTS['beta']:g})")
    table.add_argument(
        "--num-samples-total",
        type=_positive_int,
        help=f"dataset size; the table stops there (default {TABLE_DEFAULTS['num_samples_total']})",
    )
    table.add_argument(
        "--design",
        choices=("unpaired", "paired"),
        help="unpaired (default): TensorRT-LLM's test; paired: also McNemar's test on the same samples (0/100 metric)",
    )
    table.add_argument(
        "--agreement",
        type=float,
        help="paired: fraction of samples the reference and new run score the same (required with --design paired)",
    )
    table.add_argument(
        "--regression-model",
        choices=("added", "split"),
        default="added",
        help="paired: how a regression changes the answers. added (default): --agreement is measured between two "
        "healthy runs and the regression's flips come on top; split: the agreement holds under the regression",
    )
    table.add_argument(
        "--savings",
        action="store_true",
        help="samples needed for --target-theta (default 3): unpaired vs paired at agreement "
        + ", ".join(f"{a:.2f}" for a in PLANNING_AGREEMENTS),
    )
    p.add_argument("--design-effect", type=float, default=1.0, metavar="D",
                   help="clustered questions: variance of the mean D times the independent one (a report's design "
                   "effect); sigma becomes sigma sqrt(D), samples needed grow by D (default 1: independent)")
    task = p.add_argument_group("applied test for a task, model and spec")
    task.add_argument("--task", help="a task config name under conf/task (e.g. mmlu)")
    task.add_argument("--model", help="Hugging Face model id, the reference key")
    task.add_argument("--dtype", default="auto")
    task.add_argument("--quant-algo")
    task.add_argument("--kv-cache-quant-algo")
    task.add_argument("--spec-dec-algo")
    task.add_argument("--extra-acc-spec")
    task.add_argument("--references", type=Path, help="reference directory (default: the project's references/)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="Hydra overrides exactly as for python -m runner (task=mmlu model=llama31_8b quant=fp8_kv): "
                   "the reference entry and test the runner would use for that job")
    p.add_argument("--target-theta", type=float, help="also print the smallest n whose theta is at most this")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    seq = p.add_argument_group("group-sequential gate (stats.sequential)")
    seq.add_argument("--sequential", type=_positive_int, metavar="K",
                     help="plan K looks: boundaries, maximum and expected n for both designs (runner/stats/sequential/plan.py)")
    seq.add_argument("--spending", choices=("obf", "pocock"), default="obf", help="alpha spending (default obf)")
    seq.add_argument("--futility", choices=("obf", "pocock", "none"), default="obf", help="beta spending (default obf)")
    seq.add_argument("--binding", action="store_true", help="binding futility bounds (default non-binding)")
    return p


def _table(args: argparse.Namespace) -> int:
    vals = {k: (getattr(args, k) if getattr(args, k) is not None else d) for k, d in TABLE_DEFAULTS.items()}
    check_params(vals["alpha"], vals["beta"], vals["sigma"], vals["num_samples_total"], where="command line")
    deff = args.design_effect
    sigma = effective_sigma(vals["sigma"], deff)
    rows = plan_rows(sigma, vals["alpha"], vals["beta"], vals["num_samples_total"])
    out: dict[str, object] = {"rows": [vars(r) for r in rows]} | _deff_key(deff)
    if args.target_theta is not None:
        out["target_theta"] = args.target_theta
        out["min_num_samples"] = min_samples_for_theta(args.target_theta, sigma, vals["alpha"], vals["beta"])
    paired = args.design == "paired"
    agreement = args.agreement
    model = args.regression_model
    if paired:
        out["design"] = "paired"
        out["agreement"] = agreement
        out["regression_model"] = model
        for row in out["rows"]:  # type: ignore[union-attr]
            row["paired_theta"] = paired_theta(row["num_samples"], agreement, vals["alpha"], vals["beta"], model=model,
                                               design_effect=deff)
            row["paired_feasible"] = paired_feasible(row["paired_theta"], agreement, model)
        if args.target_theta is not None:
            out["paired_min_num_samples"] = paired_min_samples(args.target_theta, agreement, vals["alpha"], vals["beta"],
                                                               model=model, design_effect=deff)
            out["paired_target_feasible"] = paired_feasible(args.target_theta, agreement, model)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"sigma={vals['sigma']:g} alpha={vals['alpha']:g} beta={vals['beta']:g} (higher is better)" + _deff_text(deff))
    if paired:
        print(f"paired: McNemar's exact test on the same samples of a 0/100 metric, agreement {agreement:g}; "
              + _MODEL_TEXT[model])
        print(f"{'num_samples':>11}  {'theta':>9}  {'threshold-reference':>19}  {'paired-theta':>12}")
        for r, row in zip(rows, out["rows"]):  # type: ignore[arg-type]
            mark = "" if row["paired_feasible"] else "*"
            print(
                f"{r.num_samples:>11d}  {r.theta:>9.4f}  {r.threshold_minus_reference:>19.4f}  "
                f"{row['paired_theta']:>12.4f}{mark}"
            )
        if not all(row["paired_feasible"] for row in out["rows"]):  # type: ignore[union-attr]
            print(
                f"* larger than the {100 * (1 - agreement):g} points of disagreement that agreement {agreement:g} "
                "allows: no drop that large can happen at this agreement, so the paired figure promises nothing there"
            )
    else:
        print(f"{'num_samples':>11}  {'theta':>9}  {'threshold-reference':>19}")
        for r in rows:
            print(f"{r.num_samples:>11d}  {r.theta:>9.4f}  {r.threshold_minus_reference:>19.4f}")
    if args.target_theta is not None:
        if paired:
            print(
                f"smallest n with theta <= {args.target_theta:g}: {out['min_num_samples']} unpaired, "
                f"{out['paired_min_num_samples']} paired at agreement {agreement:g}"
            )
            if not out["paired_target_feasible"]:
                print(_infeasible_note(args.target_theta, agreement, vals["alpha"], vals["beta"], model))
        else:
            print(f"smallest n with theta <= {args.target_theta:g}: {out['min_num_samples']}")
    return 0


_MODEL_TEXT = {
    "added": "regression model 'added': the agreement is measured between two healthy runs and a drop of theta "
             "adds theta% right-to-wrong flips on top (theta from Connor's sample-size equation with discordance "
             "1 - agreement + theta, plus a 1/n continuity term)",
    "split": "regression model 'split': the agreement holds under the regression "
             "(theta = 100 (k sqrt((1 - agreement) / n) + 1 / n), k = |z(alpha)| + |z(beta)|)",
}


def _infeasible_note(target: float, agreement: float, alpha: float, beta: float, model: str) -> str:
    if model != "split":
        return f"note: a {target:g}-point drop does not fit agreement {agreement:g}"
    best = round(1.0 - target / 100.0, 6)
    return (
        f"note: a {target:g}-point drop changes at least {target:g}% of the answers, so the runs cannot agree on "
        f"more than {best:g} of them; at agreement {best:g} the paired n is "
        f"{paired_min_samples(target, best, alpha, beta, model='split')}"
    )


def _deff_key(deff: float) -> dict[str, float]:
    """The JSON key of a design effect, only when one is planned (the independent output stays as it was)."""
    return {} if deff == 1 else {"design_effect": deff}


def _deff_text(deff: float) -> str:
    return "" if deff == 1 else (f"; design effect {deff:g}: sigma x sqrt({deff:g}) = x{math.sqrt(deff):.4f}, "
                                 f"samples needed x{deff:g} (clustered questions)")


def _savings(args: argparse.Namespace) -> int:
    """Samples needed for a target theta: unpaired versus paired at several agreement rates."""
    sigma, alpha, beta = (
        getattr(args, k) if getattr(args, k) is not None else TABLE_DEFAULTS[k] for k in ("sigma", "alpha", "beta")
    )
    check_params(alpha, beta, sigma, 1, where="command line")
    target = args.target_theta if args.target_theta is not None else 3.0
    agreements = (args.agreement,) if args.agreement is not None else PLANNING_AGREEMENTS
    deff = args.design_effect
    unpaired_n = min_samples_for_theta(target, effective_sigma(sigma, deff), alpha, beta)
    paired_rows = []
    for a in agreements:
        feasible = paired_feasible(target, a, args.regression_model)
        n = paired_min_samples(target, a, alpha, beta, model=args.regression_model, design_effect=deff) if feasible else None
        paired_rows.append(
            {"agreement": a, "num_samples": n, "feasible": feasible, "ratio": unpaired_n / n if n else None}
        )
    out = {
        "target_theta": target,
        "sigma": sigma,
        "alpha": alpha,
        "beta": beta,
        "unpaired_num_samples": unpaired_n,
        "regression_model": args.regression_model,
        "paired": paired_rows,
    } | _deff_key(deff)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"samples needed to catch a {target:g}-point drop (alpha {alpha:g}, beta {beta:g})" + _deff_text(deff))
    print(f"{'design':<9} {'agreement':>9} {'num_samples':>11} {'vs unpaired':>12}")
    print(f"{'unpaired':<9} {'-':>9} {unpaired_n:>11d} {'1x':>12}")
    for row in paired_rows:
        if row["feasible"]:
            print(f"{'paired':<9} {row['agreement']:>9.2f} {row['num_samples']:>11d} {format(row['ratio'], '.1f') + 'x fewer':>12}")
        else:
            print(f"{'paired':<9} {row['agreement']:>9.2f} {'n/a*':>11}")
    print(f"unpaired: TensorRT-LLM's test, sigma {sigma:g}, runs treated as independent.")
    print("paired: McNemar's exact test on the same samples of a 0/100 metric, where agreement is the fraction of "
          "samples both runs score the same; " + _MODEL_TEXT[args.regression_model] + ".")
    if not all(row["feasible"] for row in paired_rows):
        print("* " + _infeasible_note(target, max(r["agreement"] for r in paired_rows), alpha, beta,
                                      args.regression_model)[len("note: "):])
    return 0


def available_tasks() -> list[str]:
    """Task config names shipped in conf/task."""
    import conf  # lazy: --help stays cheap

    return sorted(p.stem for p in (Path(conf.__file__).parent / "task").glob("*.yaml"))


def _applied(args: argparse.Namespace) -> int:
    from runner.commands.plan_job import planned_job, task_defaults  # lazy: --help stays cheap
    from runner.references.store import default_reference_dir, lookup  # lazy: --help stays cheap

    if args.overrides:
        job = planned_job(args.overrides)
        args.task, args.model = job.task, job.model
        return _print_applied(args, job.reference, job.metric, job.spec, job.dataset)
    tasks = available_tasks()
    if args.task not in tasks:
        print(
            f"error: unknown task '{args.task}'\n  allowed: {', '.join(tasks)} (the files in conf/task)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    metric, defaults = task_defaults(args.task)
    spec = AccuracySpec(
        dtype=args.dtype,
        quant_algo=args.quant_algo,
        kv_cache_quant_algo=args.kv_cache_quant_algo,
        spec_dec_algo=args.spec_dec_algo,
        extra_acc_spec=args.extra_acc_spec,
    )
    ref_dir = args.references if args.references is not None else default_reference_dir()
    ref = lookup(ref_dir, args.task, metric, args.model, spec, defaults)
    return _print_applied(args, ref, metric, spec)


def _print_applied(args: argparse.Namespace, ref: Any, metric: str, spec: AccuracySpec, dataset: str | None = None) -> int:
    p = ref.params
    if args.design_effect != 1:
        p = HypothesisParams(p.alpha, p.beta, effective_sigma(p.sigma, args.design_effect), p.num_samples,
                             p.higher_is_better)
    explicit = ref.threshold is not None
    threshold = ref.threshold if explicit else compute_threshold(ref.value, p.num_samples, p.sigma, p.alpha, p.higher_is_better)
    out = {
        "reference": ref.value,
        "num_samples": p.num_samples,
        "alpha": p.alpha,
        "beta": p.beta,
        "sigma": p.sigma,
        "theta": p.theta,
        "threshold": threshold,
        "higher_is_better": p.higher_is_better,
        "explicit_threshold": explicit,
        "metric": metric,
    } | _deff_key(args.design_effect)
    min_n = None
    if args.target_theta is not None:
        min_n = min_samples_for_theta(args.target_theta, p.sigma, p.alpha, p.beta)
        out["target_theta"] = args.target_theta
        out["min_num_samples"] = min_n
    if args.json:
        print(json.dumps(out))
        return 0
    direction = "higher is better" if p.higher_is_better else "lower is better"
    how = "explicit, from the reference entry" if explicit else "reference + z(alpha) * sqrt(2 sigma^2 / n)"
    print(f"task         {args.task} ({metric}, {direction})")
    print(f"model        {args.model}")
    print(f"spec         {spec.describe()}")
    if dataset:
        print(f"dataset      {dataset}")
    print(f"reference    {ref.value:.3f}   ({ref.path}, entry {ref.index})")
    if ref.note:
        print(f"note         {ref.note}")
    print(f"num_samples  {p.num_samples}")
    print(f"alpha        {p.alpha:g}")
    print(f"beta         {p.beta:g}")
    print(f"sigma        {p.sigma:g}" + ("" if args.design_effect == 1 else
                                          f"   (sigma x sqrt(design effect {args.design_effect:g}))"))
    print(f"theta        {p.theta:.3f}   (smallest drop detected with probability {1 - p.beta:.0%})")
    print(f"threshold    {threshold:.3f}   ({how})")
    if min_n is not None:
        print(f"smallest n with theta <= {args.target_theta:g}: {min_n}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        parser.error(f"unrecognized arguments: {' '.join(bad)} (overrides are KEY=VALUE, as for python -m runner)")
    if args.overrides and (args.task is not None or args.model is not None):
        parser.error("give either Hydra overrides (task=... model=...) or --task/--model, not both")
    if args.overrides:
        given = [f"--{k.replace('_', '-')}" for k in TABLE_DEFAULTS if getattr(args, k) is not None]
        if given or args.design is not None or args.savings:
            parser.error("with overrides the values come from the config; table flags do not apply")
        try:
            return _applied(args)
        except UserError as err:
            print(err.render(), file=sys.stderr)
            return EXIT_ERROR
    if args.task is not None or args.model is not None:
        if args.task is None or args.model is None:
            parser.error("--task and --model go together")
        given = [f"--{k.replace('_', '-')}" for k in TABLE_DEFAULTS if getattr(args, k) is not None]
        if given:
            parser.error(f"{', '.join(given)} only apply to the table; with --task the values come from the config")
    if not (math.isfinite(args.design_effect) and args.design_effect >= 1):
        parser.error(f"--design-effect must be a number >= 1 (1: independent samples), got {args.design_effect:g}")
    if args.sequential is not None and args.design_effect != 1:
        parser.error("--design-effect does not apply to --sequential plans")
    if args.target_theta is not None and not args.target_theta > 0:
        parser.error("--target-theta must be > 0")
    if args.task is not None and (args.design is not None or args.agreement is not None or args.savings):
        parser.error("--design, --agreement and --savings only apply to the table; not with --task")
    if args.agreement is not None and not 0.0 < args.agreement < 1.0:
        parser.error(f"--agreement must be strictly between 0 and 1, got {args.agreement:g}")
    if args.savings and args.design is not None:
        parser.error("--savings compares both designs; leave out --design")
    if args.design == "paired" and args.agreement is None:
        parser.error("--design paired needs --agreement (the fraction of samples both runs score the same)")
    if args.agreement is not None and args.design != "paired" and not args.savings:
        parser.error("--agreement only applies with --design paired or --savings")
    try:
        if args.sequential is not None:
            return plan_sequential.run(args)
        if args.task is not None:
            return _applied(args)
        return _savings(args) if args.savings else _table(args)
    except UserError as err:
        print(err.render(), file=sys.stderr)
        # A bad number on the command line is a usage error; anything found in files is not.
        return EXIT_USAGE if args.task is None else EXIT_ERROR

