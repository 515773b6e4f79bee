"""The truncation- and error-aware part of a decision as data: what the job measured (:class:`IndicatorData`: each
sample's indicators in both arms, the backend's failures excluded from both arms against their cap, the samples
neither arm cut), and what the dispatcher found (:class:`IndicatorCheck`: each indicator's paired counts and test,
the verdict on the clean samples). Measured by :mod:`runner.job.indicators`, tested by
:mod:`runner.stats.numerics.indicators`, decided in :func:`runner.stats.dispatch.decide_against`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.contract.indicators import DESCRIPTIONS, HIT_LIMIT, INPUT_CUT, UNPARSED

TESTED = (INPUT_CUT, HIT_LIMIT, UNPARSED)
"""The indicators tested paired (a failure is left out of both arms instead, up to its cap)."""
CUT = (INPUT_CUT, HIT_LIMIT)
"""What makes a pair unclean for the verdict shown beside an INCONCLUSIVE one (with a failure, already left out)."""

Marks = Mapping[str, "bool | None"]
"""One sample's indicators in one arm (None: unknown)."""

INDICATOR_MODES = ("paired", "report", "off")
"""``stats.indicators``: paired (a run that shows an indicator significantly more often than its reference is
INCONCLUSIVE) | report (the counts and tests shown, the verdict unchanged) | off (neither; failures still excluded)."""


@dataclass(frozen=True)
class IndicatorTest:
    """The paired counts of one indicator and the one-sided p-value that the run shows it more often."""

    name: str
    n: int  # pairs on which both arms know the indicator
    run: int  # pairs the run flags
    reference: int  # pairs the reference flags
    only_run: int  # b
    only_reference: int  # c
    p_value: float
    alpha: float
    allowance: float = 0.0  # the A/A replicate's excess rate the run's is tested beyond (0: McNemar's null)

    @property
    def more_often(self) -> bool:
        """The run shows the indicator significantly more often than the reference (p <= alpha)."""
        return self.p_value <= self.alpha

    def describe(self) -> str:
        """``run 9 of 40, reference 1 (run only 9, reference only 1), McNemar one-sided p=0.0107``"""
        test = (f"beyond the A/A excess {self.allowance:.3g}: Tango/exact one-sided p={self.p_value:.3g}"
                if self.allowance > 0 else f"McNemar one-sided p={self.p_value:.3g}")
        return (f"run {self.run} of {self.n}, reference {self.reference} (run only {self.only_run}, reference only "
                f"{self.only_reference}), {test}")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "n": self.n, "run": self.run, "reference": self.reference,
                "only_run": self.only_run, "only_reference": self.only_reference, "p_value": self.p_value,
                "alpha": self.alpha, "allowance": self.allowance, "more_often": self.more_often}


@dataclass(frozen=True)
class Failures:
    """The backend's failures (an error instead of an answer) excluded from both arms, and their cap."""

    n: int  # samples the run asked
    run: int  # failed in the run
    reference: int  # failed in the reference's rows
    excluded: int  # samples left out of both arms (failed in either)
    cap: float  # stats.max_failed_share

    @property
    def over_cap(self) -> bool:
        return self.n > 0 and self.excluded / self.n > self.cap

    def describe(self) -> str:
        return (f"backend failures: {self.excluded} of {self.n} samples left out of both arms (run {self.run}, "
                f"reference {self.reference}; cap stats.max_failed_share={self.cap:g})")


@dataclass(frozen=True)
class CleanSubset:
    """The samples neither arm cut or stopped at the token limit, and what the job computes on them for a decision
    (the task's metric, its chance level and gates): the verdict on them is shown beside a blocked one."""

    ids: frozenset[str]
    score: float
    chance_level: float | None
    gates: tuple[Any, ...] = ()


@dataclass(frozen=True)
class IndicatorData:
    """What the job measured for the indicator check: ``run``, each sample's indicators in this run (the samples that
    carry them, failures already left out); ``reference``, the reference rows' indicators by sample id (the rows that
    carry them); ``allowances``, per tested indicator, the largest excess rate the reference's A/A replicates show;
    ``failures``, the backend's failures left out of both arms (None: none); ``clean``, the samples neither arm cut
    (None: none is left, or no reference arm to pair)."""

    mode: str  # stats.indicators
    run: Mapping[str, Marks]
    reference: Mapping[str, Marks]
    allowances: Mapping[str, float] = field(default_factory=dict)
    failures: Failures | None = None
    clean: CleanSubset | None = None


