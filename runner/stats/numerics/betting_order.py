"""The order the betting test bets in, fixed by the sample ids alone: no seed a user could retry.

The betting test's capital is a supermartingale for any order chosen before the scores are seen, so its rate
holds in every order; but the verdict moves with the order. Drawn from ``stats.bootstrap_seed``, the same data
changed verdict between seeds in a quarter to a half of data sets, and retrying seeds until GO made the false
GO rate 0.10 with 5 seeds and 0.25 with 20 (docs/statistics.md). Here each sample's place is the SHA-256 of a
fixed label and its id: a function of the ids, known before any score, the same on every rerun of the same
samples, and unrelated to how a dataset is sorted (by subject, by difficulty), which a file order is not. The
label is a constant of the rule, not a setting: changing it would be a seed by another name.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

LABEL = b"runner betting order 1\x00"
"""Prefixed to every id before hashing; part of the rule (a new label is a new rule, recorded as such)."""

RULE = "SHA-256 of the sample ids"
"""How the order is named in a report."""


def key(sample_id: str) -> bytes:
    """The sort key of one sample: SHA-256 of the rule's label and the id (UTF-8)."""
    return hashlib.sha256(LABEL + sample_id.encode("utf-8")).digest()


def order(ids: Sequence[str]) -> list[int]:
    """Positions of ``ids`` in betting order: sorted by :func:`key`, ties (equal ids) by position.

    Equal ids would be one sample scored twice; the caller pairs by id, so they do not occur there, and the
    tie rule only makes the function total."""
    return sorted(range(len(ids)), key=lambda i: (key(str(ids[i])), i))
