"""Paired 0/100 scores: McNemar's exact test of the regression claim (Tango's score test with its exact
unconditional check at a margin), its minimum detectable drop and its printed outcome."""

from __future__ import annotations

import math
from collections.abc import Sequence

from runner.stats.data.paired_result import PairedResult, min_discordant_to_reject
from runner.stats.data.pairing import is_binary, score_bounds
from runner.stats.numerics.paired_binomial.claims import binary_claims
from runner.stats.rules.base import AUTO, Case, Found
from runner.stats.numerics.paired_binomial.sign_test import upper_tail_half
from runner.stats.numerics.paired_binomial.tango import regression_p
from runner.stats.numerics.advice import Advice, AdviceCase, binary_spread
from runner.stats.numerics.power import binary_theta, power_constant
from runner.stats.data.claims import DeclaredRule



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
    the exact unconditional test (:func:`runner.stats.numerics.paired_binomial.tango.regression_p`): both must reject.

    ``b`` = samples the reference got right and the new run wrong, ``c`` = the reverse ("right"
    is the high value, or the low one when ``higher_is_better`` is false). Regression gate:
    ``p = P(X >= b)`` with ``X ~ Bin(b + c, 1/2)``, a regression when ``p < alpha``. The
    non-inferiority gate with no tolerance asks the reverse: ``p = P(X <= b)``, a pass when
    ``p < alpha``. ``p = 1`` when ``b + c == 0``. Means and the difference
    are on the 0-100 scale (0/1 scores are read as fractions).
    """
    power_constant(alpha, beta)  # validates alpha and beta
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
        p = float(upper_tail_half(b, b + c))
    else:
        p = float(upper_tail_half(c, b + c))
    rate = (b + c) / n
    if b + c < min_discordant_to_reject(alpha):
        theta = math.inf
    else:
        theta = binary_theta(n, rate, alpha, beta, continuity=True, model="split")
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



class PairedBinary:
    """McNemar's exact test (Tango's with a margin) decides paired 0/100 scores; both bounds invert Tango's family."""

    def applies(self, case: Case) -> str | None:
        method = case.stats.paired_test
        if method == "mcnemar" or method in AUTO and is_binary(case.pairs):
            return None
        return f"stats.paired_test={method} on scores that are not all 0/100 or 0/1"

    def decide(self, case: Case) -> Found:
        p = case.params
        score_bounds(case.pairs, case.bounds)  # declared bounds are checked whatever the test
        result = mcnemar_exact(case.pairs.reference, case.pairs.new, p.alpha, p.beta, p.higher_is_better,
                               gate="regression", margin=case.margin)
        b, c = result.discordant
        return Found(result, binary_claims(b, c, result.n, p.alpha, p.higher_is_better, case.margin, case.tolerance,
                                           not result.passed))

    def advise(self, case: AdviceCase) -> Advice | None:
        """Sized from the observed spread of the 0/100 differences, with the exact tests' continuity term."""
        p = case.paired
        assert p is not None and p.discordant is not None
        spread, share = binary_spread(p.discordant[0], p.discordant[1], p.n)
        return case.more_samples(spread * case.inflation, p.n, discordance=share)

CLAIMS = (
    DeclaredRule("binary: McNemar exact (margin 0)", "paired 0/100 scores, stats.margin=0: the NO-GO claim",
         ("NO-GO at drop 0",), "NO-GO bound: the exact unconditional bound, pinned to McNemar's verdict"),
    DeclaredRule("binary: Tango + exact unconditional", "paired 0/100 scores: the GO claim, and NO-GO with a margin",
         ("GO at drop = tolerance", "NO-GO at drop = margin"),
         "the Buehler bounds of the exact unconditional test ordered by Tango's score bound"),
    DeclaredRule("binary: GO bound (one-sided 95%)", "printed with every paired 0/100 verdict", ("coverage",),
         "inverts the GO test at every delta"),
    DeclaredRule("binary: NO-GO bound (one-sided 95%)", "printed with every paired 0/100 verdict",
         ("coverage", "coverage (McNemar-pinned)"), "inverts the NO-GO test at every delta"),
)
"""The rules of this module and their claims, as the calibration grid measures them."""
