"""Calibration of the paired t-test on unbounded scores (``stats.paired_test=t`` or ``auto_t``), with its skewness check.

No test of an unbounded mean holds alpha at every n (Bahadur & Savage 1956), so this family measures where the
product's t rule holds: the job's own paired decision (:func:`runner.stats.dispatch.paired_claims`, no score bounds,
``stats.paired_test=t``, the default ``stats.t_skew_limit`` and ``stats.t_rare_share``: no claim below 59 samples) at
n = 40 to 1000, 59 the fewest it claims on, on these shapes of per-sample
differences (new - reference, higher is better, the true mean exactly the drop tested):

* ``dense``, ``sparse 2%``, ``sparse 5%``, ``skewed``: the continuous family's shapes
  (:func:`benchmarks.calibration_grid.continuous.draw`; sparse: few samples change, each by the drop / share;
  skewed: 5% of the samples move 60 points against the claim);
* ``perplexity-like s``: a perplexity's per-document change, each document's perplexity drawn from the embedded
  reference's 40 recorded ones (``references/samples/perplexity``) and multiplied by ``exp(s e)`` (``e`` standard
  normal): a change proportional to the document's perplexity, right-skewed as a perplexity's is;
* ``lognormal 1``: ``exp(e) - exp(1/2)``, a heavy tail (skewness 6.2).

The error cells point the tail against the claim measured (rare large losses for GO, rare large gains for NO-GO), the
least favourable case. The power cells beside them (GO at a drop of 0, NO-GO at a drop of twice the tolerance) point
it the way a perplexity's does: rare large losses.
"""

from __future__ import annotations

import json
from functools import lru_cache, partial
from pathlib import Path

from benchmarks.calibration_grid.cells import Cell, Family, Grid, Rate
from benchmarks.calibration_grid.continuous import draw
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.pairing import PairedScores
from runner.stats.dispatch import paired_claims
from runner.stats.numerics.t_skew import DEFAULT_LIMIT
from runner.stats.rules import paired_continuous
from runner.stats.settings import StatsConfig

ALPHA = 0.05
RULE = "continuous: paired t, unbounded scores (stats.paired_test=t, asymptotic)"
SHAPES = ("dense", "sparse 2%", "sparse 5%", "skewed", "perplexity-like 0.25", "perplexity-like 0.5", "lognormal 1")
NS = (40, 57, 59, 100, 200, 500, 1000)
REFERENCE = Path(__file__).resolve().parents[2] / "references" / "samples" / "perplexity"


@lru_cache(maxsize=1)
def perplexities() -> tuple[float, ...]:
    """The embedded perplexity reference's per-document perplexities (its recorded samples)."""
    rows = [json.loads(line) for path in sorted(REFERENCE.glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return tuple(float(r["score"]) for r in rows)


def differences(shape: str, gain: float, n: int, rng, against_go: bool = True):  # noqa: ANN001, ANN201 - numpy
    """``n`` differences of ``shape`` whose true mean is exactly ``gain``, the tail against the claim measured."""
    import numpy as np

    if not shape.startswith(("perplexity-like", "lognormal")):
        return draw(shape, gain, n, rng, against_go)
    s = float(shape.split()[1])
    if shape.startswith("lognormal"):
        base, level = np.ones(n), 1.0
    else:
        ppl = np.asarray(perplexities())
        base, level = ppl[rng.integers(0, ppl.size, n)], float(ppl.mean())
    change = base * (np.exp(s * rng.standard_normal(n)) - 1.0) - level * (np.exp(s * s / 2.0) - 1.0)  # mean 0
    return gain + (-change if against_go else change)  # a perplexity's rise is a loss


def claims(d, tolerance: float, margin: float, limit: float = DEFAULT_LIMIT):  # noqa: ANN001, ANN201 - Claims
    """The job's claims on unbounded differences ``d`` under ``stats.paired_test=t`` with ``stats.t_skew_limit``
    ``limit`` (1: the t-test without its skewness check)."""
    pairs = PairedScores(tuple(str(i) for i in range(len(d))), tuple(-d / 2.0), tuple(d / 2.0), (), ())
    stats = StatsConfig(paired_test="t", t_skew_limit=limit)
    return paired_claims(pairs, HypothesisParams(ALPHA, 0.2, 10.0, len(d), True), stats, margin, tolerance, None, [],
                   None)[1]


def rate(claim: str, shape: str, n: int, drop: float, tolerance: float, margin: float, trials: int,
         seed: int, losses: bool = False, limit: float = DEFAULT_LIMIT) -> Rate:
    """How often the job's t rule claims ``claim`` ("go" or "no_go") when the true drop is ``drop``; the tail against
    the claim, or (``losses``) always towards large losses; ``limit``: ``stats.t_skew_limit``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        d = differences(shape, -drop, n, rng, against_go=losses or claim == "go")
        c = claims(d, tolerance, margin, limit)
        hits += c.within if claim == "go" else c.regression
    return Rate.monte_carlo(hits, trials)


def cells(grid: Grid) -> list[Cell]:
    """Every shape at every n: false GO at drop = tolerance 1, false NO-GO at drop = margin 0; power beside them.
    The reduced grid: the audit's failing settings (n = 40 skewed, now below the fewest samples the rule claims on,
    and n = 200) and n = 59, the fewest."""
    picks = grid.pick([(s, n) for s in SHAPES for n in NS],
                      [("skewed", 40), ("sparse 5%", 59), ("skewed", 200)])
    out: list[Cell] = []
    for shape, n in picks:
        out.append(Cell(RULE, "GO at drop = tolerance", f"n={n} {shape} t=1", "error", ALPHA,
                        partial(rate, "go", shape, n, 1.0, 1.0, 0.0)))
        out.append(Cell(RULE, "NO-GO at drop = margin", f"n={n} {shape} m=0", "error", ALPHA,
                        partial(rate, "no_go", shape, n, 0.0, 5.0, 0.0)))
    if grid.full:
        for shape, n, t in (("dense", 100, 2.75), ("perplexity-like 0.25", 40, 2.0), ("perplexity-like 0.25", 59, 2.0),
                            ("perplexity-like 0.25", 200, 1.0)):
            out.append(Cell(RULE, "power: GO at drop 0", f"n={n} {shape} t={t:g}", "power", 0.0,
                            partial(rate, "go", shape, n, 0.0, t, 0.0, losses=True)))
            out.append(Cell(RULE, "power: NO-GO at drop 2t", f"n={n} {shape} drop {2 * t:g} m=0", "power", 0.0,
                            partial(rate, "no_go", shape, n, 2 * t, t, 0.0, losses=True)))
    return out


FAMILY = Family("unbounded", tuple(r for r in paired_continuous.CLAIMS if r.name == RULE), cells)
