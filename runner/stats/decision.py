"""From a score and its reference to one decision, computed once and written everywhere.

Precedence (the first rule that applies decides):

1. **explicit threshold**: the reference entry registers ``threshold_override`` (or ``threshold``); the score is compared
   with it as upstream does (no p-value: the rule is deterministic).
2. **exact rule**: ``sigma`` is 0 (passkey retrieval): the threshold is the reference itself,
   so one lost passkey of 20 fails, as upstream.
3. **paired**: the reference kept per-sample scores for the same samples (same ids, seed,
   dataset source and prompts; ``stats.method=auto|paired``): McNemar's exact test for 0/100
   scores, the finite-sample betting test for other bounded scores, a paired t-test for unbounded ones. It needs far fewer samples for the same power.
4. **unpaired**: TensorRT-LLM's threshold test.

Rules 3 and 4 test two claims (:mod:`runner.stats.data.verdicts`): a drop beyond ``stats.margin`` (NO-GO)
and a drop within the tolerance (GO), with the interval that inverts both (:mod:`runner.stats.data.claims`);
neither shown is INCONCLUSIVE. Rules 1 and 2 are two-way: GO when they hold, NO-GO when they fail.
Extra gates (SCORE's consistency rate, a speculative run's acceptance length) can only make the verdict NO-GO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from runner.stats import decision_text
from runner.stats.data.claims import Claims
from runner.stats.data.hypothesis import Verdict
from runner.stats.data.indicators import IndicatorCheck
from runner.stats.data.tolerance import Tolerance
from runner.stats.data.verdicts import INCONCLUSIVE, NO_GO, GO, combine, exit_status, reported
from runner.stats.decision_text import STATISTICAL_RULES


class Gate(Protocol):
    """A further pass/fail check of a task against the same reference (SCORE's consistency rate)."""

    metric: str
    alpha: float

    @property
    def checked(self) -> bool: ...

    @property
    def passed(self) -> bool: ...

    @property
    def p_value(self) -> float: ...

    def render(self) -> str: ...

    def metrics(self) -> dict[str, float]: ...


@dataclass
class Decision:
    """The one decision of a job: the rule that decided, its claims and interval, every gate, the verdict."""

    rule: str  # explicit_threshold | exact | paired | unpaired
    passed: bool  # no regression shown by the accuracy rule (the NO-GO claim did not hold)
    verdict: Verdict  # the unpaired TensorRT-LLM test, always computed and shown
    paired: Any = None  # runner.stats.data.paired_result.PairedResult when a paired test decided
    gates: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sequential: Any = None  # runner.stats.rules.sequential.SequentialResult when the gate looked sequentially
    claims: Claims | None = None  # None for the deterministic rules, and for looks that carried no information
    tolerance: Tolerance | None = None
    margin: float = 0.0
    gate: str = "regression"  # which claim wins when both are shown
    mode: str = "three_way"
    on_inconclusive: str = "inconclusive"
    advice: Any = None  # runner.stats.numerics.advice.Advice when INCONCLUSIVE
    # the clusters of the samples the deciding test used (runner.stats.numerics.cluster_variance.DesignEffect); None: stats.cluster
    # is off or the task declares no cluster key
    clustering: Any = None
    cluster_mode: str = "off"  # stats.cluster
    # the reference's A/A floor the NO-GO claim was tested against, and the margin the run stated (None: no floor)
    noise_floor: float | None = None
    stated_margin: float | None = None
    within_noise: bool = False  # a NO-GO at the stated margin that is not one at the floor: INCONCLUSIVE
    # the run's truncation and failure indicators against the reference's (dispatch.indicator_check); blocks: INCONCLUSIVE
    indicators: IndicatorCheck | None = None
    # what chance entered the verdict (a seeded bootstrap's resamples), or that none did; None: a rule without any
    randomness: str | None = None
    unpaired_test: str | None = None  # the unpaired rule's test when it is not TensorRT-LLM's z-test
    advisor: Any = None  # runner.stats.rules.base.Advisor: the rule that decided, whose advice fits the decision

    @property
    def all_passed(self) -> bool:
        """No regression shown anywhere (TensorRT-LLM's PASS: GO or INCONCLUSIVE)."""
        return self.passed and all(g.passed for g in self.gates)

    @property
    def both_shown(self) -> bool:
        return self.claims is not None and self.claims.regression and self.claims.within

    @property
    def outcome(self) -> str:
        """GO, NO-GO or INCONCLUSIVE. Extra gates can only make it NO-GO; the deterministic rules are
        two-way by construction (their registered threshold is the tolerance)."""
        if any(not g.passed for g in self.gates) or not self.passed and self.claims is None:
            return NO_GO
        if self.within_noise or (self.indicators is not None and self.indicators.blocks):
            return INCONCLUSIVE
        if self.claims is None:
            return GO if self.rule not in STATISTICAL_RULES else INCONCLUSIVE
        return combine(self.claims.regression, self.claims.within, self.gate)

    @property
    def reported(self) -> str:
        return reported(self.outcome, self.mode)

    @property
    def exit_status(self) -> int:
        return exit_status(self.outcome, self.mode, self.on_inconclusive)

    @property
    def alpha(self) -> float:
        return self.verdict.params.alpha

    @property
    def n(self) -> int:
        return self.verdict.params.num_samples

    @property
    def p_value(self) -> float | None:
        """The p-value of the regression rule that decided (None for the deterministic rules)."""
        if self.sequential is not None:
            return self.sequential.p_value
        if self.rule == "paired":
            return self.paired.p_value
        if self.rule == "unpaired":
            return self.verdict.p_value
        return None

    @property
    def p_within(self) -> float | None:
        """The p-value of the tolerance claim (H0: drop >= tolerance)."""
        return self.claims.p_within if self.claims is not None else None

    @property
    def theta(self) -> float | None:
        if self.sequential is not None:
            return self.sequential.theta
        if self.rule == "paired":
            return self.paired.theta_paired if math.isfinite(self.paired.theta_paired) else None
        if self.rule == "explicit_threshold":
            return None
        return self.verdict.theta

    @property
    def difference(self) -> float:
        """new - reference in metric units (on the paired samples when a paired test decided)."""
        if self.sequential is not None:
            return self.sequential.looks[-1].estimate
        return self.paired.mean_diff if self.rule == "paired" else self.verdict.difference

    @property
    def ci(self) -> tuple[float, float] | None:
        """The two one-sided 1 - alpha bounds for new - reference (low, high), each on the side of its
        threshold that its claim decided (:meth:`Claims.agreeing`)."""
        if self.claims is None:
            return None
        tol = self.tolerance.points if self.tolerance is not None else 0.0
        return self.claims.agreeing(self.margin, tol, self.verdict.params.higher_is_better).ci

    @property
    def bounds(self) -> tuple[float, float] | None:
        """``(GO bound, NO-GO bound)`` for new - reference: the ends of :attr:`ci` that the two claims invert."""
        ci = self.ci
        if ci is None:
            return None
        return ci if self.verdict.params.higher_is_better else (ci[1], ci[0])

    def bounds_text(self) -> str:
        """Both bounds in words, each with the threshold it must pass and the digits that decide."""
        return decision_text.bounds_text(self)

    @property
    def ci_method(self) -> str:
        return self.claims.method if self.claims is not None else f"none: {self.no_interval}"

    @property
    def no_interval(self) -> str:
        return ("a deterministic rule has no interval" if self.rule not in STATISTICAL_RULES
                else "no look carried information (no discordant pair)")

    @property
    def test(self) -> str:
        if self.sequential is not None:
            return self.sequential.test
        return {"explicit_threshold": "explicit threshold", "exact": "exact rule (sigma 0)",
                "unpaired": self.unpaired_test or "TensorRT-LLM unpaired z-test"}.get(self.rule) or self.paired.method

    def hypothesis(self) -> str:
        """The claims tested, in words, in the metric's own direction."""
        return decision_text.hypothesis(self)

    def figures(self) -> decision_text.Figures:
        """The deciding rule's figures on the samples it used: what every table shows."""
        return decision_text.figures(self)

    def tests(self) -> list[dict[str, Any]]:
        """Every claim of the job, each with its rule, p-value and alpha (what a sweep corrects for
        multiplicity): the regression claim, the tolerance claim, and the extra gates."""
        out = [{"name": "accuracy", "rule": self.rule, "gate": "regression",
                "p_value": _claimable(self.p_value, self.alpha, not self.passed), "alpha": self.alpha,
                "passed": self.passed}]
        if self.claims is not None:
            out.append({"name": "accuracy", "rule": self.rule, "gate": "noninferiority",
                        "p_value": _claimable(self.p_within, self.alpha, self.claims.within), "alpha": self.alpha,
                        "passed": self.claims.within})
        for g in self.gates:
            if g.checked:  # a gate with a deterministic rule (acceptance length) keeps its own verdict in a sweep
                rule = getattr(g, "rule", "unpaired")
                out.append({"name": g.metric, "rule": rule, "gate": "regression",
                            "p_value": g.p_value if rule in STATISTICAL_RULES else None,
                            "alpha": g.alpha, "passed": g.passed})
        return out

    def to_dict(self) -> dict[str, Any]:
        """The record written to report.json and read by the sweep summary."""
        return decision_text.to_dict(self)

    def metrics(self) -> dict[str, float]:
        """MLflow metrics: the same figures as the report (undefined ones are left out)."""
        return decision_text.metrics(self)

    def verdict_line(self) -> str:
        """The verdict in words: what was shown, or what was not."""
        return decision_text.verdict_line(self)

    def render(self) -> str:
        """The report block: the verdict first, then the tests it rests on."""
        return decision_text.render(self)


def _claimable(p: float | None, alpha: float, claimed: bool) -> float | None:
    """A claim's p-value as a sweep or release may correct it; None where the job's rule withheld the claim its
    p-value shows (too few samples for the t-test, skewness, the noise floor, an indicator): a family's correction
    only takes claims away, so it must never make one the job's own rule refused."""
    return None if p is not None and p < alpha and not claimed else p
