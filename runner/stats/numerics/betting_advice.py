"""How many samples the betting test needs to reach a claim, found by resampling the observed differences.

The z-based sizing of :mod:`runner.stats.numerics.advice` describes a test whose critical value does not depend on n.
The betting test's does: at small n its largest bet is capped by the scores' range (a 0-100 score's
differences span 200 points), so it needs several times the samples the z formula names. Here the observed
differences stand in for the truth: for a candidate ``N``, ``DRAWS`` samples of ``N`` differences are drawn
from them with replacement (a generator seeded by the run's ``stats.bootstrap_seed`` and ``N``) and the betting
test the job uses (same alpha, bounds and truncation) decides each; the advice names the smallest ``N``
(doubling, then bisection to within 2%) at which it reaches the claim in 80% of the draws. Beyond
``MAX_SIMULATED`` samples the bets are no longer capped and the test behaves as a normal one at critical value
``sqrt(2 log(1/alpha))``: the advice uses that formula there.
"""

from __future__ import annotations

import math
from dataclasses import replace

from runner.stats.numerics.advice import Advice, POWER, more_samples as z_more_samples
from runner.stats.numerics import betting
from runner.stats.data.paired_result import BettingSample
from runner.stats.data.verdicts import GO, NO_GO

DRAWS = 400
MAX_SIMULATED = 50_000
CHUNK = 2_000_000  # values drawn at once


def reach(sample: BettingSample, higher_is_better: bool, target: str, edge: float, n_total: int,
          alpha: float) -> float:
    """P(the betting test on ``n_total`` differences resampled from ``sample`` shows ``target``): GO, a drop
    below ``edge`` (the tolerance); NO-GO, a drop beyond ``edge`` (the margin)."""
    import numpy as np

    w = sample.width
    gain = np.asarray(sample.differences, dtype=float) * (1.0 if higher_is_better else -1.0)
    if target == GO:  # H0: mean gain <= -tolerance
        x, m = (gain + w) / (2.0 * w), (w - edge) / (2.0 * w)
    else:  # H0: mean gain >= -margin
        x, m = (w - gain) / (2.0 * w), (w + edge) / (2.0 * w)
    x = np.clip(x, 0.0, 1.0)
    rng = np.random.default_rng([sample.seed, n_total])
    rows = max(1, CHUNK // n_total)
    hits = 0
    for start in range(0, DRAWS, rows):
        drawn = x[rng.integers(0, x.size, size=(min(rows, DRAWS - start), n_total))]
        hits += int(np.count_nonzero(betting.rejects(drawn, m, alpha, sample.truncation)))
    return hits / DRAWS


def _needed(sample: BettingSample, hib: bool, target: str, edge: float, n: int, alpha: float) -> int | None:
    """The smallest N (> n) the simulation shows reaching ``target`` with 80% probability; None past the cap."""
    def ok(total: int) -> bool:
        return reach(sample, hib, target, edge, total, alpha) >= POWER

    low, high = n, n + 1
    while not ok(high):
        low, high = high, 2 * high
        if high > MAX_SIMULATED:
            return None
    while high - low > max(1, int(0.02 * high)):
        mid = (low + high) // 2
        low, high = (low, mid) if ok(mid) else (mid, high)
    return high


def more_samples(sample: BettingSample, n: int, higher_is_better: bool, drop: float, margin: float,
                 tolerance: float, alpha: float, available: int | None = None) -> Advice | None:
    """The advice for an undecided betting verdict (``drop`` in points, positive is worse), or None when no claim
    is reachable or the differences never vary (resampling them shows nothing new)."""
    candidates = []
    if drop > margin:
        candidates.append((NO_GO, margin))
    if drop < tolerance:
        candidates.append((GO, tolerance))
    if not candidates or len(set(sample.differences)) < 2:
        return None
    found = [(_needed(sample, higher_is_better, target, edge, n, alpha), target) for target, edge in candidates]
    simulated = [(total, target) for total, target in found if total is not None]
    if simulated:
        total, target = min(simulated)
        return Advice(target, n, total, None, available, None)
    import numpy as np

    spread = float(np.std(sample.differences, ddof=1))
    crit = math.sqrt(2.0 * math.log(1.0 / alpha))
    advice = z_more_samples(drop, spread, n, margin, tolerance, alpha, available=available, crit=crit)
    if advice is None or advice.n_total is None or advice.n_total > MAX_SIMULATED:
        return advice
    return replace(advice, n_total=MAX_SIMULATED + 1)  # the simulation showed more than that
