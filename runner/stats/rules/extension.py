"""Extending a run with more samples as further looks of a planned design (``stats.extensions``, ``stats.extend``).

A fixed test at full alpha leaves no alpha for a later look: after it did not reject, any further test
adds false alarms (re-testing at 0.05 after doubling n gives about 0.08). So extensions are planned
when the first look runs: with ``stats.extensions=K`` the run is look 1 of up to ``K + 1`` looks, and
look ``k`` may spend alpha up to ``spend(k / (K + 1))`` (Lan-DeMets, ``stats.sequential.efficacy``),
with every extension as large as look 1 (planned sizes: a size chosen from the data raises the
false-alarm rate, so the job refuses any other, :mod:`runner.job.looks`). Each look's bound comes from the looks' observed
information (``runner.stats.numerics.group_sequential``'s recursive integration), the same bound decides both claims
(the repeated confidence interval, Jennison & Turnbull ch. 9): NO-GO when ``Z >= b_k``, GO when the
interval lies inside the tolerance. The job stops at the first look that decides; a look that added no
information tests nothing and leaves its alpha to the next one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from runner.contract.errors import ConfigError
from runner.stats.numerics import group_sequential as gs
from runner.stats.numerics.paired_binomial.tango import tango_bounds
from runner.stats.numerics.looks import Look, statistic, tested_looks
from runner.stats.data.claims import DeclaredRule, oriented

REASONS = ("regression", "go", "undecided")


@dataclass
class Extensions:
    """The looks of an extendable run: feed it each look's decision (the same interface as the monitor)."""

    planned: int  # K: the extensions planned at the first look
    sizes: list[int]  # cumulative samples of the looks evaluated by this run
    alpha: float
    spending: str  # obf | pocock
    tolerance: float  # points: the GO claim
    higher_is_better: bool
    looks: list[Look] = field(default_factory=list)
    counts: list[tuple[int, int, int] | None] = field(default_factory=list)  # (b, c, n) for 0/100 scores
    kind: str | None = None
    stopped: str | None = None  # regression | go (None: go on)

    def observe(self, decision: Any, n_k: int) -> Look:
        """Add the look at ``n_k`` samples, its bound, and whether a claim is shown there."""
        kind, look = statistic(decision, n_k, self.sizes[0])
        if self.kind is not None and kind != self.kind:
            raise ConfigError("an extension changed the test, so its looks cannot be combined",
                              where=f"look {len(self.looks) + 1} ({n_k} samples)",
                              given=f"look 1 used the {self.kind} test, this look the {kind} test",
                              fix="record the reference on at least as many samples as the extended run "
                                  "(reference.mode=record reference.overwrite=true task.num_samples=N), so that "
                                  "every look is paired; or use stats.method=unpaired for every look")
        self.kind = self.kind or kind
        p = decision.paired
        self.counts.append((*p.discordant, p.n) if p is not None and p.discordant is not None else None)
        self.looks.append(look)
        if look.z is not None and tested_looks(self.looks)[-1] is look:
            look.efficacy = self._bound()
            if look.z >= look.efficacy:
                self.stopped = "regression"
            elif self._go(look, self.counts[-1], decision):
                self.stopped = "go"
        return look

    def _spent(self, look: Look) -> float:
        k = next(i for i, lk in enumerate(self.looks, 1) if lk is look)
        return gs.spend(self.spending, k / (self.planned + 1), self.alpha)

    def _bound(self) -> float:
        tested = tested_looks(self.looks)
        top = tested[-1].info
        return efficacy_bounds(tuple(round(lk.info / top, 12) for lk in tested),
                               tuple(self._spent(lk) for lk in tested))[-1]

    def _go(self, look: Look, counts: tuple[int, int, int] | None, decision: Any) -> bool:
        if counts is not None:
            low, _ = tango_bounds(*counts, look.efficacy)  # Tango's score bound at the look's critical value
            return low > -self.tolerance / 100.0
        low, _ = oriented(look.estimate - look.efficacy * look.se, look.estimate + look.efficacy * look.se,
                          self.higher_is_better)
        return low > -self.tolerance

    def result(self, fixed_passed: bool, fixed_p: float | None) -> "ExtensionResult":
        """The verdict of the looks so far (``fixed_*``: the fixed rule's, when no look carried information)."""
        tested = tested_looks(self.looks)
        if not tested:
            return ExtensionResult(self.kind or "unpaired", list(self.looks), self.planned, None, None,
                                   "undecided" if fixed_passed else "regression", fixed_p, None, None,
                                   alpha=self.alpha, spending=self.spending)
        last = tested[-1]
        top = last.info
        p = gs.stagewise_p([lk.info / top for lk in tested], [lk.efficacy for lk in tested],
                           [-math.inf] * len(tested), len(tested) - 1, last.z, False)
        half = last.efficacy * last.se
        i = self.looks.index(last)
        return ExtensionResult(self.kind or "unpaired", list(self.looks), self.planned, last.efficacy,
                               (last.estimate - half, last.estimate + half), self.stopped or "undecided", p,
                               self.counts[i], i + 1, alpha=self.alpha, spending=self.spending)


