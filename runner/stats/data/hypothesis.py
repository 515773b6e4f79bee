"""The numbers that fix TensorRT-LLM's test (:class:`HypothesisParams`) and its outcome (:class:`Verdict`), as data."""

from __future__ import annotations

import math
from dataclasses import dataclass

from runner.contract.errors import ConfigError



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


GATES = ("regression", "noninferiority")
"""What a job must show. ``regression`` (default): it fails only when the data show a drop larger
than the tolerance (H0: drop <= tolerance). ``noninferiority``: it passes only when the data show
the drop is smaller than the tolerance (H0: drop >= tolerance)."""


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



def check_prob(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be a probability strictly between 0 and 1, got {value!r}")
