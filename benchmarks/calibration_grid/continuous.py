"""Calibration of the paired rule for continuous scores on a 0-100 scale (ROUGE, F1, a rate over variants).

Each trial draws n per-sample differences (new - reference, higher is better) with an exact true mean, turns
them into two runs' scores within [0, 100] (``50 -+ d / 2``) and asks the job's own paired decision
(:func:`runner.stats.dispatch.paired_claims`, the task's bounds 0-100, ``stats.paired_test=auto``) for its claims:

* ``dense``: every sample changes, ``mean + 10 e`` (``e`` standard normal cut at +-4, so the mean is exact);
* ``sparse q%``: a share q of the samples changes, by ``mean / q`` on average (+-10 e); where that exceeds the
  scale, every change is a loss of the whole range and the share is ``drop / 100`` (the least favourable
  case for GO: a rare large loss that a small sample misses);
* ``skewed``: 95% of the samples move a little one way, 5% by 60 points the other, against the claim measured
  (rare large losses for GO, rare large gains for NO-GO), plus a uniform +-1.

The advice cells follow "about N more samples" of an undecided job whose observed differences have exactly the
true mean and sd (dense): the job's advice (:func:`runner.stats.numerics.betting_advice.more_samples`, from the job's
own paired result), then fresh runs of N samples from the truth, each decided by the job's rule.
"""

from __future__ import annotations

from functools import partial

from runner.stats.rules import paired_continuous
from benchmarks.calibration_grid.cells import Cell, Family, Grid, Rate
from runner.stats.numerics import betting_advice
from runner.stats.dispatch import paired_claims
from runner.stats.data.pairing import PairedScores
from runner.stats.settings import StatsConfig
from runner.stats.data.hypothesis import HypothesisParams

ALPHA = 0.05
SHAPES = ("dense", "sparse 2%", "sparse 5%", "sparse 20%", "skewed")
RULE = "continuous: paired betting (bounded 0-100)"


def draw(shape: str, gain: float, n: int, rng, against_go: bool = True):  # noqa: ANN001, ANN201 - numpy
    """``n`` differences (new - reference) with mean exactly ``gain``, each within [-100, 100]."""
    import numpy as np

    def sym(size: int):  # noqa: ANN202 - symmetric noise, mean 0, within +-4
        return np.clip(rng.standard_normal(size), -4.0, 4.0)

    if shape == "dense":
        return gain + 10.0 * sym(n)
    if shape.startswith("sparse"):
        q = float(shape.split()[1].rstrip("%")) / 100.0
        size = abs(gain) / q
        if size > 100.0:  # the change cannot be that large: every change is the whole range
            q, size = abs(gain) / 100.0, 100.0
        changed = rng.random(n) < q
        spread = min(10.0, (100.0 - size) / 4.0)
        return np.where(changed, np.copysign(size, gain) + spread * sym(n), 0.0)
    p, big = 0.05, 60.0
    rare = rng.random(n) < p
    sign = -1.0 if against_go else 1.0  # the rare move's direction
    small = (gain - sign * big * p) / (1 - p)
    return np.where(rare, sign * big, small) + rng.uniform(-1.0, 1.0, n)


def _claims(d, tolerance: float, margin: float, unbounded: bool = False):  # noqa: ANN001, ANN202
    """The job's claims on differences ``d``: bounded 0-100 under stats.paired_test=auto (the betting test), or
    unbounded under stats.paired_test=t (the asymptotic t-test a user chooses; auto makes no claim there)."""
    ref, new = tuple(50.0 - d / 2.0), tuple(50.0 + d / 2.0)
    pairs = PairedScores(tuple(str(i) for i in range(len(d))), ref, new, (), ())
    params = HypothesisParams(ALPHA, 0.2, 10.0, len(d), True)
    if unbounded:
        return paired_claims(pairs, params, StatsConfig(paired_test="t"), margin, tolerance, None, [], None)[1]
    return paired_claims(pairs, params, StatsConfig(), margin, tolerance, None, [], (0.0, 100.0))[1]


def _rate(claim: str, shape: str, n: int, tolerance: float, margin: float, trials: int, seed: int,
          unbounded: bool = False) -> Rate:
    import numpy as np

    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        if claim == "go":
            c = _claims(draw(shape, -tolerance, n, rng, against_go=True), tolerance, margin, unbounded)
            hits += c.within
        elif claim == "no_go":
            c = _claims(draw(shape, -margin, n, rng, against_go=False), tolerance, margin, unbounded)
            hits += c.regression
        else:
            c = _claims(draw(shape, 0.0, n, rng, against_go=True), tolerance, margin, unbounded)
            hits += c.low <= 0.0 <= c.high
    return Rate.monte_carlo(hits, trials)


