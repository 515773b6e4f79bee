"""Paired tests: the reference run and the new run answered the *same* samples.

TensorRT-LLM's test (:mod:`runner.stats.unpaired.ztest`) treats the two runs as independent samples, so the
difference of their means has standard deviation ``sqrt(2 sigma^2 / n)``. When both runs
answer the same questions, most answers agree, and only the disagreements carry information
about a regression. A paired test looks at those alone and detects the same drop with several
times fewer samples.

* Binary scores (0/100, or 0/1): McNemar's exact test. ``b`` counts samples the reference got
  right and the new run got wrong, ``c`` the reverse. Under H0 ("no regression") each of the
  ``b + c`` discordant samples is equally likely to fall either way, so the one-sided p-value is
  ``P(X >= b)`` with ``X ~ Bin(b + c, 1/2)``; a regression is flagged when ``p < alpha``.
* Continuous scores: for bounded ones (ROUGE, F1, a rate over variants) the finite-sample betting test of
  :mod:`runner.stats.continuous.betting`; for unbounded ones (per-document perplexity) a one-sided paired t-test, whose
  rate holds only asymptotically; or, chosen, the t-test or a seeded paired bootstrap.

Minimum detectable effect (``theta``) of the binary test, on the 0-100 scale, with discordance
rate ``d = (b + c) / n`` (planning: ``d = 1 - agreement``) and ``k = |z(alpha)| + |z(beta)|``::

    theta = 100 * (k * sqrt(d / n) + 1 / n)

The first term is the normal approximation of McNemar's statistic. The ``1 / n`` term is the
continuity correction: the exact test is discrete and conservative (its false-alarm rate is
below alpha), and without the correction its power at the uncorrected theta is only about
0.75-0.78 instead of 0.80 for the sample sizes the tasks use. With it, the power at theta is at
least ``1 - beta`` (checked by Monte Carlo in ``tests/stats/test_simulation.py``). Pass
``continuity=False`` for the plain normal-approximation figure.

A paired theta assumes the runs keep disagreeing on a fraction ``d`` of the samples. A drop of
``theta`` points changes at least ``theta`` percent of the answers, so ``theta <= 100 d`` must
hold for the figure to mean anything (:func:`paired_feasible`).

The runs' scores are matched by :mod:`runner.stats.pairing`; the outcome and its printed form are
:class:`runner.stats.paired_result.PairedResult`. numpy and scipy are imported inside the functions
that need them, so importing this module (and ``python -m runner.plan --help``) stays fast.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from runner.contract.errors import ConfigError
from runner.stats.binary.tango import regression_p
from runner.stats.continuous import betting
from runner.stats.paired_result import BettingSample, PairedResult, min_discordant_to_reject
from runner.stats.pairing import PairedScores, is_binary
from runner.stats.planning import _binary_theta, _k
from runner.stats.unpaired.ztest import z

CONTINUOUS_METHODS = ("betting", "t", "bootstrap")
BETTING = "paired betting test (Waudby-Smith & Ramdas)"


def _z(p: float) -> float:
    return z(p)


def _upper_tail_half(b, m):  # noqa: ANN001, ANN202 - scalars or numpy arrays
    """``P(X >= b)`` for ``X ~ Bin(m, 1/2)``; 1 when ``m == 0``. Vectorized (used by runner.stats.simulate)."""
    from scipy import stats

    return stats.binom.sf(b - 1, m, 0.5)


def _binary_values(ref: Sequence[float], new: Sequence[float]) -> tuple[list[float], list[float], float]:
    ref_v = [float(v) for v in ref]
    new_v = [float(v) for v in new]
    if len(ref_v) != len(new_v):
        raise ValueError(f"paired scores need equal lengths, got {len(ref_v)} and {len(new_v)}")
    if not ref_v:
        raise ValueError("a paired test needs at least one sample")
    values = set(ref_v) | set(new_v)
    if values <= {0.0, 1.0}:
        unit = 1.0
    elif values <= {0.0, 100.0}:
        unit = 100.0
    else:
        odd = sorted(values - {0.0, 1.0, 100.0})[:3] or sorted(values)
        raise ValueError(
            f"McNemar's test needs binary scores (all 0/100 or all 0/1), got values such as {odd}; "
            "use paired_continuous for continuous metrics"
        )
    return ref_v, new_v, unit


def mcnemar_exact(
    ref_correct: Sequence[float],
    new_correct: Sequence[float],
    alpha: float,
    beta: float,
    higher_is_better: bool = True,
    gate: str = "regression",
    margin: float = 0.0,
) -> PairedResult:
    """McNemar's exact one-sided test on binary per-sample scores (0/100 or 0/1, or booleans).

    With a ``margin`` (points, > 0; regression gate only) the regression claim "drop > margin" is
    tested with Tango's (1998) score test for paired proportions instead, which has a margin, backed by
    the exact unconditional test (:func:`runner.stats.binary.tango.regression_p`): both must reject.

    ``b`` = samples the reference got right and the new run wrong, ``c`` = the reverse ("right"
    is the high value, or the low one when ``higher_is_better`` is false). Regression gate:
    ``p = P(X >= b)`` with ``X ~ Bin(b + c, 1/2)``, a regression when ``p < alpha``. The
    non-inferiority gate with no tolerance asks the reverse: ``p = P(X <= b)``, a pass when
    ``p < alpha``. ``p = 1`` when ``b + c == 0``. Means and the difference
    are on the 0-100 scale (0/1 scores are read as fractions).
    """
    _k(alpha, beta)  # validates alpha and beta
    ref_v, new_v, unit = _binary_values(ref_correct, new_correct)
    good = unit if higher_is_better else 0.0
    b = sum(1 for r, w in zip(ref_v, new_v) if r == good and w != good)
    c = sum(1 for r, w in zip(ref_v, new_v) if r != good and w == good)
    n = len(ref_v)
    if margin:
        if gate != "regression":
            raise ValueError("a margin belongs to the regression claim (gate 'regression')")

        p = regression_p(b, c, n, -margin / 100.0, alpha)
    elif b + c == 0:
        p = 1.0
    elif gate == "regression":
        p = float(_upper_tail_half(b, b + c))
    else:
        p = float(_upper_tail_half(c, b + c))
    rate = (b + c) / n
    if b + c < min_discordant_to_reject(alpha):
        theta = math.inf
    else:
        theta = _binary_theta(n, rate, alpha, beta, continuity=True, model="split")
    to_points = 100.0 / unit
    ref_mean = sum(ref_v) / n * to_points
    new_mean = sum(new_v) / n * to_points
    return PairedResult.gated(
        p, alpha, beta, higher_is_better, gate, margin,
        method=f"Tango score test with exact unconditional check (margin {margin:g})" if margin else "McNemar exact",
        n=n,
        mean_diff=new_mean - ref_mean,
        theta_paired=theta,
        reference_mean=ref_mean,
        new_mean=new_mean,
        discordant=(b, c),
        discordance_rate=rate,
    )


def paired_continuous(
    ref: Sequence[float],
    new: Sequence[float],
    alpha: float,
    beta: float,
    higher_is_better: bool = True,
    method: str = "t",
    seed: int = 0,
    n_boot: int = 10_000,
    tolerance: float = 0.0,
    gate: str = "regression",
    bounds: tuple[float, float] | None = None,
    truncation: float | None = None,
) -> PairedResult:
    """One-sided paired test on per-sample score differences (ROUGE, perplexity; 0/100 with a tolerance).

    The differences ``new - ref`` are oriented so that negative means worse (their sign is
    flipped when lower is better), and ``tolerance`` (points, >= 0) is added to them. Regression
    gate, H0: the shifted mean is >= 0, rejected (a regression) when ``p < alpha``.
    Non-inferiority gate, H0: the shifted mean is <= 0, rejected (a pass) when ``p < alpha``.

    * ``method="betting"``: the finite-sample test of :mod:`runner.stats.continuous.betting` on the differences, which lie
      in ``[-w, w]`` with ``w = bounds[1] - bounds[0]`` (every score within ``bounds``); each end of the
      interval is the confidence bound that inverts its side's test. Its rate holds at any n, for sparse and
      skewed differences (the t-test's does not); differences that never vary cannot show a small tolerance
      below the n where a rare change the size of the range would have shown up. The differences are bet on in
      an order drawn by a generator seeded by ``seed`` (the test holds for any order fixed before the scores
      are seen; a random one makes it hold when the dataset is sorted, by subject or by difficulty);
      ``truncation``: the largest bet's share of the most the capital allows (:data:`runner.stats.continuous.betting.TRUNCATION`
      when None).
    * ``method="t"``: paired t-test; interval ``mean +- t_{1-alpha, n-1} sd / sqrt(n)``. Its rate holds only
      asymptotically; the one rule for unbounded scores (no finite-sample test of a mean exists for them:
      Bahadur & Savage 1956). Differences that do not vary (``sd = 0``) show nothing: ``p = 1``, no interval.
    * ``method="bootstrap"``: the shifted differences are centred on 0 (H0) and resampled
      ``n_boot`` times with a generator seeded by ``seed``;
      ``p = (1 + #{resampled mean <= observed mean}) / (n_boot + 1)`` (``>=`` for
      non-inferiority); the interval is the basic bootstrap interval of the same resampled means
      (``2 mean - `` their order statistics), at the order statistic that makes it invert the
      p-value exactly: oriented as ``sign * (new - reference)``, its upper end is below
      ``-tolerance`` iff the regression p-value is below alpha, and its lower end above
      ``-tolerance`` iff the non-inferiority p-value is.

    ``theta_paired = (|z(alpha)| + |z(beta)|) * sd(diff) / sqrt(n)`` (the betting test's critical value is
    ``sqrt(2 log(1 / alpha))`` in place of ``|z(alpha)|``, its large-n width).
    """
    import numpy as np

    k = _k(alpha, beta)
    if method not in CONTINUOUS_METHODS:
        raise ValueError(f"method must be one of {', '.join(CONTINUOUS_METHODS)}, got {method!r}")
    r = np.asarray([float(v) for v in ref], dtype=float)
    w = np.asarray([float(v) for v in new], dtype=float)
    if r.shape != w.shape:
        raise ValueError(f"paired scores need equal lengths, got {r.size} and {w.size}")
    n = int(r.size)
    if n < 2:
        raise ValueError(f"a paired continuous test needs at least 2 samples, got {n}")
    if not (np.all(np.isfinite(r)) and np.all(np.isfinite(w))):
        raise ValueError("paired scores must be finite numbers")
    diff = w - r
    sign = 1.0 if higher_is_better else -1.0
    shifted = sign * diff + tolerance
    mean_s = float(shifted.mean())
    mean_d = float(diff.mean())
    sd = float(diff.std(ddof=1))
    regression = gate == "regression"
    if method == "betting":
        name = BETTING
        p, ci, width = _betting(sign * diff, bounds, alpha, tolerance, regression, seed, truncation)
        k = math.sqrt(2.0 * math.log(1.0 / alpha)) + abs(_z(beta))
        ci = ci if sign > 0 else (-ci[1], -ci[0])
        ci_method = f"betting bounds, differences within +-{width:g}"
    elif method == "t":
        name = "paired t-test"
        from scipy import stats

        if sd == 0.0:  # no spread seen: nothing about the mean is shown either way
            p, ci = 1.0, (-math.inf, math.inf)
        else:
            t_stat = mean_s / (sd / math.sqrt(n))
            p = float(stats.t.cdf(t_stat, n - 1) if regression else stats.t.sf(t_stat, n - 1))
            half = float(stats.t.ppf(1 - alpha, n - 1)) * sd / math.sqrt(n)
            ci = (mean_d - half, mean_d + half)
        ci_method = "paired t"
    else:
        name = "paired bootstrap"
        check_resamples(n_boot)
        means = bootstrap_means(diff, n_boot, seed)
        p, ci = basic_bootstrap(mean_d, means, sign, tolerance, alpha, regression,
                                1e-12 * max(1.0, float(np.abs(shifted).max())))
        ci_method = "bootstrap basic (inverts the shift p-value)"
    return PairedResult.gated(
        p, alpha, beta, higher_is_better, gate, tolerance,
        method=name,
        n=n,
        mean_diff=mean_d,
        theta_paired=k * sd / math.sqrt(n),
        reference_mean=float(r.mean()),
        new_mean=float(w.mean()),
        sd_diff=sd,
        ci=ci,
        ci_method=ci_method,
        betting=BettingSample(tuple(float(v) for v in diff), width, _truncation(truncation), seed)
        if method == "betting" else None,
    )


def _betting(gain, bounds: tuple[float, float] | None, alpha: float, tolerance: float,  # noqa: ANN001
             regression: bool, seed: int = 0,
             truncation: float | None = None) -> tuple[float, tuple[float, float], float]:
    """The betting test of the oriented differences ``gain`` (negative is worse) against ``-tolerance``, and the
    interval for the gain whose side of the test inverts it: ``(p, (low, high), w)``, ``w`` the score range."""
    import numpy as np

    if bounds is None:
        raise ValueError("the betting test needs the scores' bounds (the task's score_bounds)")
    lo, hi = (float(b) for b in bounds)
    w = hi - lo
    if not (math.isfinite(w) and w > 0):
        raise ValueError(f"score bounds must be finite with low < high, got {bounds!r}")
    if not 0 <= tolerance < w:
        raise ValueError(f"the tolerance must be within [0, {w:g}) for scores within {bounds!r}, got {tolerance!r}")
    c = _truncation(truncation)
    x = np.clip((np.asarray(gain, dtype=float) + w) / (2.0 * w), 0.0, 1.0)
    x = x[np.random.default_rng(seed).permutation(x.size)]
    low = 2.0 * w * betting.lower_bound(x, alpha, c) - w
    high = w - 2.0 * w * betting.lower_bound(1.0 - x, alpha, c)
    if regression:  # H0: mean gain >= -tolerance, i.e. mean of 1 - x <= (w + tolerance) / (2 w)
        p = betting.upper_p(1.0 - x, (w + tolerance) / (2.0 * w), alpha, c)
        high = _pin(high, -tolerance, p < alpha, below=True)
    else:  # H0: mean gain <= -tolerance, i.e. mean of x <= (w - tolerance) / (2 w)
        p = betting.upper_p(x, (w - tolerance) / (2.0 * w), alpha, c)
        low = _pin(low, -tolerance, p < alpha, below=False)
    return p, (low, high), w


def _truncation(truncation: float | None) -> float:
    return betting.check_truncation(betting.TRUNCATION if truncation is None else truncation)


def _pin(bound: float, edge: float, shown: bool, below: bool) -> float:
    """A confidence bound kept on the side of ``edge`` its test decided (root finding may land a hair across)."""
    tiny = 1e-9 * max(1.0, abs(edge))
    if below:
        return min(bound, edge - tiny) if shown else max(bound, edge)
    return max(bound, edge + tiny) if shown else min(bound, edge)


def check_bounds(scores, bounds: tuple[float, float]) -> None:  # noqa: ANN001
    """Every score lies within the task's declared bounds (a score outside them voids the betting test)."""
    import numpy as np

    arr = np.asarray(scores, dtype=float)
    lo, hi = bounds
    if arr.size and (arr.min() < lo or arr.max() > hi):
        raise ValueError(f"per-sample scores must lie within the task's score bounds [{lo:g}, {hi:g}], got values "
                         f"from {arr.min():g} to {arr.max():g}")


