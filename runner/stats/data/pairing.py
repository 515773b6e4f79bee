"""Pairing two runs' per-sample scores by sample id: what a paired test needs as input.

A paired test compares the reference run and the new run on the samples both answered; the ids
only one run has are counted, not tested. A score that is not a finite number is the user's data
going wrong (a broken per-sample file), so it stops with a :class:`PairingError`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runner.contract.errors import ConfigError, UserError


class PairingError(UserError, ValueError):
    """The two runs cannot be paired (no common sample id, a non-numeric score)."""


@dataclass(frozen=True)
class PairedScores:
    """Scores of the samples both runs answered, matched by sample id (sorted by id)."""

    ids: tuple[str, ...]
    reference: tuple[float, ...]
    new: tuple[float, ...]
    reference_only: tuple[str, ...]  # ids only the reference run has
    new_only: tuple[str, ...]  # ids only the new run has

    @property
    def n_matched(self) -> int:
        return len(self.ids)

    def summary(self) -> str:
        total_ref = self.n_matched + len(self.reference_only)
        return (
            f"{self.n_matched} of {total_ref} reference sample ids matched "
            f"({len(self.reference_only)} only in the reference, {len(self.new_only)} only in the new run)"
        )


def _score(value: object, run: str, sample_id: str) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        out = math.nan
    if not math.isfinite(out):
        raise PairingError(
            "a per-sample score is not a finite number",
            where=f"{run} run, sample '{sample_id}'",
            given=repr(value),
            allowed="a finite number on the metric's scale",
        )
    return out


def pair_scores(reference: Mapping[str, float], new: Mapping[str, float]) -> PairedScores:
    """Match the two runs' per-sample scores by sample id.

    Raises :class:`PairingError` (a :class:`UserError` and a :class:`ValueError`) when no id
    is common to both runs, or when a matched score is not a finite number.
    """
    common = sorted(set(reference) & set(new))
    if not common:
        raise PairingError(
            "the reference run and the new run have no sample id in common",
            given=f"{len(reference)} reference ids (e.g. {_examples(reference)}), "
            f"{len(new)} new ids (e.g. {_examples(new)})",
            fix="compare runs made on the same task, subset and seed, so that sample ids match",
        )
    ref_scores = tuple(_score(reference[i], "reference", i) for i in common)
    new_scores = tuple(_score(new[i], "new", i) for i in common)
    common_set = set(common)
    return PairedScores(
        ids=tuple(common),
        reference=ref_scores,
        new=new_scores,
        reference_only=tuple(sorted(i for i in reference if i not in common_set)),
        new_only=tuple(sorted(i for i in new if i not in common_set)),
    )


def _examples(ids: Iterable[str], k: int = 3) -> str:
    first = sorted(ids)[:k]
    return ", ".join(repr(i) for i in first) if first else "none"

def is_binary(pairs: PairedScores) -> bool:
    """Whether every matched score is 0/1 or every one is 0/100."""
    values = set(pairs.reference) | set(pairs.new)
    return values <= {0.0, 1.0} or values <= {0.0, 100.0}


def unpaired_because(problem: str, method: str, reference: Any, what: str, notes: list[str]) -> None:
    """The reference cannot be paired (``problem``): ``stats.method=paired`` refuses with a message; otherwise the
    reason goes into ``notes`` and the unpaired test decides. ``what``: what could not be paired."""
    if method == "paired":
        raise ConfigError(f"the reference's {what} cannot be paired with this run",
                          where=f"{reference.path} entry {reference.index}", given=problem,
                          fix="evaluate the samples the reference was recorded on (same seed, dataset and prompts), "
                              "record the reference again, or use stats.method=auto|unpaired")
    notes.append(f"unpaired test: {problem}")
