"""A job's last word on its decision: at a sequential or extendable run's last look the monitor's result decides,
with both claims read from that look's repeated interval; then the notes the final claims call for."""

from __future__ import annotations

import math
from typing import Union

from runner.stats.data.claims import Claims, oriented
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.decision import Decision
from runner.stats.numerics.paired_binomial.tango import tango_bounds
from runner.stats.rules.extension import ExtensionResult, Extensions
from runner.stats.rules.sequential import Monitor as SequentialMonitor

Monitor = Union[SequentialMonitor, Extensions]
"""What watches the looks of a run: planned sequential looks, or an extendable run's."""


def concluded(decision: Decision, monitor: Monitor | None, params: HypothesisParams) -> Decision:
    """``decision`` (the fixed rule's on every sample so far) as the run's final one: a monitor's result decides a
    sequential or extendable run, and the margin note is added where the final claims call for it."""
    if monitor is not None:
        decision.sequential = monitor.result(decision.passed, decision.p_value)
        decision.passed = decision.sequential.passed
        if decision.claims is not None:
            seq, p = decision.sequential, decision.paired
            if isinstance(seq, ExtensionResult):
                counts = seq.counts
            else:
                counts = (*p.discordant, p.n) if p is not None and p.discordant is not None else None
            assert decision.tolerance is not None
            decision.claims = look_claims(not seq.passed, *seq.bound(), params.higher_is_better,
                                          params.alpha, decision.margin, decision.tolerance.points, counts)
    note = margin_note(decision)
    if note is not None:
        decision.notes.append(note)
    return decision


def margin_note(decision: Decision) -> str | None:
    """For a NO-GO that is "worse, but within tolerance" at margin 0: the settings that say a drop within the
    tolerance is fine (a margin, or the non-inferiority gate), since the verdict itself only names the gate."""
    if not (decision.both_shown and decision.gate == "regression" and decision.margin == 0 and decision.tolerance):
        return None
    tol = decision.tolerance.points
    return (f"NO-GO although the drop is within the tolerance ({tol:.4g}): at stats.margin=0 (upstream's rule) any "
            f"drop shown is a regression. If a drop within tolerance is fine for you, say how much: stats.margin=M "
            f"(NO-GO only when a drop larger than M points is shown; M <= {tol:.4g}), or stats.gate=noninferiority "
            f"(GO whenever a drop smaller than {tol:.4g} is shown)")


def look_claims(regression: bool, crit: float | None, rci: tuple[float, float] | None, higher_is_better: bool,
               alpha: float, margin: float, tolerance: float, counts: tuple[int, int, int] | None) -> Claims | None:
    """A look of a sequential or extendable job: its repeated interval (``rci`` at critical value ``crit``)
    decides both ways. ``counts``: (b, c, n) at that look for 0/100 scores, whose two sides are Tango's
    bounds at the same critical value (the look's statistic is Tango's at the margin, so the bad side is
    below ``-margin`` exactly when the look showed a regression); None for the other kinds."""
    if rci is None or crit is None or not math.isfinite(crit):
        return None
    if counts is not None:
        b, c, n = counts
        low, high = tango_bounds(b, c, n, crit)
        ci = oriented(100.0 * low, 100.0 * high, higher_is_better)
        return Claims(regression, low > -tolerance / 100.0, ci[0], ci[1],
                      "repeated CI, group-sequential: Tango score at the look's bound", None)
    gain_low, _ = oriented(*rci, higher_is_better)
    return Claims(regression, gain_low > -tolerance, rci[0], rci[1], "repeated CI, group-sequential", None)
