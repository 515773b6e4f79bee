"""Running a group-sequential gate: the statistic at each look, its bounds, and the verdict when it stops.

Each look evaluates a prefix of the seeded subset and asks the job's one decision (paired or unpaired,
:mod:`runner.stats.decision`) about it; this module turns that decision into ``Z_k`` (large means a
regression) and its information, and compares it with the bounds of :mod:`runner.stats.numerics.group_sequential`:

* unpaired (TensorRT-LLM's test): ``Z = -(gain + tolerance) / sqrt(sigma^2/n_k + sigma^2/n)``; the
  reference mean is fixed, so the information fraction is ``2 s / (1 + s)`` at sample fraction ``s``
  and the bounds are the planned ones.
* paired, 0/100 scores: Tango's score statistic at the margin ``m`` (proportion units; ``b`` the samples
  the new run lost, ``c`` those it won), ``Z = (b - c - n m) / sqrt(n v)`` with ``v = q_b + q_c - m^2``
  from the restricted MLE under ``drop = m`` (:func:`runner.stats.numerics.paired_binomial.tango.restricted_mle`); at
  ``m = 0`` it is McNemar's ``(b - c) / sqrt(b + c)``. Its numerator is a sum of independent
  increments of null variance ``v`` per sample, so the information is ``n v`` (``m_k = b + c``, the
  discordant pairs, at margin 0): the looks' correlations are ``sqrt(I_j / I_k)`` as observed, and
  each look's bound is computed when it is reached (error spending at the sample fraction; the last
  look spends what is left). With the margin inside the statistic, the look's NO-GO is the claim "a drop
  larger than the margin", and Tango's interval at the look's bound (:func:`runner.stats.conclusion.look_claims`)
  inverts it. A look that added no discordant pair tests nothing and spends nothing; if that is the
  last look, it spends what is left of alpha on the same statistic as the last informative look.
* paired, continuous scores: ``Z = -(mean diff + tolerance) / (sd / sqrt(n_k))``, information in samples.

The p-value uses the stage-wise ordering and the interval is the repeated confidence interval
(Jennison & Turnbull 2000, sections 8.4 and 9.1), both valid for the design whenever it stopped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from runner.stats.numerics import group_sequential as gs
from runner.stats.numerics.looks import KINDS, Look, look_sizes, statistic, tested_looks
from runner.stats.data.claims import DeclaredRule


@dataclass
class Monitor:
    """The looks of one job: feed it the decision at each look; it says when to stop."""

    config: Any  # SequentialConfig
    n_max: int
    alpha: float
    beta: float
    sizes: list[int] = field(init=False)
    looks: list[Look] = field(default_factory=list)
    kind: str | None = None
    stopped: str | None = None  # regression | pass (None: go on)

    def __post_init__(self) -> None:
        self.sizes = look_sizes(gs.look_fractions(self.config), self.n_max)

    @property
    def design(self) -> gs.Design:
        """The planned design of this kind of test (its drift sets the futility bounds).

        The kind (unpaired or paired) sets the information fractions, so it must be known: from the
        first look, or given as ``kind=`` up front (a simulation planning its theta before any look)."""
        if self.kind is None:
            raise ValueError("the design depends on the kind of test, known at the first look; "
                             f"pass kind= (one of {KINDS}) to read it before")
        s = tuple(n / self.n_max for n in self.sizes)
        info = tuple(gs.unpaired_info(s)) if self.kind == "unpaired" else s
        c = self.config
        return _planned(info, self.alpha, self.beta, c.efficacy, c.futility, bool(c.binding))

    def _fractions(self) -> tuple[list[float], list[float]]:
        """Normalised information and spending fraction of every look so far (the latest sets the scale)."""
        last = self.looks[-1]
        final = last.n == self.n_max
        if self.kind == "unpaired":
            top = 1.0 / (self.looks[0].se ** 2 / (1 / self.looks[0].n + 1 / self.n_max) * 2 / self.n_max)
        elif self.kind == "mcnemar":
            top = last.info if final else last.info * self.n_max / last.n
        else:
            top = float(self.n_max)
        info = [lk.info / top if top > 0 else 0.0 for lk in self.looks]
        spent = [lk.n / self.n_max for lk in self.looks]
        if self.kind == "unpaired":
            spent = info
        return info, spent

    def observe(self, decision: Any, n_k: int) -> Look:
        """Add the look at ``n_k`` samples, compute its bounds, and decide whether to stop."""
        kind, look = statistic(decision, n_k, self.n_max)
        self.kind = self.kind or kind
        self.looks.append(look)
        final = n_k == self.n_max
        tested = tested_looks(self.looks)
        if look.z is not None and tested[-1] is look:
            look.efficacy, look.futility = self._bounds(final)
        elif final and look.z is not None and tested:
            look.efficacy = look.futility = self._retest_bound()
        if look.z is not None and look.z >= look.efficacy:
            self.stopped = "regression"
        elif look.z is not None and look.z <= look.futility:
            self.stopped = "pass"
        if final and self.stopped is None:
            self.stopped = "pass"
        return look

    def _bounds(self, final: bool) -> tuple[float, float]:
        info_all, spent_all = self._fractions()
        idx = [i for i, lk in enumerate(self.looks) if any(lk is t for t in tested_looks(self.looks))]
        info = [info_all[i] for i in idx]
        spent = [spent_all[i] for i in idx]
        if final:
            spent[-1] = 1.0
        past = [self.looks[i] for i in idx[:-1]]
        cfg = self.config
        h0 = gs._Paths(0.0)
        h1 = gs._Paths(self.design.drift)
        for lk, i in zip(past, info):
            h0.advance(lk.futility if cfg.binding else -math.inf, lk.efficacy, i)
            h1.advance(lk.futility, lk.efficacy, i)
        prev = spent[-2] if len(spent) > 1 else 0.0
        target = gs.spend(cfg.efficacy, spent[-1], self.alpha) - gs.spend(cfg.efficacy, prev, self.alpha)
        b = gs._solve(lambda c: h0.tail(c, info[-1], True) - target)
        if final:
            return b, b
        if cfg.futility == "none":
            return b, -math.inf
        tb = gs.spend(cfg.futility, spent[-1], self.beta) - gs.spend(cfg.futility, prev, self.beta)
        a = -gs._solve(lambda c: h1.tail(-c, info[-1], False) - tb)
        return b, min(a, b)

    def _retest_bound(self) -> float:
        """Bound of a last look that added no information: it re-tests the last informative look's ``Z``.

        That ``Z`` is already known to lie below its own bound ``b_j`` (and above ``a_j`` when binding), so
        the last look rejects on ``c <= Z_j < b_j``; ``c`` makes that region's null probability, on the
        paths that reached look ``j``, what is left of alpha: ``alpha - spend(t_j)``. Non-binding, this is
        ``P(some earlier bound crossed or Z_j >= c) = alpha``."""
        info_all, spent_all = self._fractions()
        tested = tested_looks(self.looks)
        idx = [i for i, lk in enumerate(self.looks) if any(lk is t for t in tested)]
        info = [info_all[i] for i in idx]
        cfg = self.config
        h0 = gs._Paths(0.0)
        for lk, i in zip(tested[:-1], info[:-1]):
            h0.advance(lk.futility if cfg.binding else -math.inf, lk.efficacy, i)
        last = tested[-1]
        floor = last.futility if cfg.binding else -math.inf
        left = self.alpha - gs.spend(cfg.efficacy, spent_all[idx[-1]], self.alpha)
        beyond = h0.tail(last.efficacy, info[-1], True)
        return gs._solve(lambda c: h0.tail(max(c, floor), info[-1], True) - beyond - left)

    def result(self, fixed_passed: bool, fixed_p: float | None) -> "SequentialResult":
        """The verdict at the look where it stopped.

        ``fixed_*`` (the fixed-n rule's verdict and p-value) decide only when no look carried any
        information (e.g. no discordant pair at all): then no test was spent and the one fixed test is the
        only test. Otherwise the design decides: the stopping look's bound, its stage-wise p-value and its
        repeated interval, which agree with each other and with the label."""
        last = self.looks[-1]
        tested = tested_looks(self.looks)
        if last.z is None or not tested:
            p, rci = fixed_p, None
            passed = fixed_passed
            self.stopped = "pass" if passed else "regression"
        else:
            info_all, _ = self._fractions()
            idx = [i for i, lk in enumerate(self.looks) if any(lk is t for t in tested)]
            info = [info_all[i] for i in idx]
            # a last look with no new information is stage j again (same Z): the stage-wise p-value of Z at
            # look j is P(an earlier bound crossed or Z_j >= z), below alpha exactly when Z >= the re-test bound
            p = gs.stagewise_p(info, [t.efficacy for t in tested], [t.futility for t in tested], len(tested) - 1,
                               last.z, self.config.binding)
            half = last.efficacy * last.se
            rci = (last.estimate - half, last.estimate + half) if math.isfinite(half) else None
            passed = self.stopped != "regression"
        d = self.design
        s = [n / self.n_max for n in self.sizes]
        full_se = last.se * math.sqrt(last.n / self.n_max) if self.kind != "unpaired" else \
            last.se / math.sqrt(1 / last.n + 1 / self.n_max) * math.sqrt(2 / self.n_max)
        return SequentialResult(
            kind=self.kind or "unpaired", looks=list(self.looks), planned_sizes=list(self.sizes), n_max=self.n_max,
            stopped_at=len(self.looks), reason=self.stopped or "pass", passed=passed, p_value=p, rci=rci,
            alpha=self.alpha, design=d, theta=d.drift * full_se,
            expected_saving_h0=1 - gs.expected_fraction(d, s, 0.0),
            expected_saving_theta=1 - gs.expected_fraction(d, s, d.drift))


@dataclass
class SequentialResult:
    """What a sequential gate decided, where it stopped, and why."""

    kind: str
    looks: list[Look]
    planned_sizes: list[int]
    n_max: int
    stopped_at: int  # 1-based look
    reason: str  # regression | pass
    passed: bool
    p_value: float | None  # stage-wise ordering
    rci: tuple[float, float] | None  # repeated (1 - 2 alpha) confidence interval for new - reference
    alpha: float
    design: gs.Design
    theta: float  # the regression caught with probability 1 - beta, metric units at n_max
    expected_saving_h0: float
    expected_saving_theta: float

    @property
    def n_used(self) -> int:
        return self.looks[-1].n

    def bound(self) -> tuple[float | None, tuple[float, float] | None]:
        """The critical value and repeated interval that decide both claims."""
        return self.looks[-1].efficacy, self.rci

    @property
    def test(self) -> str:
        return {"unpaired": "group-sequential unpaired z-test",
                "mcnemar": "group-sequential McNemar (normal approximation, information in discordant pairs)",
                "paired_mean": "group-sequential paired z-test on the mean difference"}[self.kind]

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test, "stopped_at_look": self.stopped_at, "looks_planned": len(self.planned_sizes),
                "reason": self.reason, "passed": self.passed, "p_value": self.p_value,
                "p_value_method": "stage-wise ordering",
                "rci_low": self.rci[0] if self.rci else None, "rci_high": self.rci[1] if self.rci else None,
                "samples_used": self.n_used, "samples_planned": self.n_max, "look_sizes": self.planned_sizes,
                "theta": self.theta, "saved": 1 - self.n_used / self.n_max,
                "expected_saving_h0": self.expected_saving_h0, "expected_saving_theta": self.expected_saving_theta,
                "looks": [lk.to_dict() for lk in self.looks], "design": self.design.to_dict()}

    def metrics(self) -> dict[str, float]:
        out = {"seq_stopped_at_look": float(self.stopped_at), "seq_samples_used": float(self.n_used),
               "seq_samples_planned": float(self.n_max), "seq_saved": 1 - self.n_used / self.n_max,
               "seq_expected_saving_h0": self.expected_saving_h0,
               "seq_expected_saving_theta": self.expected_saving_theta, "seq_theta": self.theta}
        if self.p_value is not None:
            out["seq_p_value"] = self.p_value
        for i, lk in enumerate(self.looks, 1):
            for key, val in (("z", lk.z), ("efficacy", lk.efficacy), ("futility", lk.futility)):
                if val is not None and math.isfinite(val):
                    out[f"seq_look{i}_{key}"] = val
        return out

    def render(self) -> str:
        rule = "-" * 64
        lines = [rule, f"Sequential gate: {self.test}", rule,
                 f"  {'look':>4} {'n':>6} {'Z':>8} {'pass if <=':>11} {'regress if >=':>14}"]
        for i, lk in enumerate(self.looks, 1):
            def f(v: float | None) -> str:
                return "-" if v is None or not math.isfinite(v) else f"{v:.3f}"
            lines.append(f"  {i:>4} {lk.n:>6} {f(lk.z):>8} {f(lk.futility):>11} {f(lk.efficacy):>14}")
        for i, n in enumerate(self.planned_sizes[len(self.looks):], len(self.looks) + 1):
            lines.append(f"  {i:>4} {n:>6} {'(not evaluated)':>8}")
        p = "n/a" if self.p_value is None else f"{self.p_value:.4g}"
        lines += [f"  stopped at look {self.stopped_at} of {len(self.planned_sizes)}: "
                  f"{'regression shown' if self.reason == 'regression' else 'no regression shown'}; samples {self.n_used} of {self.n_max} "
                  f"({1 - self.n_used / self.n_max:.0%} saved)",
                  f"  p-value {p} (stage-wise ordering); theta {self.theta:.3f} at n={self.n_max}",
                  f"  expected saving: {self.expected_saving_h0:.0%} with no regression, "
                  f"{self.expected_saving_theta:.0%} with a regression of theta", rule]
        return "\n".join(lines)


@lru_cache(maxsize=64)
def _planned(info: tuple[float, ...], alpha: float, beta: float, efficacy: str, futility: str,
             binding: bool) -> gs.Design:
    return gs.design(info, alpha, beta, efficacy, futility, binding)


CLAIMS = (
    DeclaredRule("sequential looks (stats.sequential): McNemar (0/100)", "stats.sequential on paired 0/100 scores",
         ("NO-GO at drop 0",), "the repeated confidence interval (Jennison & Turnbull ch. 9)"),
)
"""The rules of this module and their claims, as the calibration grid measures them."""
