"""The one small protocol every paired rule answers: does it apply to these pairs (and why not), and what it
decides. The dispatcher tries its rules in order and lets the first that applies decide; clustering wraps an inner
rule (:class:`runner.stats.rules.clustered.Clustered`), it does not recurse through the dispatcher."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from runner.stats.data.claims import Claims
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.paired_result import PairedResult
from runner.stats.data.pairing import PairedScores


@dataclass
class Case:
    """What a paired rule decides on: the pairs, the test's numbers, the margin of the NO-GO claim and the tolerance
    of the GO claim (points), the notes the decision prints, the task's declared score bounds and, when the job
    clusters, the cluster key and each pair's cluster."""

    pairs: PairedScores
    params: HypothesisParams
    stats: Any
    margin: float
    tolerance: float
    notes: list[str]
    bounds: tuple[float, float] | None = None
    clusters: tuple[str, list[str]] | None = None


@dataclass(frozen=True)
class Found:
    """A rule's outcome: the test of the NO-GO claim, and both claims with the bounds that invert them."""

    result: PairedResult
    claims: Claims


class Rule(Protocol):
    """A paired rule of the decision."""

    def applies(self, case: Case) -> str | None:
        """None when the rule decides this case; else why it does not (in words)."""
        ...

    def decide(self, case: Case) -> Found:
        """Both claims on the case's pairs."""
        ...
