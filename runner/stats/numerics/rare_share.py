"""The fewest samples on which an asymptotic rule claims: a sample must not miss a rare share of the population.

A change (or a spread) carried by a share ``q`` of the samples is missing from a sample of ``n`` with probability
``(1 - q)^n``; the sample then looks clean and no check that reads it can tell (Bahadur & Savage 1956: no n serves
every distribution). So a rule whose alpha holds only asymptotically claims from the least ``n`` with
``(1 - q)^n <= alpha``, ``q`` an assumption about the metric that the setting naming it states: the paired t-test's
``stats.t_rare_share``, the unpaired corpus bootstrap's ``stats.corpus_rare_share``.
"""

from __future__ import annotations

import math


def min_samples(alpha: float, share: float) -> int:
    """The least n whose sample misses a tail of ``share`` of the samples at most ``alpha`` of the time:
    ``(1 - share)^n <= alpha``."""
    return max(2, math.ceil(math.log(alpha) / math.log1p(-share) - 1e-9))
