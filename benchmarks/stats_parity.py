"""Every verdict, p-value and bound the statistics produce, dumped to JSON: run it before and after a change
that must not change a result, and compare the two files.

    python benchmarks/stats_parity.py --out before.json     # on the old code
    python benchmarks/stats_parity.py --out after.json      # on the new code
    cmp before.json after.json                              # identical: no result changed

Two parts: the reduced calibration grid measured with fixed seeds (every cell's rate and standard error:
each rate counts thousands of the rules' verdicts), and a fixed corpus of decisions through
``decide_against`` (every rule of its precedence, binary and continuous scores, margins and tolerances,
clusters, a corpus metric, unequal reference n): each decision's report record, its paired result, its
claims and both bounds. Floats are written with ``repr`` precision, so any changed bit shows.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runner` and the calibration cells importable
    sys.path.insert(0, str(ROOT))

from runner.contract.evaluator import CorpusMetric, ScoredSample  # noqa: E402
from benchmarks import calibration_grid as calibration  # noqa: E402
from benchmarks.calibration_grid.run import measure  # noqa: E402
from runner.stats.dispatch import decide_against  # noqa: E402
from runner.stats.data.entry import Entry  # noqa: E402
from runner.stats.settings import StatsConfig  # noqa: E402
from runner.stats.data.hypothesis import HypothesisParams  # noqa: E402
from runner.stats.data.tolerance import Tolerance  # noqa: E402


def _stats(**kw: Any) -> SimpleNamespace:
    return SimpleNamespace(**(vars(StatsConfig()) | kw))


def _plain(value: Any) -> Any:
    """JSON-ready: tuples as lists, non-finite floats as strings (so they compare as text)."""
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _scores(rng: Any, n: int, kind: str, drop: float) -> tuple[dict[str, float], dict[str, float]]:
    ids = [f"s/{i:04d}" for i in range(n)]
    if kind == "binary":
        ref = (rng.random(n) < 0.7) * 100.0
        flip = rng.random(n) < 0.08
        lose = rng.random(n) < drop / 100.0
        new = ref.copy()
        new[flip] = 100.0 - new[flip]
        new[lose] = 0.0
    else:
        ref = rng.uniform(0.0, 1.0, n) ** 2
        new = (ref - drop / 100.0 + rng.normal(0.0, 0.1, n)).clip(0.0, 1.0)
    return dict(zip(ids, ref.tolist())), dict(zip(ids, new.tolist()))


def _decision(d: Any) -> dict[str, Any]:
    out = {"record": d.to_dict(), "rule": d.rule, "outcome": d.outcome, "p_value": d.p_value,
           "p_within": d.p_within, "ci": d.ci, "bounds": d.bounds, "theta": d.theta, "notes": d.notes}
    if d.paired is not None:
        out["paired"] = d.paired.to_dict()
    if d.claims is not None:
        c = d.claims
        out["claims"] = [c.regression, c.within, c.low, c.high, c.method, c.p_within]
    if d.advice is not None:
        out["advice"] = repr(d.advice)
    return out


def decisions() -> list[dict[str, Any]]:
    """A fixed corpus of decisions, one per rule, score kind and setting."""
    import numpy as np

    out = []
    mean = CorpusMetric("mean", lambda items: sum(items) / len(items))
    for case, (n, kind, drop, method, paired_test, margin, tol, clustered, corpus, threshold, sigma, n_ref) in \
            enumerate([(n, kind, drop, method, pt, m, t, cl, co, th, sg, nr)
                        for n in (40, 300)
                        for kind in ("binary", "continuous")
                        for drop in (0.0, 3.0, 12.0)
                        for method, pt in (("auto", "auto"), ("unpaired", "auto"), ("paired", "t"),
                                           ("paired", "bootstrap"))
                        for m, t in ((0.0, 2.75), (1.0, 5.0))
                        for cl in (False, True)
                        for co in (False, True)
                        for th, sg, nr in ((None, None, None), (55.0, None, None), (None, 0.0, None),
                                           (None, None, 57))
                        if not (co and (cl or method == "paired" or th is not None or sg == 0.0))
                        if not (m and kind == "continuous" and method == "auto")
                        if not ((th is not None or sg == 0.0) and (cl or method != "auto"))]):
        rng = np.random.default_rng(case)
        ref, new = _scores(rng, n, kind, drop)
        scale = 100.0 if kind == "binary" else 1.0
        value = float(np.mean(list(ref.values())))
        params = HypothesisParams(0.05, 0.2, 50.0 if sigma is None else sigma, n)
        entry = Entry(value, None if threshold is None else value - 5.0 * scale / 100.0, n_ref)
        clusters = {k: f"c{i // 6}" for i, k in enumerate(new)}
        scored = [ScoredSample(k, f"prompt {k}", "", "", v, {"subject": clusters[k], "corpus_item": v})
                  for k, v in new.items()]
        rows = {k: SimpleNamespace(score=v) for k, v in ref.items()}
        st = _stats(method=method, paired_test=paired_test, margin=margin, cluster="auto" if clustered else "off",
                    bootstrap_n=500, bootstrap_seed=7)
        bounds = (0.0, 100.0) if kind == "binary" else (0.0, 1.0)
        score = float(np.mean(list(new.values())))
        try:
            d = decide_against(entry, scored, score, params, st, 25.0 if kind == "binary" else None, "accuracy",
                               rows, None, (), Tolerance(tol * scale / 100.0 if kind != "binary" else tol, "parity"),
                               cluster_key="subject" if clustered else None, corpus=mean if corpus else None,
                               score_bounds=bounds)
            found: dict[str, Any] = _decision(d)
        except Exception as e:  # noqa: BLE001 - a refusal is a result too: its type and message must not change
            found = {"error": f"{type(e).__name__}: {e}"}
        out.append({"case": [n, kind, drop, method, paired_test, margin, tol, clustered, corpus, threshold, sigma,
                             n_ref], **found})
    return out


def grid(trials: int, seed: int, jobs: int) -> list[dict[str, Any]]:
    """The reduced calibration grid: every cell's rate with fixed seeds."""
    cells = calibration.cells(calibration.Grid(full=False))
    return [{"rule": m.cell.rule, "claim": m.cell.claim, "setting": m.cell.setting, "rate": m.rate.value,
             "se": m.rate.se, "exact": m.rate.exact} for m in measure(cells, trials, seed, jobs)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the JSON file to write")
    ap.add_argument("--trials", type=int, default=200, help="Monte Carlo draws per calibration cell")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes for the grid")
    ap.add_argument("--no-grid", action="store_true", help="only the corpus of decisions")
    args = ap.parse_args(argv)
    found = {"decisions": decisions()}
    if not args.no_grid:
        found["grid"] = grid(args.trials, args.seed, args.jobs)
    Path(args.out).write_text(json.dumps(_plain(found), indent=1, sort_keys=True) + "\n")
    errors = sum("error" in d for d in found["decisions"])
    print(f"{len(found['decisions'])} decisions ({errors} refused), {len(found.get('grid', []))} calibration cells "
          f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
