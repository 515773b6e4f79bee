"""Paired 0/100 scores: both claims and the two one-sided bounds that invert Tango's score test backed by
its exact unconditional check (:mod:`runner.stats.numerics.paired_binomial.tango`)."""

from __future__ import annotations

from runner.stats.data.claims import Claims, oriented
from runner.stats.numerics.paired_binomial import tango as pb



def binary_claims(b: int, c: int, n: int, alpha: float, higher_is_better: bool, margin: float, tolerance: float,
           regression: bool) -> Claims:
    """Paired 0/100 scores: ``b`` samples the reference got right and the new run wrong, ``c`` the reverse.

    ``regression``: what the deciding regression test said (McNemar exact at margin 0, else
    :func:`runner.stats.numerics.paired_binomial.tango.regression_p`). Each bound is a one-sided ``1 - alpha`` bound that
    inverts Tango's score test backed by the exact unconditional one, the same family at every ``delta0``
    (GO side: :func:`~runner.stats.numerics.paired_binomial.tango.go_lower`; NO-GO side: its mirror
    :func:`~runner.stats.numerics.paired_binomial.tango.regression_upper`), so each covers the true difference with
    probability >= 1 - alpha whatever it is; each is then pinned to the side of its threshold that the
    deciding test chose (McNemar's at margin 0). A sequential look's claims are Tango's score bounds at the look's
    critical value (:func:`runner.stats.conclusion.look_claims`)."""

    delta0, margin0 = -tolerance / 100.0, -margin / 100.0
    p_within, go_low, no_go_high = pb.claim_bounds(b, c, n, alpha, delta0, margin0)
    within = p_within < alpha
    low, moved_go = _pinned(go_low, delta0, within, above=True)
    high, moved_no_go = _pinned(no_go_high, margin0, regression, above=False)
    method = "one-sided bounds inverting Tango's score test with its exact unconditional check" + (
        "; NO-GO decided by McNemar exact, its bound pinned to that verdict at 0" if margin == 0 else "")
    ci = oriented(100.0 * low, 100.0 * high, higher_is_better)
    return Claims(regression=regression, within=within, low=ci[0], high=ci[1], method=method, p_within=p_within,
                  moved_go=100.0 * moved_go, moved_no_go=100.0 * moved_no_go)


def _pinned(bound: float, threshold: float, shown: bool, above: bool) -> tuple[float, float]:
    """A bound kept on the side of its threshold that the deciding test chose (``above``: the claim is shown
    when the bound is above the threshold, a GO bound; else below, a NO-GO bound).

    McNemar's exact test at margin 0 is not the family the bound inverts, so that bound can fall on the other
    side of the threshold than the test; the test decides, and the bound is moved to the threshold (just past
    it when the claim was shown). The Tango + exact bounds invert their tests at every ``delta``
    (:mod:`runner.stats.numerics.paired_binomial.unconditional`): for them this only settles a bound equal to its
    threshold. Returns the bound and how far it was moved (proportion units)."""
    sign = 1.0 if above else -1.0
    past = sign * (bound - threshold) > 0
    if shown and not past:
        pinned = threshold + sign * 1e-12
    elif not shown and past:
        pinned = threshold
    else:
        return bound, 0.0
    return pinned, abs(pinned - bound)
