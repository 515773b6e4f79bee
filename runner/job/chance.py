"""Near chance: a reference so close to the task's chance level that a drop of the tolerance would reach it.

Against such a reference a GO says little (a model that guesses would be within tolerance) and a regression may
not be showable at all. Said when the reference is recorded and at every look that judges against it, whatever
the look's n: the tolerance, not the look's own theta, is the drop a GO accepts."""

from __future__ import annotations


def near_chance(reference: float, tolerance: float, chance: float | None, higher_is_better: bool) -> str | None:
    """The warning for ``reference`` within ``tolerance`` of ``chance`` (mirrored when lower is better), else None."""
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
