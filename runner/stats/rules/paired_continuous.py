"""Paired continuous scores: the finite-sample betting test for bounded scores, the paired t-test for unbounded
ones, or (chosen) a seeded paired bootstrap; each side of the interval inverts its own test."""

from __future__ import annotations

import math
from dataclasses import replace
from collections.abc import Sequence

from runner.contract.errors import ConfigError
from runner.stats.data.claims import paired_claims
from runner.stats.data.paired_result import BettingSample, PairedResult
from runner.stats.data.pairing import is_binary, score_bounds
from runner.stats.numerics import betting, betting_order, t_skew
from runner.stats.numerics.normal import t_cdf, t_quantile, t_sf, z
from runner.stats.numerics.power import power_constant
from runner.stats.numerics.resampling import basic_bootstrap, bootstrap_means, check_resamples
from runner.stats.rules.base import AUTO, Case, Found
from runner.stats.data.claims import DeclaredRule
from runner.stats.numerics import betting_advice
from runner.stats.numerics.advice import Advice, AdviceCase

NO_CLAIM_UNBOUNDED = "no claim: unbounded scores under stats.paired_test=auto"
"""What the claims' method says when ``auto`` makes no claim on unbounded paired scores."""


CONTINUOUS_METHODS = ("betting", "t", "bootstrap")


BETTING = "paired betting test (Waudby-Smith & Ramdas)"


