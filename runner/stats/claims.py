"""The two claims of each statistical rule, with the two one-sided bounds that invert them (runner.stats.verdicts).

* unpaired (TensorRT-LLM's z-test): the Wald interval ``diff +- |z(alpha)| scale`` (``sqrt(2 sigma^2 / n)``,
  or ``sigma sqrt(1/n + 1/n_ref)`` for a reference measured on another n);
* paired 0/100 scores: the regression claim is McNemar's exact test (margin 0) or Tango's score test
  backed by the exact unconditional one (margin > 0), the tolerance claim the latter at the tolerance,
  so zero discordant pairs do not prove a tolerance by themselves; both bounds invert the latter family;
* paired continuous scores: the bounds that invert the paired betting (or t, or bootstrap) test, each side its own;
* sequential looks: the repeated confidence interval of the look where the job stopped (for 0/100
  scores its tolerance side is Tango's bound at that look's critical value).
"""

from __future__ import annotations

import math
from typing import Any

from runner.stats.binary import tango as pb
from runner.stats.unpaired.ztest import phi, z
from runner.stats.verdicts import Claims, oriented


def unpaired(verdict: Any, margin: float, tolerance: float) -> Claims:
    """TensorRT-LLM's test (``verdict``: :class:`runner.stats.unpaired.ztest.Verdict` decided at ``margin``)."""
    p = verdict.params
    sign = 1.0 if p.higher_is_better else -1.0
    gain, s, za = sign * verdict.difference, p.scale, abs(z(p.alpha))
    low, high = gain - za * s, gain + za * s
    ci = oriented(low, high, p.higher_is_better)
    return Claims(regression=not verdict.passed, within=low > -tolerance, low=ci[0], high=ci[1],
                  method=f"Wald, sigma as configured, {p.scale_formula} (inverts the z-test both ways)",
                  p_within=phi(-(gain + tolerance) / s))


def binary(b: int, c: int, n: int, alpha: float, higher_is_better: bool, margin: float, tolerance: float,
           regression: bool, z_crit: float | None = None) -> Claims:
    """Paired 0/100 scores: ``b`` samples the reference got right and the new run wrong, ``c`` the reverse.

    ``regression``: what the deciding regression test said (McNemar exact at margin 0, else
    :func:`runner.stats.binary.tango.regression_p`). Each bound is a one-sided ``1 - alpha`` bound that
    inverts Tango's score test backed by the exact unconditional one, the same family at every ``delta0``
    (GO side: :func:`~runner.stats.binary.tango.go_lower`; NO-GO side: its mirror
    :func:`~runner.stats.binary.tango.regression_upper`), so each covers the true difference with
    probability >= 1 - alpha whatever it is; each is then pinned to the side of its threshold that the
    deciding test chose (McNemar's at margin 0). ``z_crit``: a critical value other than
    ``z(1 - alpha)`` (a sequential look's): Tango's score bounds at it, both sides."""

    delta0, margin0 = -tolerance / 100.0, -margin / 100.0
    if z_crit is None:
        p_within = pb.go_test_p(b, c, n, delta0, alpha)
        within = p_within < alpha
        low = _pinned(pb.go_lower(b, c, n, alpha, delta0), delta0, within, above=True)
        high = _pinned(pb.regression_upper(b, c, n, alpha, margin0), margin0, regression, above=False)
        method = "one-sided bounds inverting Tango's score test with its exact unconditional check" + (
            "; NO-GO decided by McNemar exact, its bound pinned to that verdict at 0" if margin == 0 else "")
    else:
        low, high = pb.tango_bounds(b, c, n, z_crit)
        p_within, within = None, low > delta0
        method = "Tango score at the look's critical value"
    ci = oriented(100.0 * low, 100.0 * high, higher_is_better)
    return Claims(regression=regression, within=within, low=ci[0], high=ci[1], method=method, p_within=p_within)


def _pinned(bound: float, threshold: float, shown: bool, above: bool) -> float:
    """A bound kept on the side of its threshold that the deciding test chose (``above``: the claim is shown
    when the bound is above the threshold, a GO bound; else below, a NO-GO bound).

    McNemar's exact test at margin 0 is not the family the bound inverts, so that bound can fall on the other
    side of the threshold than the test; the test decides, and the bound is moved to the threshold (just past
    it when the claim was shown). The Tango + exact bounds invert their tests at every ``delta``
    (:mod:`runner.stats.binary.unconditional`): for them this only settles a bound equal to its threshold."""
    sign = 1.0 if above else -1.0
    past = sign * (bound - threshold) > 0
    if shown and not past:
        return threshold + sign * 1e-12
    if not shown and past:
        return threshold
    return bound


def continuous(result: Any, within_result: Any) -> Claims:
    """Paired betting, t or bootstrap: ``result`` tested the margin, ``within_result`` the tolerance; each side of
    the interval is the bound that inverts its own test (the bad side from ``result``, the good side from
    ``within_result``)."""
    hib = result.higher_is_better
    gain_low = oriented(*within_result.ci, hib)[0]
    gain_high = oriented(*result.ci, hib)[1]
    low, high = oriented(gain_low, gain_high, hib)
    return Claims(regression=not result.passed, within=within_result.passed, low=low, high=high,
                  method=f"{result.ci_method} (both sides)", p_within=within_result.p_value)


def sequential(regression: bool, crit: float | None, rci: tuple[float, float] | None, higher_is_better: bool,
               alpha: float, margin: float, tolerance: float, counts: tuple[int, int, int] | None) -> Claims | None:
    """A look of a sequential or extendable job: its repeated interval (``rci`` at critical value ``crit``)
    decides both ways. ``counts``: (b, c, n) at that look for 0/100 scores, whose two sides are Tango's
    bounds at the same critical value (the look's statistic is Tango's at the margin, so the bad side is
    below ``-margin`` exactly when the look showed a regression); None for the other kinds."""
    if rci is None or crit is None or not math.isfinite(crit):
        return None
    if counts is not None:
        b, c, n = counts
        claims = binary(b, c, n, alpha, higher_is_better, margin, tolerance, regression, z_crit=crit)
        return Claims(regression, claims.within, claims.low, claims.high,
                      "repeated CI, group-sequential: Tango score at the look's bound", None)
    gain_low, _ = oriented(*rci, higher_is_better)
    return Claims(regression, gain_low > -tolerance, rci[0], rci[1], "repeated CI, group-sequential", None)
