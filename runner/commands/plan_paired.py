"""The paired design's figures and their words, shared by ``runner.plan``'s table and its plan of a job: the
regression models in words, the note for a drop the agreement cannot hold, the design effect's key and text, and
the savings table (samples for a target theta, unpaired versus paired at several agreements)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from runner.stats.numerics.cluster_variance import effective_sigma
from runner.stats.planning.paired import paired_feasible, paired_min_samples
from runner.stats.numerics.ztest import min_samples_for_theta

EXIT_USAGE = 2
"""Bad command line (argparse's own status)."""
DEFAULT_TARGET = 3.0
"""The drop (points) ``--savings`` plans for when ``--target-theta`` is not given."""

MODEL_TEXT = {
    "added": "regression model 'added': the agreement is measured between two healthy runs and a drop of theta "
             "adds theta% right-to-wrong flips on top (theta from Connor's sample-size equation with discordance "
             "1 - agreement + theta, plus a 1/n continuity term)",
    "split": "regression model 'split': the agreement holds under the regression "
             "(theta = 100 (k sqrt((1 - agreement) / n) + 1 / n), k = |z(alpha)| + |z(beta)|)",
}


def infeasible_note(target: float, agreement: float, alpha: float, beta: float, model: str) -> str:
    """Why no paired n is given for a drop of ``target`` points at this agreement."""
    if model != "split":
        return f"note: a {target:g}-point drop does not fit agreement {agreement:g}"
    best = round(1.0 - target / 100.0, 6)
    return (
        f"note: a {target:g}-point drop changes at least {target:g}% of the answers, so the runs cannot agree on "
        f"more than {best:g} of them; at agreement {best:g} the paired n is "
        f"{paired_min_samples(target, best, alpha, beta, model='split')}"
    )


def deff_key(deff: float) -> dict[str, float]:
    """The JSON key of a design effect, only when one is planned (the independent output stays as it was)."""
    return {} if deff == 1 else {"design_effect": deff}


def deff_text(deff: float) -> str:
    return "" if deff == 1 else (f"; design effect {deff:g}: sigma x sqrt({deff:g}) = x{math.sqrt(deff):.4f}, "
                                 f"samples needed x{deff:g} (clustered questions)")


def savings(target: float, sigma: float, alpha: float, beta: float, agreements: Sequence[float], model: str,
            deff: float) -> dict[str, Any]:
    """Samples needed for a drop of ``target`` points: the unpaired test's, and the paired one's per agreement."""
    unpaired_n = min_samples_for_theta(target, effective_sigma(sigma, deff), alpha, beta)
    rows = []
    for a in agreements:
        feasible = paired_feasible(target, a, model)
        n = paired_min_samples(target, a, alpha, beta, model=model, design_effect=deff) if feasible else None
        rows.append({"agreement": a, "num_samples": n, "feasible": feasible, "ratio": unpaired_n / n if n else None})
    return {"target_theta": target, "sigma": sigma, "alpha": alpha, "beta": beta, "unpaired_num_samples": unpaired_n,
            "regression_model": model, "paired": rows} | deff_key(deff)


def print_savings(out: dict[str, Any]) -> None:
    target, sigma, alpha, beta = out["target_theta"], out["sigma"], out["alpha"], out["beta"]
    rows, model = out["paired"], out["regression_model"]
    print(f"samples needed to catch a {target:g}-point drop (alpha {alpha:g}, beta {beta:g})"
          + deff_text(out.get("design_effect", 1)))
    print(f"{'design':<9} {'agreement':>9} {'num_samples':>11} {'vs unpaired':>12}")
    print(f"{'unpaired':<9} {'-':>9} {out['unpaired_num_samples']:>11d} {'1x':>12}")
    for row in rows:
        if row["feasible"]:
            print(f"{'paired':<9} {row['agreement']:>9.2f} {row['num_samples']:>11d} "
                  f"{format(row['ratio'], '.1f') + 'x fewer':>12}")
        else:
            print(f"{'paired':<9} {row['agreement']:>9.2f} {'n/a*':>11}")
    print(f"unpaired: TensorRT-LLM's test, sigma {sigma:g}, runs treated as independent.")
    print("paired: McNemar's exact test on the same samples of a 0/100 metric, where agreement is the fraction of "
          "samples both runs score the same; " + MODEL_TEXT[model] + ".")
    if not all(row["feasible"] for row in rows):
        print("* " + infeasible_note(target, max(r["agreement"] for r in rows), alpha, beta, model)[len("note: "):])
