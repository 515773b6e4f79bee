"""``python -m runner.compare A B``: is run B (the candidate) worse than run A (the reference)?

A and B are each a job's output directory, an MLflow run id of a job, or an lm-evaluation-harness
``samples_<task>_<date>.jsonl`` file (``lm_eval --log_samples``). The runs are paired on the samples both
answered (same ids, same prompts: the references' checks); the job's own decision then says GO, NO-GO or
INCONCLUSIVE with its interval, the minimum detectable effect and the samples that flipped. The exit status is
a job's: 0 GO, 3 NO-GO, 4 INCONCLUSIVE, 1 for input that cannot be compared. Reports (report.txt, report.json,
junit.xml) go to ``--output-dir``.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from datetime import datetime
from pathlib import Path
from typing import Sequence

from runner.contract.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, UserError
from runner.files.writable import check_output_dir, check_output_file

EPILOG = """exit status: 0 GO, 3 NO-GO, 4 INCONCLUSIVE (0 or 3 with --on-inconclusive pass|fail), 1 error (input that
cannot be compared), 130 stopped by SIGINT (Ctrl-C), 143 stopped by SIGTERM.
examples:
  python -m runner.compare outputs/2026-01-01/10-00-00-ab12cd-base outputs/2026-01-02/10-00-00-ef34ab-int8 --tolerance 2
  python -m runner.compare lm_eval_out/base/samples_arc_easy_2026-01-01T10-00-00.000000.jsonl \\
      lm_eval_out/int8/samples_arc_easy_2026-01-02T10-00-00.000000.jsonl --metric acc --tolerance 2
  python -m runner.compare 3f2a...e1 9c4b...07 --tracking-uri http://mlflow:5000 --tolerance 1
  python -m runner.compare outputs/run-bf16 outputs/run-fp32 --aa --write-reference references   # A/A replicate"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m runner.compare", description=__doc__.split("\n\n")[0] + "\n\n"
                                + __doc__.split("\n\n")[1], epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", metavar="A", help="the REFERENCE run: a job's output directory, an MLflow run id, or an "
                                          "lm-eval samples_<task>_<date>.jsonl file")
    p.add_argument("b", metavar="B", help="the CANDIDATE run, tested against A (same kinds as A)")
    p.add_argument("--metric", help="the per-sample metric of an lm-eval file (default: its only numeric one)")
    p.add_argument("--filter", dest="filter_name", help="the lm-eval filter (default: the file's only one)")
    p.add_argument("--tolerance", type=float, help="GO when B's drop is shown below this (points; default: A's "
                                                   "job's tolerance from its report.json)")
    p.add_argument("--tolerance-unit", choices=("points", "percent"), default="points",
                   help="points of the metric (percent points for 0/1 accuracy), or percent of A's score")
    p.add_argument("--margin", type=float, default=0.0, help="NO-GO when a drop larger than this is shown (default 0)")
    p.add_argument("--margin-unit", choices=("points", "percent"), default="points")
    p.add_argument("--alpha", type=float, default=None,
                   help="false-alarm rate of each claim (default: the task's alpha A's job ran with, else 0.05)")
    p.add_argument("--beta", type=float, default=0.2, help="miss rate at the minimum detectable effect (default 0.2)")
    direction = p.add_mutually_exclusive_group()
    direction.add_argument("--higher-is-better", dest="higher_is_better", action="store_true", default=None,
                           help="the metric's direction (default: the runs' config, else higher is better)")
    direction.add_argument("--lower-is-better", dest="higher_is_better", action="store_false")
    p.add_argument("--paired-test", choices=("auto", "mcnemar", "betting", "t", "bootstrap"), default="auto",
                   help="auto: McNemar for 0/100 scores, the finite-sample betting test for other bounded scores "
                        "(the bounds a job recorded, or --score-bounds), the t-test for unbounded ones")
    p.add_argument("--score-bounds", nargs=2, type=float, metavar=("LO", "HI"),
                   help="the range every per-sample score lies in (default: the bounds the runs' jobs recorded; an "
                        "lm-eval file records none, e.g. --score-bounds 0 1 for a fraction)")
    p.add_argument("--gate", choices=("regression", "noninferiority"), default="regression",
                   help="what the verdict follows when a drop > margin and one < tolerance are both shown")
    p.add_argument("--on-inconclusive", choices=("inconclusive", "pass", "fail"), default="inconclusive",
                   help="exit status of INCONCLUSIVE: 4, 0 or 3")
    p.add_argument("--unpaired", action="store_true",
                   help="when the runs do not pair (other samples or prompts), compare their means unpaired instead "
                        "of refusing")
    p.add_argument("--tracking-uri", help="MLflow server of run ids (default: $MLFLOW_TRACKING_URI)")
    p.add_argument("--output-dir", type=Path, help="where the reports go (default: outputs/compare/<date>/<time>-<id>)")
    p.add_argument("--markdown", help="also write a markdown summary here")
    p.add_argument("--aa", action="store_true",
                   help="A and B are two runs of one model (another host, dtype, batch size...): print their A/A "
                        "replicate (the shift and flips with nothing changed) instead of a verdict")
    p.add_argument("--write-reference", metavar="DIR",
                   help="with --aa: write the replicate as recorded.noise of A's entry in DIR/<task>.yaml")
    return p


