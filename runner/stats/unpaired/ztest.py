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

Everything here is pure and stdlib-only (``statistics.NormalDist``) so the planning CLI and
the unit tests import it in milliseconds; no scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from runner.contract.errors import ConfigError

_STANDARD_NORMAL = NormalDist()


def z(p: float) -> float:
    """Inverse CDF of the standard normal: the quantile ``z`` with ``P(Z <= z) = p``."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a normal quantile needs 0 < p < 1, got {p!r}")
    return _STANDARD_NORMAL.inv_cdf(p)


def phi(x: float) -> float:
    """CDF of the standard normal (accepts +-inf)."""
    if math.isinf(x):
        return 1.0 if x > 0 else 0.0
    return _STANDARD_NORMAL.cdf(x)


def scale(num_samples: int, sigma: float, reference_samples: int | None = None) -> float:
    """Standard deviation of the difference of two means: ``num_samples`` scores each (TensorRT-LLM's
    ``sqrt(2 sigma^2 / n)``), or ``sigma sqrt(1/n + 1/n_ref)`` for a reference of ``reference_samples``."""
    if reference_samples is None or reference_samples == num_samples:
        return math.sqrt(2.0 * sigma * sigma / num_samples)
    return sigma * math.sqrt(1.0 / num_samples + 1.0 / reference_samples)


def check_params(
    alpha: object,
    beta: object,
    sigma: object,
    num_samples: object,
    higher_is_better: object = True,
    *,
    where: str | None = None,
    reference_samples: object = None,
) -> None:
    """Raise :class:`ConfigError` naming the first field that is out of range.

    Kept separate from :class:`HypothesisParams` so that a caller merging values from several
    sources (a task config, a reference entry) can say *where* the bad value came from.
    """

    def bad(field: str, given: object, allowed: str) -> ConfigError:
        return ConfigError(
            f"statistical parameter '{field}' is out of range",
            where=f"task.{field}" if where == "task" else (where or field),
            given=repr(given),
            allowed=allowed,
            fix=f"set {field} to a value in the allowed range",
        )

    for name, value in (("alpha", alpha), ("beta", beta)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
            raise bad(name, value, "a probability strictly between 0 and 1")
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not math.isfinite(sigma) or sigma < 0:
        raise bad("sigma", sigma, "a finite standard deviation >= 0 (50 for a 0/100 score with p=0.5)")
    for name, value in (("num_samples", num_samples), ("reference_samples", reference_samples)):
        if value is None and name == "reference_samples":
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not float(value).is_integer()
            or value < 1
        ):
            raise bad(name, value, "a whole number >= 1")
    if not isinstance(higher_is_better, bool):
        raise bad("higher_is_better", higher_is_better, "true or false")


@dataclass(frozen=True)
class HypothesisParams:
    """The four numbers that fix a test, plus its direction. Validated on construction.

    ``reference_samples``: the n the reference value was measured on, when the entry records it and it
    differs from ``num_samples`` (None: TensorRT-LLM's equal-n formula)."""

    alpha: float
    beta: float
    sigma: float
    num_samples: int
    higher_is_better: bool = True
    reference_samples: int | None = None

    def __post_init__(self) -> None:
        check_params(self.alpha, self.beta, self.sigma, self.num_samples, self.higher_is_better,
                     reference_samples=self.reference_samples)
        # YAML and Hydra hand over ints for floats and vice versa; normalise once here.
        object.__setattr__(self, "alpha", float(self.alpha))
        object.__setattr__(self, "beta", float(self.beta))
        object.__setattr__(self, "sigma", float(self.sigma))
        object.__setattr__(self, "num_samples", int(self.num_samples))
        if self.reference_samples is not None:
            object.__setattr__(self, "reference_samples", int(self.reference_samples))

    @property
    def unequal(self) -> bool:
        """The reference was measured on another n than the run's: the scale is ``sigma sqrt(1/n + 1/n_ref)``."""
        return self.reference_samples is not None and self.reference_samples != self.num_samples

    @property
    def scale(self) -> float:
        return scale(self.num_samples, self.sigma, self.reference_samples)

    @property
    def scale_formula(self) -> str:
        return "sqrt(sigma^2 (1/n + 1/n_ref))" if self.unequal else "sqrt(2 sigma^2 / n)"

    @property
    def theta(self) -> float:
        return -(z(self.alpha) + z(self.beta)) * self.scale

    def threshold(self, reference: float) -> float:
        return compute_threshold(reference, self.num_samples, self.sigma, self.alpha, self.higher_is_better)


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


GATES = ("regression", "noninferiority")
"""What a job must show. ``regression`` (default): it fails only when the data show a drop larger
than the tolerance (H0: drop <= tolerance). ``noninferiority``: it passes only when the data show
the drop is smaller than the tolerance (H0: drop >= tolerance)."""


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


@dataclass(frozen=True)
class Verdict:
    """TensorRT-LLM's unpaired test on one score, with everything needed to explain it to a person.

    ``tolerance`` (points, >= 0) and ``gate`` implement ``stats.margin`` / ``stats.gate``; with
    tolerance 0 and the regression gate this is exactly upstream's rule."""

    score: float
    reference: float
    threshold: float
    theta: float
    room: float  # > 0: passes with room to spare, whatever the metric's direction
    passed: bool
    params: HypothesisParams
    explicit_threshold: bool  # the threshold came from the reference entry, not from alpha
    p_value: float
    metric: str = "accuracy"
    tolerance: float = 0.0
    gate: str = "regression"

    @property
    def difference(self) -> float:
        """new - reference, in metric units."""
        return self.score - self.reference

    def confidence_interval(self) -> tuple[float, float] | None:
        """Two-sided (1 - 2 alpha) Wald interval for new - reference: its bound on the side of a drop
        crosses ``-tolerance`` exactly when the one-sided test rejects. None when sigma is 0."""
        s = self.params.scale
        if s == 0:
            return None
        half = abs(z(self.params.alpha)) * s
        return (self.difference - half, self.difference + half)

    def to_dict(self) -> dict[str, object]:
        """Flat, JSON-friendly form (MLflow metrics/params, reports)."""
        return {
            "metric": self.metric,
            "score": self.score,
            "reference": self.reference,
            "threshold": self.threshold,
            "theta": self.theta,
            "room": self.room,
            "passed": self.passed,
            "p_value": self.p_value,
            "explicit_threshold": self.explicit_threshold,
            "alpha": self.params.alpha,
            "beta": self.params.beta,
            "sigma": self.params.sigma,
            "num_samples": self.params.num_samples,
            "reference_samples": self.params.reference_samples,
            "higher_is_better": self.params.higher_is_better,
            "tolerance": self.tolerance,
            "gate": self.gate,
        }

    def render(self, heading: str = "Hypothesis test report") -> str:
        """A report block a person can read in a CI log without knowing the method; ``heading`` names it (a
        decision that another rule made labels it as not deciding)."""
        p = self.params
        direction = "higher is better" if p.higher_is_better else "lower is better"
        if self.explicit_threshold:
            how = "explicit threshold registered with the reference"
        elif p.sigma == 0:
            how = "exact rule (sigma 0): the reference itself"
        else:
            offset = self.threshold - self.reference
            how = f"reference {'-' if offset < 0 else '+'} {abs(offset):.3f}"
            if self.tolerance:
                how += f" (tolerance {self.tolerance:g}, |z(alpha)| x {p.scale_formula} {abs(z(p.alpha)) * p.scale:.4f})"
            else:
                how += f" (|z(alpha)| {abs(z(p.alpha)):.4f} x {p.scale_formula} {p.scale:.4f})"
        room_how = "score - threshold" if p.higher_is_better else "threshold - score"
        rule = "=" * 64
        lines = [
            rule,
            f"{heading}: {self.metric} ({direction})",
            rule,
            f"  reference    {self.reference:10.3f}",
            f"  score        {self.score:10.3f}",
            f"  n            {p.num_samples:10d}   samples averaged by "
            + ("this run" if p.unequal else "each run"),
            *([f"  n_ref        {p.reference_samples:10d}   samples the reference value was measured on"]
              if p.unequal else []),
            f"  alpha        {p.alpha:10.3f}   chance of a false alarm on a model that did not regress",
            f"  beta         {p.beta:10.3f}   chance of missing a regression as large as theta",
            f"  sigma        {p.sigma:10.3f}   standard deviation of one sample's score",
            f"  theta        {self.theta:10.3f}   smallest regression caught with probability 1 - beta",
            f"  threshold    {self.threshold:10.3f}   {how}",
            f"  room         {self.room:+10.3f}   {room_how}; positive means room to spare",
            f"  p-value      {self.p_value:10.4f}   chance of a result this bad if nothing regressed",
            rule,
        ]
        if self.passed and (self.explicit_threshold or p.sigma == 0):
            lines.append("unpaired rule: holds - the score reaches the "
                         + ("registered threshold." if self.explicit_threshold else "reference (exact rule)."))
        elif self.passed:
            lines.append(
                "unpaired test: no regression shown - the score is within what sampling noise explains "
                "(which is not a proof that it is within tolerance)."
            )
        elif self.explicit_threshold:
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
    if explicit_threshold is not None:
        threshold = float(explicit_threshold)
    else:
        shift = z(params.alpha) * params.scale  # < 0
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
        theta=params.theta,
        room=room,
        passed=bool(passed),
        params=params,
        explicit_threshold=explicit_threshold is not None,
        p_value=one_sided_p(gain, tolerance, params.scale, gate),
        metric=metric,
        tolerance=float(tolerance),
        gate=gate,
    )