def continuous_method(requested: str, bounds: tuple[float, float] | None) -> str:
    """The continuous test that decides: ``requested``, or under auto the betting test for bounded scores and the
    t-test for unbounded ones; the betting test without bounds is a configuration error."""
    method = requested if requested not in AUTO else ("betting" if bounds else "t")
    if method == "betting" and bounds is None:
        raise ConfigError("the betting test needs bounded scores, and this task declares no score bounds",
                          where="stats.paired_test", given="betting",
                          fix="stats.paired_test=auto (the t-test for an unbounded metric such as perplexity)")
    return method


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
    ids: Sequence[str] | None = None,
) -> PairedResult:
    """One-sided paired test on per-sample score differences (ROUGE, perplexity; 0/100 with a tolerance).

    The differences ``new - ref`` are oriented so that negative means worse (their sign is
    flipped when lower is better), and ``tolerance`` (points, >= 0) is added to them. Regression
    gate, H0: the shifted mean is >= 0, rejected (a regression) when ``p < alpha``.
    Non-inferiority gate, H0: the shifted mean is <= 0, rejected (a pass) when ``p < alpha``.

    * ``method="betting"``: the finite-sample test of :mod:`runner.stats.numerics.betting` on the differences, which lie
      in ``[-w, w]`` with ``w = bounds[1] - bounds[0]`` (every score within ``bounds``); each end of the
      interval is the confidence bound that inverts its side's test. Its rate holds at any n, for sparse and
      skewed differences (the t-test's does not); differences that never vary cannot show a small tolerance
      below the n where a rare change the size of the range would have shown up. The differences are bet on in
      the order of the SHA-256 of their sample ``ids`` (:mod:`runner.stats.numerics.betting_order`; positions
      stand in for ids when none are given): the test holds for any order fixed before the scores are seen, one
      unrelated to the file's order keeps it holding when the dataset is sorted by subject or difficulty, and one
      fixed by the ids leaves no seed to retry (``seed`` does not enter the verdict);
      ``truncation``: the largest bet's share of the most the capital allows (:data:`runner.stats.numerics.betting.TRUNCATION`
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

    k = power_constant(alpha, beta)
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
    pinned = 0.0  # the t and bootstrap bounds invert their tests exactly: only the betting bound is pinned
    if method == "betting":
        name = BETTING
        p, ci, width, pinned = _betting(sign * diff, bounds, alpha, tolerance, regression, _order(ids, n), truncation)
        k = math.sqrt(2.0 * math.log(1.0 / alpha)) + abs(z(beta))
        ci = ci if sign > 0 else (-ci[1], -ci[0])
        ci_method = f"betting bounds, differences within +-{width:g}"
    elif method == "t":
        name = "paired t-test"
        if sd == 0.0:  # no spread seen: nothing about the mean is shown either way
            p, ci = 1.0, (-math.inf, math.inf)
        else:
            t_stat = mean_s / (sd / math.sqrt(n))
            p = t_cdf(t_stat, n - 1) if regression else t_sf(t_stat, n - 1)
            half = t_quantile(1 - alpha, n - 1) * sd / math.sqrt(n)
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
        pinned=pinned,
        betting=BettingSample(tuple(float(v) for v in diff), width, _truncation(truncation), seed)
        if method == "betting" else None,
    )


def _betting(gain, bounds: tuple[float, float] | None, alpha: float, tolerance: float,  # noqa: ANN001
             regression: bool, order: Sequence[int] | None = None,
             truncation: float | None = None) -> tuple[float, tuple[float, float], float, float]:
    """The betting test of the oriented differences ``gain`` (negative is worse) against ``-tolerance``, and the
    interval for the gain whose side of the test inverts it: ``(p, (low, high), w, pinned)``, ``w`` the score range,
    ``pinned`` how far that side was moved onto the side of ``-tolerance`` its test chose."""
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
    x = x[np.asarray(_order(None, x.size) if order is None else order, dtype=np.int64)]
    low = 2.0 * w * betting.lower_bound(x, alpha, c) - w
    high = w - 2.0 * w * betting.lower_bound(1.0 - x, alpha, c)
    if regression:  # H0: mean gain >= -tolerance, i.e. mean of 1 - x <= (w + tolerance) / (2 w)
        p = betting.upper_p(1.0 - x, (w + tolerance) / (2.0 * w), alpha, c)
        high, pinned = _pin(high, -tolerance, p < alpha, below=True)
    else:  # H0: mean gain <= -tolerance, i.e. mean of x <= (w - tolerance) / (2 w)
        p = betting.upper_p(x, (w - tolerance) / (2.0 * w), alpha, c)
        low, pinned = _pin(low, -tolerance, p < alpha, below=False)
    return p, (low, high), w, pinned


def _order(ids: Sequence[str] | None, n: int) -> list[int]:
    """The betting order: by the hash of the sample ids (of the positions when the caller has no ids)."""
    return betting_order.order([str(i) for i in (range(n) if ids is None else ids)])


def _truncation(truncation: float | None) -> float:
    return betting.check_truncation(betting.TRUNCATION if truncation is None else truncation)


def _pin(bound: float, edge: float, shown: bool, below: bool) -> tuple[float, float]:
    """A confidence bound kept on the side of ``edge`` its test decided (root finding may land a hair across), and
    how far it was moved."""
    tiny = 1e-9 * max(1.0, abs(edge))
    if below:
        pinned = min(bound, edge - tiny) if shown else max(bound, edge)
    else:
        pinned = max(bound, edge + tiny) if shown else min(bound, edge)
    return pinned, abs(pinned - bound)



class PairedContinuous:
    """The betting test decides bounded scores, the paired t-test unbounded ones (or, chosen, t or bootstrap); each
    side of the interval inverts its own test."""

    def applies(self, case: Case) -> str | None:
        method = case.stats.paired_test
        if method in CONTINUOUS_METHODS or method in AUTO and not is_binary(case.pairs):
            return None
        return f"stats.paired_test={method} on 0/100 scores (McNemar's rule)"

    def decide(self, case: Case) -> Found:
        p, pairs = case.params, case.pairs
        bounds = score_bounds(pairs, case.bounds)
        method = continuous_method(case.stats.paired_test, bounds)
        kw = dict(method=method, seed=case.stats.bootstrap_seed, bounds=bounds,
                  truncation=getattr(case.stats, "betting_truncation", None), ids=pairs.ids)
        result = paired_continuous(pairs.reference, pairs.new, p.alpha, p.beta, p.higher_is_better,
                                   tolerance=case.margin, gate="regression", **kw)
        within = paired_continuous(pairs.reference, pairs.new, p.alpha, p.beta, p.higher_is_better,
                                   tolerance=case.tolerance, gate="noninferiority", **kw)
        claims = paired_claims(result, within)
        if result.method != BETTING:
            case.notes.append(_asymptotic_note(case.stats.paired_test, bounds is not None))
        if bounds is None and case.stats.paired_test == "auto" and (claims.regression or claims.within):
            case.notes.append("no claim: the scores are unbounded and the t-test's rate is not held at every n (false "
                              "GO 0.10-0.13 with few changed samples, false NO-GO 0.12-0.13 with skewed differences); "
                              "declare the task's score bounds (the betting test then decides) or choose "
                              "stats.paired_test=t for the asymptotic verdict")
            claims = replace(claims, regression=False, within=False, method=f"{claims.method}; {NO_CLAIM_UNBOUNDED}")
            result = replace(result, passed=True)
        elif method == "t":
            claims, result = _skew_guard(claims, result, within.p_value, pairs, p, case)
        return Found(result, claims)

    def advise(self, case: AdviceCase) -> Advice | None:
        """A fixed-look betting verdict is sized by simulating the betting test; others from the differences' sd.
        No advice where no n makes a claim (unbounded scores under ``auto``: the note says what to choose)."""
        p = case.paired
        assert p is not None
        if NO_CLAIM_UNBOUNDED in case.claims_method:
            return None
        if p.betting is not None and p.design_effect is None and case.looks is None:
            return betting_advice.more_samples(p.betting, p.n, case.params.higher_is_better, case.drop, case.margin,
                                               case.tolerance, case.params.alpha)
        return case.more_samples((p.sd_diff or 0.0) * case.inflation, p.n)


def _skew_guard(claims, result: PairedResult, p_go: float, pairs, params, case: Case):  # noqa: ANN001, ANN202
    """The paired t-test's claims less those its skewness check withholds (:mod:`runner.stats.numerics.t_skew`)."""
    sign = 1.0 if params.higher_is_better else -1.0
    found = t_skew.check([sign * (b - a) for a, b in zip(pairs.reference, pairs.new)], params.alpha,
                         result.p_value, p_go, case.stats.t_skew_limit, case.stats.t_rare_share)
    no_go, go = claims.regression and found.withhold_no_go, claims.within and found.withhold_go
    if not (no_go or go):
        return claims, result
    case.notes.append(found.note(" and ".join(w for w, held in (("NO-GO", no_go), ("GO", go)) if held)))
    why = (f"too few samples (stats.t_rare_share: from {found.needed})" if found.too_few
           else "skewed differences (stats.t_skew_limit)")
    claims = replace(claims, regression=claims.regression and not no_go, within=claims.within and not go,
                     method=f"{claims.method}; withheld: {why}", least_n=found.needed if found.too_few else 0)
    return claims, (replace(result, passed=True, withheld=why) if no_go else result)


