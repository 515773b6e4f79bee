"""How many more samples would decide an INCONCLUSIVE verdict (docs/statistics.md, "How many more samples").

From the observed data: the per-sample spread ``s`` of the difference and the gap ``g`` between the
observed drop and the nearer reachable claim (the margin for NO-GO, the tolerance for GO). A test at
critical value ``c`` on ``N`` samples reaches that claim with probability ``Phi(g sqrt(N) / s - c)`` if
the observed drop is the true one, so

    N = (c + z_{1-gamma})^2 s^2 / g^2

samples reach it with probability ``1 - gamma`` (0.8); paired 0/100 scores add the exact tests' continuity term
(:func:`exact_test_n`). ``c`` is the critical value of the test that
will decide at ``N``: ``z_{1-alpha}`` for a fixed-look job (a rerun at ``N`` tests at full alpha), and
for an extendable run the bound of its next planned look (:meth:`runner.stats.rules.extension.ExtensionResult.next_looks`),
larger than ``z_{1-alpha}``. An extendable run's sizes are planned (each extension adds look 1's size),
so its advice names the first planned look whose probability reaches 0.8, with that probability (the
last planned look's when none does).

Against a fixed reference of ``n_ref`` samples (the unpaired test) the standard error
``sigma sqrt(1/N + 1/n_ref)`` never falls below ``sigma / sqrt(n_ref)``: when the gap needs less,
no number of new samples decides and the reference must be recorded again with more.

With clustered samples (``stats.cluster``) the spread is the independent one times ``sqrt(deff)``, so
the samples needed are multiplied by the design effect: the unpaired sigma already carries it
(:mod:`runner.stats.rules.clustered`), a paired test's result carries its own.

A fixed-look betting test (bounded continuous scores) is sized by simulating that test on resamples of the
observed differences (:mod:`runner.stats.numerics.betting_advice`): its critical value grows as n falls. Which sizing a
decision gets is :func:`runner.stats.advising.for_decision`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from runner.stats.numerics.normal import phi, z
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.paired_result import PairedResult
from runner.stats.data.verdicts import GO, NO_GO

POWER = 0.8


@dataclass(frozen=True)
class Advice:
    """The nearer claim and the samples that reach it with 80% probability."""

    target: str  # GO | NO-GO
    n: int  # samples evaluated
    n_total: int | None  # samples needed in all (None: unreachable against this reference)
    discordant: int | None  # discordant pairs among them (paired 0/100 scores)
    available: int | None  # samples the task's dataset has (None: not counted)
    rerecord_n: int | None  # unpaired: the n both runs need when the reference is recorded again
    probability: float = POWER  # of reaching the target at n_total if the observed difference holds
    extensions: int | None = None  # an extendable run: the planned extensions that reach n_total

    @property
    def n_more(self) -> int | None:
        return None if self.n_total is None else max(1, self.n_total - self.n)

    def text(self) -> str:
        if self.n_total is None:
            return (f"no number of new samples reaches {self.target} against this reference (its own sampling error "
                    f"is too large): record the reference again with about {self.rerecord_n} samples and evaluate "
                    f"as many")
        out = f"about {self.n_more} more samples (n={self.n_total} in all"
        if self.extensions is not None:
            out = f"{self.n_more} more samples ({self.extensions} planned extension{'s' if self.extensions > 1 else ''}, " \
                  f"n={self.n_total} in all"
        if self.discordant is not None:
            out += f", about {self.discordant} discordant pairs"
        out += f") would reach {self.target} with {math.floor(100 * self.probability):.0f}% probability if the " \
               "observed difference holds"
        if self.extensions is not None and self.probability < POWER:
            out += " (the most the planned extensions reach)"
        if self.available is not None and self.n_total > self.available:
            out += f"; the task has only {self.available} samples"
        return out

    def to_dict(self) -> dict[str, object]:
        return asdict(self) | {"n_more": self.n_more, "text": self.text()}


@dataclass(frozen=True)
class AdviceCase:
    """What a rule's advice reads from a finished decision: the observed drop (points, positive is worse), the margin
    and tolerance of the two claims, the test's numbers, the rule's paired result (None: unpaired), the unpaired
    reference's own n, an extendable run's planned looks left (samples in all, the bound each tests at), how the
    claims were made (their method) and the fewest samples the rule claims on."""

    drop: float
    margin: float
    tolerance: float
    params: HypothesisParams
    paired: PairedResult | None
    n_ref: int | None
    looks: list[tuple[int, float]] | None = None
    claims_method: str = ""
    least_n: int = 0  # the fewest samples the deciding rule claims on (Claims.least_n)

    @property
    def inflation(self) -> float:
        """The spread's factor on clustered pairs: sqrt of the paired result's applied design effect (1 otherwise)."""
        p = self.paired
        return math.sqrt(p.design_effect.applied) if p is not None and p.design_effect is not None else 1.0

    def more_samples(self, spread: float, n: int, **kw: Any) -> Advice | None:
        """:func:`more_samples` for this case's drop, claims and looks, never below the fewest samples the deciding
        rule claims on (``least_n``: no claim is made below it, whatever the power says)."""
        advice = more_samples(self.drop, spread, n, self.margin, self.tolerance, self.params.alpha, looks=self.looks,
                              **kw)
        if advice is not None and advice.n_total is not None and advice.n_total < self.least_n:
            return replace(advice, n_total=self.least_n)
        return advice


def more_samples(drop: float, spread: float, n: int, margin: float, tolerance: float, alpha: float, *,
                 n_ref: int | None = None, discordance: float | None = None,
                 available: int | None = None, looks: list[tuple[int, float]] | None = None,
                 crit: float | None = None) -> Advice | None:
    """The advice for an undecided verdict; None when no claim is reachable (a margin at or past the tolerance
    with the drop between them cannot happen) or the spread is unknown.

    ``drop``: the observed D in points (positive is worse); ``spread``: the per-sample standard deviation
    of the difference (paired), or sigma of one run's score (unpaired, then ``n_ref`` is the reference's
    fixed n); ``discordance``: the share of samples the two runs score differently (paired 0/100);
    ``looks``: an extendable run's planned looks left, (samples in all, the bound each will test at); ``crit``:
    the fixed-look test's critical value (``z_{1-alpha}`` when None)."""
    candidates = []
    if drop > margin:
        candidates.append((NO_GO, drop - margin))
    if drop < tolerance:
        candidates.append((GO, tolerance - drop))
    if not candidates or not math.isfinite(spread) or spread <= 0:
        return None
    if looks:
        return _planned(candidates, spread, n, n_ref, discordance, available, looks)
    k2 = ((z(1 - alpha) if crit is None else crit) + z(POWER)) ** 2
    best: tuple[float, str, int | None] | None = None
    for target, gap in candidates:
        if n_ref is None and discordance is not None:  # paired 0/100: the exact tests need the 1/N term
            need = exact_test_n(gap, spread, math.sqrt(k2))
            rerecord = None
        elif n_ref is None:
            need = k2 * spread ** 2 / gap ** 2
            rerecord = None
        else:
            room = (gap ** 2 / k2) / spread ** 2 - 1.0 / n_ref  # 1/N that the gap allows
            need = math.inf if room <= 0 else 1.0 / room
            rerecord = math.ceil(2 * k2 * spread ** 2 / gap ** 2)
        if best is None or need < best[0]:
            best = (need, target, rerecord)
    assert best is not None
    need, target, rerecord = best
    if not math.isfinite(need):
        return Advice(target, n, None, None, available, rerecord)
    total = max(n + 1, math.ceil(need))
    pairs = math.ceil(total * discordance) if discordance is not None else None
    return Advice(target, n, total, pairs, available, rerecord)