@dataclass(frozen=True)
class CleanVerdict:
    """The verdict on the samples neither arm cut, stopped at the token limit or failed: shown, never the job's."""

    n: int
    outcome: str
    line: str


@dataclass
class IndicatorCheck:
    """What the job found on its indicators; ``blocks``: the job's verdict is INCONCLUSIVE because of them."""

    mode: str  # stats.indicators
    tests: list[IndicatorTest] = field(default_factory=list)
    run_counts: dict[str, int] = field(default_factory=dict)  # samples the run flags, per indicator it knows
    run_known: int = 0  # samples whose indicators the run knows
    reference_known: bool = False  # the reference's rows carry indicators (False: recorded before they were kept)
    failures: Failures | None = None
    clean: CleanVerdict | None = None

    @property
    def over_cap(self) -> bool:
        return self.failures is not None and self.failures.over_cap

    @property
    def more_often(self) -> list[IndicatorTest]:
        return [t for t in self.tests if t.more_often]

    @property
    def blocks(self) -> bool:
        return self.over_cap or (self.mode == "paired" and bool(self.more_often))

    def headline(self) -> str:
        """Why the verdict is INCONCLUSIVE, in one clause (the verdict line's)."""
        parts = [f"{DESCRIPTIONS[t.name]} in {t.run} vs {t.reference} of {t.n}, p={t.p_value:.3g}"
                 for t in self.more_often] if self.mode == "paired" else []
        if self.over_cap:
            assert self.failures is not None
            parts.insert(0, f"the backend failed on {self.failures.excluded} of {self.failures.n} samples, more than "
                            f"stats.max_failed_share={self.failures.cap:g}")
        return "not like-for-like: " + "; ".join(parts)

    def reasons(self) -> list[str]:
        """Why the verdict is INCONCLUSIVE, with the counts (empty when it is not blocked)."""
        out = []
        if self.over_cap:
            assert self.failures is not None
            out.append(f"INCONCLUSIVE: the backend failed on more than stats.max_failed_share of the samples "
                       f"({self.failures.describe()})")
        if self.mode == "paired":
            out += [f"INCONCLUSIVE: the run shows '{DESCRIPTIONS[t.name]}' more often than the reference: "
                    f"{t.describe()} <= alpha {t.alpha:g}" for t in self.more_often]
        return out

    def lines(self) -> list[str]:
        """The report's lines: each indicator's counts (or why the reference's are unknown) and the clean verdict; the
        failures and the reasons are the job's notes."""
        out = []
        if self.tests:
            out += [f"{DESCRIPTIONS[t.name]}: {t.describe()}" for t in self.tests]
        elif self.run_known and self.mode != "off":
            counts = ", ".join(f"{DESCRIPTIONS[k]} {v}" for k, v in self.run_counts.items())
            out.append(f"indicators: the reference's are unknown (recorded without them, without per-sample rows, or on other "
                       f"questions), so none is "
                       f"tested; this run, of {self.run_known} samples: {counts}")
        if self.clean is not None:
            out.append(f"on the {self.clean.n} samples neither arm cut, stopped at the token limit or failed: "
                       f"{self.clean.line}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """report.json's and results.json's ``indicators``."""
        failures = self.failures
        return {"mode": self.mode, "blocks": self.blocks, "reasons": self.reasons(),
                "reference_known": self.reference_known, "run_known": self.run_known,
                "run_counts": dict(self.run_counts), "tests": [t.to_dict() for t in self.tests],
                "failures": None if failures is None else {"n": failures.n, "run": failures.run,
                                                           "reference": failures.reference,
                                                           "excluded": failures.excluded, "cap": failures.cap,
                                                           "over_cap": failures.over_cap},
                "clean": None if self.clean is None else {"n": self.clean.n, "verdict": self.clean.outcome,
                                                          "line": self.clean.line}}