@lru_cache(maxsize=256)
def efficacy_bounds(info: tuple[float, ...], spent: tuple[float, ...]) -> tuple[float, ...]:
    """Bounds ``b_k`` with ``P_H0(Z_k >= b_k, no earlier crossing) = spent_k - spent_{k-1}`` at informations
    ``info`` (any common scale: only their ratios matter under H0)."""
    h0, out, before = gs._Paths(0.0), [], 0.0
    for i, total in zip(info, spent):
        b = gs._solve(lambda c: h0.tail(c, i, True) - (total - before))
        out.append(b)
        h0.advance(-math.inf, b, i)
        before = total
    return tuple(out)


@dataclass
class ExtensionResult:
    """Where an extendable run stands: the looks, the deciding look's bound and repeated interval."""

    kind: str
    looks: list[Look]
    planned: int
    crit: float | None  # the bound of the last informative look
    rci: tuple[float, float] | None  # repeated (1 - 2 alpha) interval for new - reference at that look
    reason: str  # regression | go | undecided
    p_value: float | None  # stage-wise ordering
    counts: tuple[int, int, int] | None  # (b, c, n) at that look, 0/100 scores
    look: int | None  # 1-based index of that look
    theta: float | None = None
    alpha: float = 0.05
    spending: str = "obf"

    def next_looks(self) -> list[tuple[int, float]]:
        """The planned looks left, each as (samples in all, the bound it will test at), for the advice.

        Every extension adds look 1's size; a future look's information is projected from the last look's
        (samples for the paired kinds; ``1 / (1/n + 1/n_1)`` for the unpaired test, whose reference is
        fixed), and each bound is the one :class:`Extensions` will compute there if the looks before it
        go on undecided."""
        if not self.looks or self.extensions_left <= 0:
            return []
        step, last = self.looks[0].n, self.looks[-1]
        tested = tested_looks(self.looks)
        if self.kind == "unpaired":
            def info_at(n: int) -> float:
                return 1.0 / (1.0 / n + 1.0 / step)
            scale = (last.info / info_at(last.n)) if last.info > 0 else 1.0
        else:
            def info_at(n: int) -> float:
                return float(n)
            scale = (last.info / last.n) if last.info > 0 else 1.0
        infos = [lk.info for lk in tested]
        index = [next(k for k, x in enumerate(self.looks, 1) if x is lk) for lk in tested]
        spent = [gs.spend(self.spending, k / (self.planned + 1), self.alpha) for k in index]
        out = []
        for j in range(1, self.extensions_left + 1):
            n = last.n + j * step
            infos.append(scale * info_at(n))
            spent.append(gs.spend(self.spending, (len(self.looks) + j) / (self.planned + 1), self.alpha))
            top = infos[-1]
            out.append((n, efficacy_bounds(tuple(round(i / top, 12) for i in infos), tuple(spent))[-1]))
        return out

    @property
    def passed(self) -> bool:
        return self.reason != "regression"

    @property
    def extensions_left(self) -> int:
        return self.planned + 1 - len(self.looks)

    @property
    def test(self) -> str:
        return {"unpaired": "extendable unpaired z-test", "mcnemar": "extendable McNemar (normal approximation)",
                "paired_mean": "extendable paired z-test"}[self.kind]

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test, "planned_extensions": self.planned, "looks_done": len(self.looks),
                "extensions_left": self.extensions_left, "reason": self.reason, "p_value": self.p_value,
                "p_value_method": "stage-wise ordering", "deciding_look": self.look,
                "rci_low": self.rci[0] if self.rci else None, "rci_high": self.rci[1] if self.rci else None,
                "looks": [lk.to_dict() for lk in self.looks]}

    def metrics(self) -> dict[str, float]:
        out = {"ext_looks": float(len(self.looks)), "ext_left": float(self.extensions_left)}
        if self.p_value is not None:
            out["ext_p_value"] = self.p_value
        return out

    def render(self) -> str:
        rule = "-" * 64
        lines = [rule, f"Extendable run: {self.test}, {self.planned} extensions planned", rule,
                 f"  {'look':>4} {'n':>6} {'Z':>8} {'bound':>8}"]
        for i, lk in enumerate(self.looks, 1):
            z = "-" if lk.z is None else f"{lk.z:.3f}"
            b = "-" if not math.isfinite(lk.efficacy) else f"{lk.efficacy:.3f}"
            lines.append(f"  {i:>4} {lk.n:>6} {z:>8} {b:>8}")
        shown = {"regression": "regression shown", "go": "drop within the tolerance shown",
                 "undecided": "nothing shown yet"}[self.reason]
        lines.append(f"  look {len(self.looks)} of at most {self.planned + 1}: {shown}; "
                     f"{self.extensions_left} extension(s) left")
        lines.append(rule)
        return "\n".join(lines)

    def bound(self) -> tuple[float | None, tuple[float, float] | None]:
        """The critical value and repeated interval that decide both claims."""
        return self.crit, self.rci


CLAIMS = (
    DeclaredRule("extensions, planned sizes: McNemar (0/100)", "stats.extensions=K on paired 0/100 scores",
         ("NO-GO at drop 0", "GO at drop = tolerance"), "the repeated bound at the look's critical value"),
    DeclaredRule("extensions, planned sizes: unpaired z (sigma 50)", "stats.extensions=K on the unpaired test",
         ("NO-GO at drop 0", "GO at drop = tolerance"), "the repeated Wald bound at the look's critical value"),
    DeclaredRule("advice: extendable unpaired run (planned looks)", "INCONCLUSIVE at an extendable run's look",
         ("reaches its claim (stated +- 0.05)",), "none: the planned look that reaches the claim"),
)
"""The rules of this module and their claims, as the calibration grid measures them."""