def default_output_dir() -> Path:
    """As a job's: a dated directory under ./outputs, unique per start."""
    now = datetime.now()
    return Path("outputs") / "compare" / now.strftime("%Y-%m-%d") / f"{now:%H-%M-%S}-{secrets.token_hex(3)}"


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.write_reference and not args.aa:
        print(UserError("--write-reference writes an A/A replicate", where="--write-reference",
                        given=args.write_reference, fix="add --aa").render(), file=sys.stderr, flush=True)
        return EXIT_ERROR
    if args.aa:
        return main_aa(args.a, args.b, args.write_reference)
    from runner.reports import comparison, comparison_report, runs  # lazy: --help stays fast (no statistics loaded)

    try:
        comparison.stats_config(0.05 if args.alpha is None else args.alpha, args.margin, args.margin_unit,  # checked
                                args.tolerance, args.tolerance_unit, args.paired_test, args.gate,  # before reading
                                args.on_inconclusive)
        out_dir = args.output_dir or default_output_dir()
        check_output_dir(out_dir, "--output-dir")
        if args.markdown:
            check_output_file(args.markdown, "--markdown")
        a = runs.read_run(args.a, args.metric, args.filter_name, args.tracking_uri)
        b = runs.read_run(args.b, args.metric, args.filter_name, args.tracking_uri)
        alpha = args.alpha if args.alpha is not None else a.alpha or b.alpha or 0.05  # a task's alpha (0.01 for some)
        stats = comparison.stats_config(alpha, args.margin, args.margin_unit, args.tolerance, args.tolerance_unit,
                                        args.paired_test, args.gate, args.on_inconclusive)
        result = comparison.compare(a, b, stats, alpha, args.beta, args.higher_is_better, args.unpaired,
                                    tuple(args.score_bounds) if args.score_bounds else None)
        text, _ = comparison_report.write_reports(result, out_dir, args.markdown)
    except UserError as err:
        print(err.render(), file=sys.stderr, flush=True)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("runner.compare: interrupted (Ctrl-C), nothing written past this point", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    print(text)
    print(f"outputs: {out_dir} (report.txt, report.json, junit.xml)", flush=True)
    return result.decision.exit_status


def main_aa(a: str, b: str, write_reference: str | None) -> int:
    """``--aa``: the A/A replicate of two runs, printed (and written into a references file); exit 0, or 1."""
    from runner.reports.aa import run_aa  # lazy: --help stays fast

    try:
        print(run_aa(a, b, write_reference), flush=True)
    except UserError as err:
        print(err.render(), file=sys.stderr, flush=True)
        return EXIT_ERROR
    return EXIT_OK


def entry() -> None:
    """Console-script entry point (``runner-compare``)."""
    sys.exit(main())
