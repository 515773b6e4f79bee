"""The unpaired rule for 0/100 scores that holds alpha at every n (``stats.unpaired_test=exact``): the exact
unconditional test of two binomials (:mod:`runner.stats.numerics.two_binomials`) in place of TensorRT-LLM's
z-test, on the reference's count of good answers (its value times its n) and the run's.

Upstream's z-test stays the default: it reproduces TensorRT-LLM's verdicts on its own reference files, and its
excess over alpha at the run's n is printed beside it (:mod:`runner.stats.numerics.ztest_exact`). The exact rule
needs what it counts: the run's scores all 0 or 100, and a reference value that is a whole number of good answers
of its n (the entry's ``num_samples``, else the run's n, as upstream assumes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runner.contract.errors import ConfigError
from runner.stats.data.claims import Claims, DeclaredRule, oriented
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics import two_binomials, ztest_exact

TEST = "exact unconditional test of two binomials (score statistic)"


def counts(scores: Sequence[float], reference: float, n_ref: int, higher_is_better: bool) -> two_binomials.Table:
    """The table of good answers: the run's 0/100 scores and the reference's value as a count of its ``n_ref``."""
    values = [float(s) for s in scores]
    odd = sorted({v for v in values if v not in (0.0, 100.0)})[:3]
    if odd:
        raise ConfigError("the exact unpaired test counts 0/100 scores, and this run has other values",
                          where="stats.unpaired_test", given=f"exact, with scores such as {odd}",
                          fix="stats.unpaired_test=ztest (TensorRT-LLM's test), or a paired reference")
    good = 100.0 if higher_is_better else 0.0
    x_new = sum(1 for v in values if v == good)
    share = reference / 100.0 if higher_is_better else 1.0 - reference / 100.0
    x_ref = round(share * n_ref)
    if abs(share * n_ref - x_ref) > 1e-6 * max(1, n_ref):
        raise ConfigError("the reference value is not a whole number of good answers of its n",
                          where="stats.unpaired_test",
                          given=f"exact, reference {reference:g} on {n_ref} samples ({share * n_ref:.4f} answers)",
                          fix="record the reference's n (reference.mode=record), or stats.unpaired_test=ztest")
    return two_binomials.Table(x_new, len(values), x_ref, n_ref)


def claims(table: two_binomials.Table, params: HypothesisParams, margin: float, tolerance: float) -> tuple[Claims, float]:
    """Both claims (``margin`` and ``tolerance`` in points) and the regression p-value."""
    found = two_binomials.claims(table, margin / 100.0, tolerance / 100.0, params.alpha)
    low, high = oriented(-100.0 * found.high, -100.0 * found.low, params.higher_is_better)
    return Claims(regression=found.regression, within=found.within, low=low, high=high,
                  method=f"score bounds pinned to the {TEST}", p_within=found.p_within), found.p_regression


def excess_note(params: HypothesisParams, scores: Sequence[float], margin: float, tolerance: float) -> str | None:
    """For the z-test on 0/100 scores: each claim's exact rate at p = 0.5 beyond alpha at this n, when it exceeds
    it (None otherwise, or for other scores)."""
    if any(float(s) not in (0.0, 100.0) for s in scores):
        return None
    n = params.num_samples
    n_ref = params.reference_samples or n
    over = ztest_exact.excess(n, n_ref, params.sigma, params.alpha, margin, tolerance)
    if not over:
        return None
    parts = ", ".join(f"{claim} {params.alpha + x:.4f}" for claim, x in over.items())
    return (f"unpaired z-test on 0/100 scores at n={n}, n_ref={n_ref}: its exact false-claim rate at p = 0.5 exceeds "
            f"alpha {params.alpha:g} ({parts}; upstream's normal approximation on a lattice of counts); "
            "stats.unpaired_test=exact holds alpha at every n")


def decide(scored: Sequence[Any], reference: float, params: HypothesisParams, margin: float,
           tolerance: float) -> tuple[Claims, float]:
    """The exact rule on a job's scored samples against the reference value."""
    n_ref = params.reference_samples or params.num_samples
    table = counts([s.score for s in scored], reference, n_ref, params.higher_is_better)
    return claims(table, params, margin, tolerance)


CLAIMS = (
    DeclaredRule("unpaired exact unconditional (stats.unpaired_test=exact)",
                 "no per-sample reference scores, 0/100 scores, stats.unpaired_test=exact",
                 ("NO-GO at drop = margin (0)", "GO at drop = tolerance"),
                 "score bounds pinned to the exact test's verdicts"),
)
"""The rule of this module and its claims, as the calibration grid measures them."""
