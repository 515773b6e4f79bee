"""The regression test behind every verdict: TensorRT-LLM's one-sided hypothesis test.

A reference run and a new run each average ``n`` per-sample scores on a 0-100 scale with
per-sample standard deviation ``sigma``. Under H0 ("the new model is not worse") the
difference of the two means is roughly normal with standard deviation
``scale = sqrt(2 sigma^2 / n)``. When the reference entry records that its value was measured on
``n_ref != n`` samples (``recorded.num_samples``), the two means have different errors and the
scale is ``sigma sqrt(1/n + 1/n_ref)``: upstream's formula would understate it when ``n_ref < n``
(false NO-GO rates of 0.23-0.39 for a 57-sample reference) and overstate it when ``n_ref > n``. The threshold is placed so that a model that did not regress
falls below it with probability ``alpha`` (type I error), and ``theta`` is the smallest drop
that is caught with probability ``1 - beta``.

Everything here is pure and stdlib-only so the planning CLI and the unit tests import it in milliseconds; no
scipy. The parameters and the verdict are data (:mod:`runner.stats.data.hypothesis`); here are the test, its power,
its interval (:func:`unpaired_claims`) and its printed block (:func:`render`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from runner.stats.data.claims import Claims, oriented
from runner.stats.data.hypothesis import GATES, HypothesisParams, Verdict, check_params, scale
from runner.stats.numerics.normal import phi, z


def compute_theta(num_samples: int, sigma: float, alpha: float, beta: float) -> float:
    """Minimum detectable effect: the drop caught with probability ``1 - beta`` at level ``alpha``."""
    return -(z(alpha) + z(beta)) * scale(num_samples, sigma)


def compute_threshold(
    reference: float,
    num_samples: int,
    sigma: float,
    alpha: float,
    higher_is_better: bool = True,
) -> float:
    """The pass/fail line: ``reference + z(alpha) * scale`` (mirrored when lower is better).

    ``z(alpha) < 0`` for ``alpha < 0.5``, so the line sits below the reference for accuracy
    and above it for perplexity or WER.
    """
    shift = z(alpha) * scale(num_samples, sigma)
    return reference + shift if higher_is_better else reference - shift


def min_samples_for_theta(target_theta: float, sigma: float, alpha: float, beta: float) -> int:
    """Smallest ``n`` whose theta is at most ``target_theta`` (step 4 of adding a task).

    Solved in closed form (``n >= 2 (k sigma / target)^2`` with ``k = -(z(alpha) + z(beta))``)
    and then nudged against :func:`compute_theta` itself, so the answer is consistent with the
    theta the runner reports even when the bound is a whole number up to rounding.
    """
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma!r}")
    k = -(z(alpha) + z(beta))
    if sigma == 0 or k <= 0:
        return 1  # theta is 0 (or negative) whatever n is
    if not target_theta > 0:
        raise ValueError(f"a positive target theta is needed when sigma > 0, got {target_theta!r}")
    n = max(1, math.ceil(2.0 * (k * sigma / target_theta) ** 2))
    while n > 1 and compute_theta(n - 1, sigma, alpha, beta) <= target_theta:
        n -= 1
    while compute_theta(n, sigma, alpha, beta) > target_theta:
        n += 1
    return n


@dataclass(frozen=True)
class PlanRow:
    """One row of the sample-volume table."""

    num_samples: int
    theta: float
    threshold_minus_reference: float


def plan_rows(sigma: float, alpha: float, beta: float, num_samples_total: int) -> list[PlanRow]:
    """Theta and threshold offset for n = 32, 64, 128, ... below the total, then the total.

    The offset column is ``threshold - reference`` for a higher-is-better metric (negative),
    as in TensorRT-LLM's ``compute_theta_and_thresholds.py``. The total only bounds the table:
    no finite-population correction is applied.
    """
    check_params(alpha, beta, sigma, num_samples_total, where="plan_rows")
    sizes: list[int] = []
    n = 32
    while n < num_samples_total:
        sizes.append(n)
        n *= 2
    sizes.append(int(num_samples_total))
    return [
        PlanRow(
            num_samples=n,
            theta=compute_theta(n, sigma, alpha, beta),
            threshold_minus_reference=compute_threshold(0.0, n, sigma, alpha, True),
        )
        for n in sizes
    ]


def one_sided_p(gain: float, tolerance: float, spread: float, gate: str) -> float:
    """p-value of the gate's null hypothesis for a normal statistic.

    ``gain`` is the observed change oriented so that negative is worse (new - reference, sign
    flipped when lower is better), ``tolerance`` the allowed drop (>= 0) and ``spread`` the
    standard deviation of ``gain``. The gate's H0 is rejected when ``p < alpha``."""
    shifted = gain + tolerance
    if spread == 0:
        if gate == "regression":
            return 0.0 if shifted < 0 else 1.0
        return 0.0 if shifted > 0 else 1.0
    x = shifted / spread
    return phi(x) if gate == "regression" else phi(-x)


