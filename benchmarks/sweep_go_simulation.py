"""P(sweep GO) and P(any false GO) of a six-job sweep, by simulation through the sweep's own judge.

Each job's paired difference is normal around minus its drop, with standard error ``se``; jobs share the
reference's samples, so their errors correlate (``rho``). Each job's two claims are one-sided z-tests at alpha
0.05: NO-GO when a drop > 0 is shown, GO when a drop < the tolerance is shown. The rows go through
:func:`runner.sweep.summary.judge` (``sweep.correction=holm`` on NO-GO, ``sweep.go_correction`` none or holm
on GO), the code every sweep runs. Scenarios:

- ``one at tolerance``: one job's drop equals its tolerance, five are identical to the reference; the sweep's
  GO ("every job within tolerance") is false, so P(sweep GO) is its error rate (Berger 1982: at most alpha
  without adjustment);
- ``all at tolerance, rho 1``: the worst case of the intersection-union test: exactly alpha;
- ``all identical``: every job at drop 0: P(sweep GO) is the sweep's power;
- ``pick among six``: all six at tolerance, independent: P(any job's own GO) is the error of a per-job GO list
  used to choose among candidates, which the opt-in correction controls.

Run: .venv/bin/python benchmarks/sweep_go_simulation.py [--reps 20000]   (about a minute on a 2-core Intel Xeon (AMX-BF16))
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from runner.sweep.judge import judge  # noqa: E402

ALPHA, JOBS, TOLERANCE = 0.05, 6, 2.75
PHI = NormalDist().cdf


def _row(diff: float, se: float) -> dict:
    p_regression, p_go = PHI(diff / se), 1.0 - PHI((diff + TOLERANCE) / se)
    regression, within = p_regression < ALPHA, p_go < ALPHA
    own = "no-go" if regression else "go" if within else "inconclusive"
    tests = [{"name": "accuracy", "rule": "paired", "gate": "regression", "p_value": p_regression, "alpha": ALPHA,
              "passed": not regression},
             {"name": "accuracy", "rule": "paired", "gate": "noninferiority", "p_value": p_go, "alpha": ALPHA,
              "passed": within}]
    return {"verdict": own, "_tests": tests, "_gate": "regression", "_p_gate": "noninferiority", "advice": None}


def rates(drops: list[float], rho: float, se: float, reps: int, go_correction: str, seed: int = 0) -> dict[str, float]:
    """P(sweep GO) and P(at least one job GO within the sweep), each with its Monte Carlo standard error."""
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal(reps)
    own = rng.standard_normal((reps, len(drops)))
    errors = math.sqrt(rho) * shared[:, None] + math.sqrt(1.0 - rho) * own
    sweep_go = any_go = 0
    for rep in range(reps):
        rows = [_row(-drop + se * e, se) for drop, e in zip(drops, errors[rep])]
        judge(rows, "holm", None, go_correction)
        verdicts = [r["sweep_verdict"] for r in rows]
        sweep_go += all(v == "go" for v in verdicts)
        any_go += any(v == "go" and d >= TOLERANCE for v, d in zip(verdicts, drops))
    out = {}
    for name, hits in (("sweep_go", sweep_go), ("any_false_go", any_go)):
        rate = hits / reps
        out[name], out[name + "_se"] = rate, math.sqrt(max(rate * (1 - rate), 1e-12) / reps)
    return out


SCENARIOS = {
    "one at tolerance, five identical (rho 0.5)": ([TOLERANCE] + [0.0] * (JOBS - 1), 0.5),
    "one at tolerance, five identical (rho 0)": ([TOLERANCE] + [0.0] * (JOBS - 1), 0.0),
    "all at tolerance, rho 1 (the worst case)": ([TOLERANCE] * JOBS, 1.0),
    "all identical (power, rho 0.5)": ([0.0] * JOBS, 0.5),
    "pick among six, all at tolerance (rho 0)": ([TOLERANCE] * JOBS, 0.0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20000)
    parser.add_argument("--se", type=float, default=TOLERANCE / 2.5,
                        help="standard error of each job's difference (default: tolerance / 2.5, power 0.80 alone)")
    args = parser.parse_args()
    print(f"{JOBS} jobs, alpha {ALPHA}, tolerance {TOLERANCE}, se {args.se:.3f}, {args.reps} draws; "
          "NO-GO claims Holm-adjusted in both columns")
    print(f"{'scenario':<45} {'measure':<13} {'GO unadjusted':>16} {'GO Holm':>16}")
    for name, (drops, rho) in SCENARIOS.items():
        plain = rates(drops, rho, args.se, args.reps, "none")
        holm = rates(drops, rho, args.se, args.reps, "holm")
        measure = "any_false_go" if name.startswith("pick") else "sweep_go"
        print(f"{name:<45} {measure:<13} {plain[measure]:>8.4f} ({plain[measure + '_se']:.4f}) "
              f"{holm[measure]:>8.4f} ({holm[measure + '_se']:.4f})", flush=True)


if __name__ == "__main__":
    main()
