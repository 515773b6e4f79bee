"""What a task's score scale says about a test before it runs: the spread of per-sample scores
(``sigma`` for a metric that is not 0/100), and whether a drop of theta, or of the tolerance, still lands above
chance."""

from __future__ import annotations

import math
from collections.abc import Iterable


def estimate_sigma(scores: Iterable[float]) -> float:
    """Sample standard deviation (``ddof=1``) of per-sample scores: ``sigma`` for a non-Bernoulli metric.

    Step 1 of adding a task upstream: estimate sigma on the full dataset, then plan n with it.
    """
    import numpy as np

    arr = np.asarray([float(s) for s in scores], dtype=float)
    if arr.size < 2:
        raise ValueError(f"estimating sigma needs at least 2 scores, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("estimating sigma needs finite scores; got NaN or infinity")
    return float(np.std(arr, ddof=1))


def near_chance_warning(reference: float, theta: float, chance: float, higher_is_better: bool = True) -> str | None:
    """A warning when a regression of ``theta`` would land at or past chance level.

    ``chance`` is the score of a model that guesses (25 for 4-choice MMLU) or the metric's floor
    (its ceiling for a lower-is-better metric). If ``reference - theta <= chance`` (mirrored when
    lower is better), a model that regressed by theta could not be told apart from one that
    guesses, so passing the test says little. Returns ``None`` when there is room.
    """
    for name, value in (("reference", reference), ("theta", theta), ("chance", chance)):
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    if theta < 0:
        raise ValueError(f"theta must be >= 0, got {theta!r}")
    if higher_is_better:
        room = reference - chance
        near = reference - theta <= chance
        side, beyond = "above", "below"
    else:
        room = chance - reference
        near = reference + theta >= chance
        side, beyond = "below", "above"
    if not near:
        return None
    if room <= 0:
        return (
            f"warning: the reference {reference:g} is not {side} chance level ({chance:g}); "
            "this task cannot show whether the model regressed. Use a task the model does better than chance."
        )
    return (
        f"warning: the reference {reference:g} is only {room:.2f} points {side} chance level ({chance:g}), "
        f"which is not more than theta ({theta:.2f}): a model that regressed by theta would score at or "
        f"{beyond} chance, and the test cannot tell it from one that guesses. Evaluate more samples "
        "(a smaller theta) or use a task the model does clearly better than chance on."
    )


def near_chance(reference: float, tolerance: float, chance: float | None, higher_is_better: bool) -> str | None:
    """The warning for ``reference`` within ``tolerance`` of ``chance`` (mirrored when lower is better), else None.

    Against such a reference a GO says little (a model that guesses would be within tolerance) and a regression may
    not be showable at all. Said when the reference is recorded and at every look that judges against it, whatever
    the look's n: the tolerance, not the look's own theta, is the drop a GO accepts."""
    if chance is None:
        return None
    room = reference - chance if higher_is_better else chance - reference
    if room > tolerance:
        return None
    side, beyond = ("above", "below") if higher_is_better else ("below", "above")
    where = (f"only {room:.2f} points {side}" if room > 0 else f"not {side}")
    return (f"warning: the reference {reference:g} is {where} the task's chance level ({chance:g}), within the "
            f"tolerance ({tolerance:.3g} points): a model that guesses would score within tolerance of it (or "
            f"{beyond}), so a GO says little and a regression may not be showable; gate this model on a task it "
            "does clearly better than chance on")