def power(claim: str, n: int, drop: float, tolerance: float, trials: int, seed: int) -> Rate:
    """How often the betting test makes a true claim on dense differences (sd 10): GO (``claim`` "go") or NO-GO at a
    true drop of ``drop``, margin 0."""
    import numpy as np

    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        c = _claims(draw("dense", -drop, n, rng), tolerance, 0.0)
        hits += c.within if claim == "go" else c.regression
    return Rate.monte_carlo(hits, trials)


def advice_for(n: int, drop: float, tolerance: float, margin: float, seed: int):  # noqa: ANN201 - Advice
    """The advice of a job at ``n`` whose dense differences have mean ``-drop`` and sd 10 exactly."""
    import numpy as np

    e = np.random.default_rng(seed).standard_normal(n)
    d = -drop + 10.0 * (e - e.mean()) / e.std(ddof=1)
    pairs = PairedScores(tuple(str(i) for i in range(n)), tuple(50.0 - d / 2.0), tuple(50.0 + d / 2.0), (), ())
    result = paired_claims(pairs, HypothesisParams(ALPHA, 0.2, 10.0, n, True), StatsConfig(), margin, tolerance, None, [],
                     (0.0, 100.0))[0]
    return betting_advice.more_samples(result.betting, n, True, drop, margin, tolerance, ALPHA)


def _advice_rate(n: int, drop: float, tolerance: float, margin: float, trials: int, seed: int) -> Rate:
    import numpy as np

    advice = advice_for(n, drop, tolerance, margin, seed)
    rng = np.random.default_rng([seed, 1])
    hits = 0
    for _ in range(trials):
        c = _claims(draw("dense", -drop, advice.n_total, rng), tolerance, margin)
        hits += c.within if advice.target == "GO" else c.regression
    return Rate.monte_carlo(hits, trials)


def cells(grid: Grid) -> list[Cell]:
    """The full grid: n x shape x (margins 0, 2.75; tolerances 1, 2.75, 5; coverage at drop 0). The reduced one:
    the three settings where the paired t-test failed the audit, at n = 57."""
    if not grid.full:
        return [Cell(RULE, "GO at drop = tolerance", "n=57 sparse 2% t=1", "error", ALPHA,
                     partial(_rate, "go", "sparse 2%", 57, 1.0, 0.0)),
                Cell(RULE, "NO-GO at drop = margin", "n=57 skewed m=0", "error", ALPHA,
                     partial(_rate, "no_go", "skewed", 57, 5.0, 0.0)),
                Cell(RULE, f"{1 - 2 * ALPHA:.0%} CI coverage", "n=57 skewed drop 0", "coverage", 1 - 2 * ALPHA,
                     partial(_rate, "cover", "skewed", 57, 5.0, 0.0))]
    out: list[Cell] = []
    for n in (57, 100, 500, 4096):
        for shape in SHAPES:
            for m in (0.0, 2.75):
                out.append(Cell(RULE, "NO-GO at drop = margin", f"n={n} {shape} m={m:g}", "error", ALPHA,
                                partial(_rate, "no_go", shape, n, 5.0, m)))
            for t in (1.0, 2.75, 5.0):
                out.append(Cell(RULE, "GO at drop = tolerance", f"n={n} {shape} t={t:g}", "error", ALPHA,
                                partial(_rate, "go", shape, n, t, 0.0)))
            out.append(Cell(RULE, f"{1 - 2 * ALPHA:.0%} CI coverage", f"n={n} {shape} drop 0", "coverage",
                            1 - 2 * ALPHA, partial(_rate, "cover", shape, n, 5.0, 0.0)))
    for n, drop, t, m, target in ((100, 0.0, 2.75, 0.0, "GO"), (57, 0.0, 5.0, 0.0, "GO"),
                                  (100, 2.75, 5.0, 0.0, "NO-GO"), (500, 0.0, 1.0, 0.0, "GO")):
        out.append(Cell(RULE, f"advice reaches {target}", f"n={n} dense sd 10 drop {drop:g} t={t:g} m={m:g}",
                        "advice", 0.75, partial(_advice_rate, n, drop, t, m), high=0.85))
    for n, t in ((100, 2.75), (500, 1.0), (500, 2.75)):
        out.append(Cell(RULE, "power: GO at drop 0", f"n={n} dense sd 10 t={t:g}", "power", 0.0,
                        partial(power, "go", n, 0.0, t)))
    for n, t in ((100, 2.75), (500, 1.0)):
        out.append(Cell(RULE, "power: NO-GO at drop 2t", f"n={n} dense sd 10 drop {2 * t:g} m=0", "power", 0.0,
                        partial(power, "no_go", n, 2 * t, t)))
    return out


FAMILY = Family("continuous", tuple(r for r in paired_continuous.CLAIMS if r.name == RULE), cells)