def check_resamples(n_boot: int) -> None:
    """A bootstrap's number of resamples is a whole number >= 1."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot must be a whole number >= 1, got {n_boot!r}")


def basic_bootstrap(observed: float, replicates, sign: float, tolerance: float, alpha: float,  # noqa: ANN001
                    regression: bool, slack: float) -> tuple[float, tuple[float, float]]:
    """The p-value and two-sided interval (new - reference) of the basic bootstrap, from one set of replicates
    of the difference: the interval is the order statistic at which it inverts the p-value exactly.

    The basic replicates of the oriented difference are ``sign * (2 observed - replicate)``; a resample is as
    extreme as the observed difference under H0 exactly when its basic replicate is on the far side of
    ``-tolerance``, so ``p = (1 + that count) / (n + 1)``. ``slack`` (tiny) keeps float ties on the H0 side."""
    import numpy as np

    n_boot = int(np.size(replicates))
    basic = sign * (2.0 * observed - np.asarray(replicates, dtype=float))
    high, low = basic + slack, basic - slack
    extreme = int(np.count_nonzero(high >= -tolerance)) if regression else int(np.count_nonzero(low <= -tolerance))
    p = (1 + extreme) / (n_boot + 1)
    # k = most extreme replicates p can count and still be < alpha; the (k+1)-th replicate from each end is the
    # bound: p < alpha iff (k+1)-th largest of high < -tolerance (regression) or (k+1)-th smallest of low > it
    k = int(alpha * (n_boot + 1)) + 1
    while k >= 0 and not (1 + k) / (n_boot + 1) < alpha:
        k -= 1
    if k < 0:
        lo_o, hi_o = -math.inf, math.inf
    else:
        lo_o = float(np.partition(low, k)[k])
        hi_o = float(-np.partition(-high, k)[k])
    return p, ((lo_o, hi_o) if sign > 0 else (-hi_o, -lo_o))


def bootstrap_means(values, n_boot: int, seed: int):  # noqa: ANN001, ANN201 - numpy array in and out
    """Means of ``n_boot`` resamples (with replacement) of ``values``, from a generator seeded by ``seed``."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    n = values.size
    rng = np.random.default_rng(seed)
    out = np.empty(n_boot)
    chunk = max(1, (1 << 20) // n)
    done = 0
    while done < n_boot:
        rows = min(chunk, n_boot - done)
        out[done:done + rows] = values[rng.integers(0, n, size=(rows, n))].mean(axis=1)
        done += rows
    return out


def paired_test(
    pairs: PairedScores,
    alpha: float,
    beta: float,
    higher_is_better: bool = True,
    method: str = "auto",
    seed: int = 0,
    tolerance: float = 0.0,
    gate: str = "regression",
    bounds: tuple[float, float] | None = None,
    truncation: float | None = None,
) -> PairedResult:
    """Run the fitting paired test: McNemar for binary scores, the betting test for other bounded scores, the
    t-test for unbounded ones.

    ``method`` is ``"auto"``, ``"mcnemar"``, ``"betting"``, ``"t"`` or ``"bootstrap"``. For binary scores a
    ``tolerance`` (the regression margin) moves McNemar's exact test to Tango's score test, which
    tests a shifted difference of paired proportions. ``bounds``: the range every per-sample score lies in
    (the task's ``score_bounds``); None: unbounded or unknown, except that binary scores are within [0, 100]
    (or [0, 1]).
    """
    bounds = score_bounds(pairs, bounds)
    if method == "auto":
        method = "mcnemar" if is_binary(pairs) else ("betting" if bounds is not None else "t")
    if method == "mcnemar":
        return mcnemar_exact(pairs.reference, pairs.new, alpha, beta, higher_is_better, gate=gate, margin=tolerance)
    if method == "betting" and bounds is None:
        raise ConfigError("the betting test needs bounded scores, and this task declares no score bounds",
                          where="stats.paired_test", given="betting",
                          fix="stats.paired_test=auto (the t-test for an unbounded metric such as perplexity)")
    return paired_continuous(pairs.reference, pairs.new, alpha, beta, higher_is_better, method=method, seed=seed,
                             tolerance=tolerance, gate=gate, bounds=bounds, truncation=truncation)


def score_bounds(pairs: PairedScores, declared: tuple[float, float] | None) -> tuple[float, float] | None:
    """The bounds the paired scores lie in: the task's declared ones (checked), else [0, 100] or [0, 1] for
    binary scores (the McNemar rule reads them as such too), else None."""
    if declared is not None:
        check_bounds([*pairs.reference, *pairs.new], declared)
        return (float(declared[0]), float(declared[1]))
    if is_binary(pairs):
        values = set(pairs.reference) | set(pairs.new)
        return (0.0, 1.0) if values <= {0.0, 1.0} else (0.0, 100.0)
    return None