def exact_test_n(gap: float, spread: float, k: float) -> float:
    """Samples at which paired 0/100 differences ``gap`` points away reach the claim with the power in ``k``
    (``z_{1-alpha} + z_{0.8}``), with the exact tests' continuity term: ``gap / 100 = k s / 100 / sqrt(N) + 1 / N``
    (the planning's theta, :func:`runner.stats.numerics.power.binary_theta`, solved for N). Without the ``1 / N`` the
    rerun at N reached its claim 0.69-0.79 of the time (exactly enumerated: n = 100, discordance 5%, GO at 2.75:
    0.716); with it 0.80-0.81 (benchmarks/binary_advice.py)."""
    g, s = gap / 100.0, spread / 100.0
    root = (-k * s + math.sqrt(k * k * s * s + 4.0 * g)) / 2.0  # 1 / sqrt(N)
    return 1.0 / (root * root)


def reach(gap: float, spread: float, n_total: int, crit: float, n_ref: int | None = None) -> float:
    """P(a test at critical value ``crit`` on ``n_total`` samples shows the claim ``gap`` away), the gap true."""
    se = spread * math.sqrt(1.0 / n_total + (1.0 / n_ref if n_ref else 0.0))
    return phi(gap / se - crit)


def _planned(candidates: list[tuple[str, float]], spread: float, n: int, n_ref: int | None,
             discordance: float | None, available: int | None, looks: list[tuple[int, float]]) -> Advice:
    """An extendable run: the first planned look that reaches the nearer claim with 80% probability."""
    best: tuple[int, float, str, int] | None = None  # (look, -probability, target, n_total)
    for target, gap in candidates:
        for j, (total, crit) in enumerate(looks, 1):
            prob = reach(gap, spread, total, crit, n_ref)
            if prob >= POWER or j == len(looks):
                key = (j if prob >= POWER else len(looks) + 1, -prob, target, total)
                best = key if best is None or key[:2] < best[:2] else best
                break
    assert best is not None
    j, minus_p, target, total = best
    pairs = math.ceil(total * discordance) if discordance is not None else None
    return Advice(target, n, total, pairs, available, None, -minus_p, min(j, len(looks)))


def binary_spread(b: int, c: int, n: int) -> tuple[float, float]:
    """Per-sample sd of 0/100 paired differences and the discordance used for it.

    ``s^2 = 100^2 (d - (D/100)^2)`` with ``d`` the discordant share; with no discordant pair the
    observed spread is 0, so one discordant pair in ``n`` stands in (a floor, not an estimate)."""
    d = max(b + c, 1) / n
    diff = (c - b) / n
    return 100.0 * math.sqrt(max(d - diff * diff, d / n)), d
