"""The subset TensorRT-LLM's evaluators draw: ``datasets.Dataset.shuffle(seed)`` and the first n rows.

``Dataset.shuffle(seed=s)`` orders the rows by ``numpy.random.default_rng(s).permutation(len)``;
drawing the same permutation here gives the very rows upstream evaluates for a given seed (seed 0
is upstream's default), without depending on how a source was loaded.
"""

from __future__ import annotations


def shuffled_rows(num_rows: int, seed: int, num_samples: int) -> list[int]:
    """Row indices of the first ``num_samples`` rows after upstream's seeded shuffle, in shuffled order."""
    import numpy as np

    order = np.random.default_rng(seed).permutation(num_rows)
    return [int(i) for i in order[:max(0, min(num_samples, num_rows))]]
