"""``python -m runner.plan``: how many samples a test needs, and what the runner would apply.

Two questions, answered without loading a model:

* ``--sigma S --alpha A --beta B --num-samples-total N``: the sample-volume table of
  TensorRT-LLM's ``compute_theta_and_thresholds.py`` (theta and threshold - reference for
  n = 32, 64, ... and the total), to choose n when adding a task.
* ``--task T --model M [spec flags]``: the reference, n, alpha, beta, sigma, theta and threshold
  a run of that model and spec would be judged with (task defaults from the Hydra config,
  then the reference entry's overrides).
* ``OVERRIDES`` (``task=perplexity quant=w4a16 reference.against=baseline``, as for ``python -m runner``): the
  same for the job those overrides compose (:mod:`runner.commands.plan_applied`); with no entry yet, the task's n.
* ``--design paired --agreement A``: the paired theta (McNemar's exact test on a 0/100 metric, when both runs
  answer the same samples and agree on a fraction A of them) next to the unpaired one, and with
  ``--target-theta`` the paired n next to the unpaired n; in the table, or at a job's own n, alpha and beta.
* ``--savings``: samples needed for a target theta (default 3 points), unpaired versus paired at
  agreement 0.90, 0.95 and 0.98 (or ``--agreement A``); a job's alpha, beta and sigma with overrides.
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

from runner.commands.plan_paired import (DEFAULT_TARGET, EXIT_USAGE, MODEL_TEXT, deff_key, deff_text, infeasible_note,
                                         print_savings, savings)
from runner.contract.errors import EXIT_ERROR, UserError
from runner.stats.planning import sequential as plan_sequential
from runner.stats.numerics.cluster_variance import effective_sigma
from runner.stats.planning.paired import PLANNING_AGREEMENTS, paired_feasible, paired_min_samples, paired_theta
from runner.stats.data.hypothesis import check_params
from runner.stats.numerics.ztest import min_samples_for_theta, plan_rows


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
            "  python -m runner.plan model.path=DIR task=perplexity quant=w4a16 reference.against=baseline\n"
            "  python -m runner.plan task=mmlu_0shot quant=w4a16 --design paired --agreement 0.9 --target-theta 5\n"
            "  python -m runner.plan --task mmlu --model meta-llama/Llama-3.1-8B-Instruct --quant-algo FP8\n"
            "exit status: 0 ok, 1 no matching reference (the task's n is printed all the same) or a bad config, "
            "2 bad command line"
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
                     help="plan K looks: boundaries, maximum and expected n for both designs (runner/stats/planning/sequential.py)")
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
    out: dict[str, object] = {"rows": [vars(r) for r in rows]} | deff_key(deff)
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
    print(f"sigma={vals['sigma']:g} alpha={vals['alpha']:g} beta={vals['beta']:g} (higher is better)" + deff_text(deff))
    if paired:
        print(f"paired: McNemar's exact test on the same samples of a 0/100 metric, agreement {agreement:g}; "
              + MODEL_TEXT[model])
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
                print(infeasible_note(args.target_theta, agreement, vals["alpha"], vals["beta"], model))
        else:
            print(f"smallest n with theta <= {args.target_theta:g}: {out['min_num_samples']}")
    return 0


def _savings(args: argparse.Namespace) -> int:
    """Samples needed for a target theta: unpaired versus paired at several agreement rates."""
    sigma, alpha, beta = (
        getattr(args, k) if getattr(args, k) is not None else TABLE_DEFAULTS[k] for k in ("sigma", "alpha", "beta")
    )
    check_params(alpha, beta, sigma, 1, where="command line")
    out = savings(args.target_theta if args.target_theta is not None else DEFAULT_TARGET, sigma, alpha, beta,
                  (args.agreement,) if args.agreement is not None else PLANNING_AGREEMENTS, args.regression_model,
                  args.design_effect)
    if args.json:
        print(json.dumps(out))
    else:
        print_savings(out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        parser.error(f"unrecognized arguments: {' '.join(bad)} (overrides are KEY=VALUE, as for python -m runner)")
    if args.overrides and (args.task is not None or args.model is not None):
        parser.error("give either Hydra overrides (task=... model=...) or --task/--model, not both")
    job = bool(args.overrides) or args.task is not None or args.model is not None
    if job:
        if not args.overrides and (args.task is None or args.model is None):
            parser.error("--task and --model go together")
        given = [f"--{k.replace('_', '-')}" for k in TABLE_DEFAULTS if getattr(args, k) is not None]
        if given:
            parser.error(f"{', '.join(given)} only apply to the table; a job's values come from its config "
                         "(override them as task.sigma=, task.alpha=, task.beta=, task.num_samples=)")
        if args.sequential is not None:
            parser.error("--sequential plans from --sigma, --alpha and --beta; not with overrides or --task")
    if not (math.isfinite(args.design_effect) and args.design_effect >= 1):
        parser.error(f"--design-effect must be a number >= 1 (1: independent samples), got {args.design_effect:g}")
    if args.sequential is not None and args.design_effect != 1:
        parser.error("--design-effect does not apply to --sequential plans")
    if args.target_theta is not None and not args.target_theta > 0:
        parser.error("--target-theta must be > 0")
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
        if job:
            from runner.commands.plan_applied import applied  # lazy: --help stays cheap

            return applied(args)
        return _savings(args) if args.savings else _table(args)
    except UserError as err:
        print(err.render(), file=sys.stderr)
        # A bad number on the command line is a usage error; anything found in config or files is not.
        return EXIT_ERROR if job else EXIT_USAGE