def _asymptotic_note(chosen: str, bounded: bool) -> str:
    """Why a continuous metric's verdict rests on a test whose alpha holds only for large n."""
    if bounded:
        return (f"stats.paired_test={chosen}: an asymptotic test; with few changed samples or skewed differences its "
                "false GO / NO-GO rate can exceed alpha (stats.paired_test=auto uses the finite-sample betting test)")
    return ("the task declares no score bounds (an unbounded metric): the paired t-test's figures, whose alpha holds "
            "only for large n; no test of an unbounded mean holds it at every n (Bahadur & Savage 1956)")

CLAIMS = (
    DeclaredRule("continuous: paired t, unbounded scores (stats.paired_test=t, asymptotic)",
                 "unbounded paired scores with stats.paired_test=t (auto makes no claim on them)",
                 ("NO-GO at drop = margin", "GO at drop = tolerance"), "the paired t interval"),
    DeclaredRule("continuous: paired betting (bounded 0-100)", "paired scores with known bounds, not all 0/100",
         ("NO-GO at drop = margin", "GO at drop = tolerance", "90% CI coverage", "advice reaches GO",
          "advice reaches NO-GO"),
         "the betting lower and upper bounds (Waudby-Smith & Ramdas 2024), each inverting its one-sided test"),
)
"""The rules of this module and their claims, as the calibration grid measures them."""


ADVICE_CLAIMS = (
    DeclaredRule("advice: fixed look (paired t rerun at N)", "INCONCLUSIVE at a fixed look", ("reaches its claim (80% stated)",),
         "none: a sample size"),
)
"""The rules of this module and their claims, as the calibration grid measures them."""

FLOOR_CLAIMS = (
    DeclaredRule("noise floor: paired t at max(margin, A/A floor)",
                 "a continuous paired rule whose reference entry has an A/A replicate (reference.floor=auto)",
                 ("NO-GO on an A/A run",), "the paired t bound, its NO-GO line raised to the floor"),
)
"""The noise floor's rule (runner/stats/dispatch.floored raises the NO-GO line) and its claim, as the noise family measures it."""
