"""What the statistics read of a reference entry: its value, an explicit threshold, the n it was measured on, and
where it lives (for messages). :class:`runner.references.store.Reference` is one; :class:`Entry` is the plain
form the calibration and tests build without a references file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class ReferenceEntry(Protocol):
    """A matched reference entry, as the decision reads it."""

    @property
    def value(self) -> float: ...

    @property
    def threshold(self) -> float | None: ...

    @property
    def path(self) -> Path | str: ...

    @property
    def index(self) -> int: ...

    @property
    def samples_measured(self) -> int | None: ...


@dataclass(frozen=True)
class Entry:
    """A reference entry given by its numbers (``samples_measured``: the n its value was measured on, if known)."""

    value: float
    threshold: float | None = None
    samples_measured: int | None = None
    path: str = "(no references file)"
    index: int = 0
