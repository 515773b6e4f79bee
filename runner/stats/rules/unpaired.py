"""The unpaired rule of the precedence table: it decides when the reference's per-sample scores do not pair with the
run's (none recorded, another subset, or ``stats.method=unpaired``). TensorRT-LLM's z-test on the reference value
decides by default (:mod:`runner.stats.numerics.ztest`), its claims the Wald bound inverted; it reproduces
upstream's verdicts on its own reference files, and its excess over alpha at the run's n is printed beside it on
0/100 scores (:mod:`runner.stats.numerics.ztest_exact`).

``stats.unpaired_test=exact`` holds alpha at every n for 0/100 scores: the exact unconditional test of two binomials
(:mod:`runner.stats.numerics.two_binomials`) on the reference's count of good answers (its value times its n) and
the run's. It needs what it counts: the run's scores all 0 or 100, and a reference value that is a whole number of
good answers of its n (the entry's ``num_samples``, else the run's n, as upstream assumes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dataclasses import replace

from runner.contract.errors import ConfigError
from runner.stats.data import pairing
from runner.stats.data.claims import Claims, DeclaredRule, oriented
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics import cluster_claims, two_binomials, ztest_exact
from runner.stats.numerics.ztest import unpaired_claims
from runner.stats.rules.base import EntryCase, Outcome, reported
from runner.stats.numerics.advice import Advice, AdviceCase

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


class Unpaired:
    """The per-sample rule without pairs: the z-test, or the exact test under ``stats.unpaired_test=exact``."""

    def applies(self, entry: EntryCase) -> str | None:
        return None

    def decide(self, entry: EntryCase) -> Outcome:
        report = reported(entry)
        e, verdict, deff = report.entry, report.verdict, report.design_effect
        assert e.tolerance is not None
        stats, notes, margin, tolerance = e.stats, e.notes, e.margin, e.tolerance.points
        if e.rows is not None:
            if e.pairing_problem is not None:
                pairing.unpaired_because(e.pairing_problem, stats.method, e.reference, "per-sample scores", notes)
            else:
                new_scores = {s.sample_id: s.score for s in e.scored}
                pairs = pairing.pair_scores({k: r.score for k, r in e.rows.items()}, new_scores)
                notes.append(f"unpaired test: only {pairs.n_matched} of {len(new_scores)} samples have reference "
                             "scores (another subset); stats.method=paired uses the matched ones")
        elif stats.method == "paired":
            raise ConfigError("a paired test needs the reference's per-sample scores, and this entry has none",
                              where=f"{e.reference.path} entry {e.reference.index}", given="stats.method=paired",
                              fix="record the reference again with reference.mode=record, or use "
                                  "stats.method=auto|unpaired")
        exact = getattr(stats, "unpaired_test", "ztest") == "exact"
        if exact:
            if deff is not None:
                raise ConfigError("the exact unpaired test treats samples as independent, and this job clusters them",
                                  where="stats.unpaired_test", given=f"exact with stats.cluster=auto ({e.cluster_key})",
                                  fix="stats.cluster=off, or stats.unpaired_test=ztest (its sigma carries the design "
                                      "effect)")
            claims, p_regression = decide(e.scored, e.reference.value, e.params, margin, tolerance)
            verdict = replace(verdict, passed=not claims.regression, p_value=p_regression)
            notes.append(f"unpaired rule: the {TEST} decides both claims (stats.unpaired_test=exact); "
                         "the z-test's threshold is shown for comparison")
        else:
            claims = unpaired_claims(verdict, margin, tolerance)
            if deff is not None and deff.applied != 1.0:
                claims = replace(claims, method="Wald, sigma x sqrt(design effect) (inverts the z-test both ways)")
            excess = excess_note(e.params, [s.score for s in e.scored], margin, tolerance)
            if excess is not None and deff is None:
                notes.append(excess)
        shown = claims.regression
        claims = cluster_claims.too_few(claims, deff, stats, notes, paired=False)
        return Outcome("unpaired", verdict.passed or shown != claims.regression, verdict, None, claims,
                       clustering=deff, unpaired_test=TEST if exact else None, advisor=self)

    def advise(self, case: AdviceCase) -> Advice | None:
        """Sized from sigma against the reference's fixed n (which may leave no n that decides)."""
        n = case.params.num_samples
        return case.more_samples(case.params.sigma, n, n_ref=case.n_ref or n)


CLAIMS = (
    DeclaredRule("unpaired exact unconditional (stats.unpaired_test=exact)",
                 "no per-sample reference scores, 0/100 scores, stats.unpaired_test=exact",
                 ("NO-GO at drop = margin (0)", "GO at drop = tolerance"),
                 "score bounds pinned to the exact test's verdicts"),
    DeclaredRule("unpaired z-test: sigma sqrt(1/n + 1/n_ref)", "no per-sample reference scores (TensorRT-LLM's test)",
                 ("NO-GO at drop = margin (0)", "GO at drop = tolerance"), "the Wald bound, upstream's z-test inverted"),
)
"""The rules of this module and their claims, as the calibration grid measures them."""
