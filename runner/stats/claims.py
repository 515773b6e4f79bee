"""The two claims of each statistical rule, with the interval that inverts them (runner.stats.verdicts).

* unpaired (TensorRT-LLM's z-test): the Wald interval ``diff +- |z(alpha)| sqrt(2 sigma^2 / n)``;
* paired 0/100 scores: the regression side is McNemar's exact test (margin 0, bound: the exact
  conditional bound of :func:`runner.stats.paired_binary.exact_upper`) or Tango's score test (margin
  > 0); the tolerance side is always Tango's score test, so zero discordant pairs do not prove a
  tolerance by themselves;
* paired continuous scores: the bounds that invert the paired betting (or t, or bootstrap) test, each side its own;
* sequential looks: the repeated confidence interval of the look where the job stopped (for 0/100
  scores its tolerance side is Tango's bound at that look's critical value).
"""

from __future__ import annotations

import math
from typing import Any

from runner.stats import paired_binary as pb
from runner.stats.unpaired import phi, z
from runner.stats.verdicts import Claims, oriented


def unpaired(verdict: Any, margin: float, tolerance: float) -> Claims:
    """TensorRT-LLM's test (``verdict``: :class:`runner.stats.unpaired.Verdict` decided at ``margin``)."""
    p = verdict.params
    sign = 1.0 if p.higher_is_better else -1.0
    gain, s, za = sign * verdict.difference, p.scale, abs(z(p.alpha))
    low, high = gain - za * s, gain + za * s
    ci = oriented(low, high, p.higher_is_better)
    return Claims(regression=not verdict.passed, within=low > -tolerance, low=ci[0], high=ci[1],
                  method="Wald, sigma as configured (inverts the z-test both ways)",
                  p_within=phi(-(gain + tolerance) / s))


def binary(b: int, c: int, n: int, alpha: float, higher_is_better: bool, margin: float, tolerance: float,
           regression: bool, z_crit: float | None = None) -> Claims:
    """Paired 0/100 scores: ``b`` samples the reference got right and the new run wrong, ``c`` the reverse.

    ``regression``: what the deciding regression test said; the interval's bound on that side is its
    inversion (exact conditional for margin 0, Tango's score bound otherwise). ``z_crit``: a critical
    value other than ``z(1 - alpha)`` (a sequential look's)."""

    delta0 = -tolerance / 100.0
    if z_crit is None:  # Tango's test backed by the exact unconditional one: false passes stay <= alpha
        p_within = max(pb.tango_p(b, c, n, delta0, "greater"), pb.go_p(b, c, n, delta0))
        within = p_within < alpha
        low = _pinned(pb.go_lower(b, c, n, alpha), delta0, within)
        good = "Tango score with exact unconditional check"
    else:
        low, good, p_within = pb.tango_bounds(b, c, n, z_crit)[0], "Tango score", None
        within = low > delta0
    if margin == 0 and z_crit is None:
        high, how = pb.exact_upper(b, c, n, alpha), "exact conditional (McNemar)"
    else:
        high, how = pb.tango_bounds(b, c, n, z(1 - alpha) if z_crit is None else z_crit)[1], "Tango score"
    ci = oriented(100.0 * low, 100.0 * high, higher_is_better)
    return Claims(regression=regression, within=within, low=ci[0], high=ci[1],
                  method=f"bad side: {how}; good side: {good}", p_within=p_within)


def _pinned(low: float, delta0: float, within: bool) -> float:
    """The GO bound, kept on the side of ``delta0`` that the GO test decided.

    The exact unconditional p-value is not monotone in ``delta0`` for a few tables, so its inverted bound
    can fall on the other side of the tolerance than the test at the tolerance itself; the test decides,
    and the printed bound is pinned to the tolerance then."""
    if within and low <= delta0:
        return delta0 + 1e-12
    if not within and low > delta0:
        return delta0
    return low


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
    decides both ways. ``counts``: (b, c, n) at that look for 0/100 scores, whose good side uses Tango's
    bound at the same critical value; None for the other kinds."""
    if rci is None or crit is None or not math.isfinite(crit):
        return None
    if counts is not None:
        b, c, n = counts
        claims = binary(b, c, n, alpha, higher_is_better, margin, tolerance, regression, z_crit=crit)
        gain_low = oriented(claims.low, claims.high, higher_is_better)[0]
        high = oriented(*rci, higher_is_better)[1]
        ci = oriented(gain_low, high, higher_is_better)
        return Claims(regression, claims.within, ci[0], ci[1],
                      "repeated CI, group-sequential; good side: Tango score at the look's bound", None)
    gain_low, _ = oriented(*rci, higher_is_better)
    return Claims(regression, gain_low > -tolerance, rci[0], rci[1], "repeated CI, group-sequential", None)