def decide(
    score: float,
    reference: float,
    params: HypothesisParams,
    explicit_threshold: float | None = None,
    *,
    metric: str = "accuracy",
    tolerance: float = 0.0,
    gate: str = "regression",
) -> Verdict:
    """Compare a score with its reference; an explicit threshold replaces the computed one.

    Regression gate: the threshold is ``reference - tolerance + z(alpha) scale`` (mirrored when
    lower is better) and the run passes when the score is on or past it (p >= alpha).
    Non-inferiority gate: ``reference - tolerance + |z(alpha)| scale``, and the run passes only
    when the score is strictly past it (p < alpha)."""
    if gate not in GATES:
        raise ValueError(f"gate must be one of {GATES}, got {gate!r}")
    if tolerance < 0 or not math.isfinite(tolerance):
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    score = float(score)
    reference = float(reference)
    sign = 1.0 if params.higher_is_better else -1.0
    gain = sign * (score - reference)
    z_alpha, z_beta = z(params.alpha), z(params.beta)  # the quantiles once: the threshold's and theta's
    if explicit_threshold is not None:
        threshold = float(explicit_threshold)
    else:
        shift = z_alpha * params.scale  # < 0
        offset = -tolerance + (shift if gate == "regression" else -shift)
        threshold = reference + sign * offset
    room = sign * (score - threshold)
    if explicit_threshold is not None or gate == "regression" or params.sigma == 0:
        passed = room >= 0
    else:
        passed = room > 0
    return Verdict(
        score=score,
        reference=reference,
        threshold=threshold,
        theta=-(z_alpha + z_beta) * params.scale,
        room=room,
        passed=bool(passed),
        params=params,
        explicit_threshold=explicit_threshold is not None,
        p_value=one_sided_p(gain, tolerance, params.scale, gate),
        metric=metric,
        tolerance=float(tolerance),
        gate=gate,
    )



def unpaired_claims(verdict: Any, margin: float, tolerance: float) -> Claims:
    """TensorRT-LLM's test (``verdict``: :class:`runner.stats.data.hypothesis.Verdict` decided at ``margin``)."""
    p = verdict.params
    sign = 1.0 if p.higher_is_better else -1.0
    gain, s, za = sign * verdict.difference, p.scale, abs(z(p.alpha))
    low, high = gain - za * s, gain + za * s
    ci = oriented(low, high, p.higher_is_better)
    return Claims(regression=not verdict.passed, within=low > -tolerance, low=ci[0], high=ci[1],
                  method=f"Wald, sigma as configured, {p.scale_formula} (inverts the z-test both ways)",
                  p_within=phi(-(gain + tolerance) / s))


def theta_of(params: HypothesisParams) -> float:
    """The drop the test catches with probability ``1 - beta`` at these parameters (the unequal-n scale included)."""
    return -(z(params.alpha) + z(params.beta)) * params.scale


def threshold_of(params: HypothesisParams, reference: float) -> float:
    """The pass/fail line of a reference value at these parameters (:func:`compute_threshold`)."""
    return compute_threshold(reference, params.num_samples, params.sigma, params.alpha, params.higher_is_better)


def render(verdict: Verdict, heading: str = "Hypothesis test report") -> str:
    """A report block a person can read in a CI log without knowing the method; ``heading`` names it (a
    decision that another rule made labels it as not deciding)."""
    p = verdict.params
    direction = "higher is better" if p.higher_is_better else "lower is better"
    if verdict.explicit_threshold:
        how = "explicit threshold registered with the reference"
    elif p.sigma == 0:
        how = "exact rule (sigma 0): the reference itself"
    else:
        offset = verdict.threshold - verdict.reference
        how = f"reference {'-' if offset < 0 else '+'} {abs(offset):.3f}"
        if verdict.tolerance:
            how += f" (tolerance {verdict.tolerance:g}, |z(alpha)| x {p.scale_formula} {abs(z(p.alpha)) * p.scale:.4f})"
        else:
            how += f" (|z(alpha)| {abs(z(p.alpha)):.4f} x {p.scale_formula} {p.scale:.4f})"
    room_how = "score - threshold" if p.higher_is_better else "threshold - score"
    rule = "=" * 64
    lines = [
        rule,
        f"{heading}: {verdict.metric} ({direction})",
        rule,
        f"  reference    {verdict.reference:10.3f}",
        f"  score        {verdict.score:10.3f}",
        f"  n            {p.num_samples:10d}   samples averaged by "
        + ("this run" if p.unequal else "each run"),
        *([f"  n_ref        {p.reference_samples:10d}   samples the reference value was measured on"]
          if p.unequal else []),
        f"  alpha        {p.alpha:10.3f}   chance of a false alarm on a model that did not regress",
        f"  beta         {p.beta:10.3f}   chance of missing a regression as large as theta",
        f"  sigma        {p.sigma:10.3f}   standard deviation of one sample's score",
        f"  theta        {verdict.theta:10.3f}   smallest regression caught with probability 1 - beta",
        f"  threshold    {verdict.threshold:10.3f}   {how}",
        f"  room         {verdict.room:+10.3f}   {room_how}; positive means room to spare",
        f"  p-value      {verdict.p_value:10.4f}   chance of a result this bad if nothing regressed",
        rule,
    ]
    if verdict.passed and (verdict.explicit_threshold or p.sigma == 0):
        lines.append("unpaired rule: holds - the score reaches the "
                     + ("registered threshold." if verdict.explicit_threshold else "reference (exact rule)."))
    elif verdict.passed:
        lines.append(
            "unpaired test: no regression shown - the score is within what sampling noise explains "
            "(which is not a proof that it is within tolerance)."
        )
    elif verdict.explicit_threshold:
        lines.append(
            "unpaired rule: fails - the score is past the threshold registered "
            "for this reference."
        )
    elif p.sigma == 0:
        lines.append("exact rule: fails - the score is below the reference (sigma 0).")
    else:
        lines.append(
            "unpaired test: regression shown - a result this far past the reference would happen "
            f"by chance less than {p.alpha:.1%} of the time if the model matched it."
        )
    lines.append(rule)
    return "\n".join(lines)
