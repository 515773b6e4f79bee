"""Resampling with replacement, seeded: the draws, the resampled units (samples or whole clusters), the means
of resamples, and the basic bootstrap's p-value and interval from one set of replicates."""

from __future__ import annotations

import math
from typing import Any, Sequence



def units_of(n: int, clusters: Sequence[str] | None) -> list[list[int]]:
    """The resampled units: each sample alone, or each cluster's samples (in first-seen order)."""
    if clusters is None:
        return [[i] for i in range(n)]
    members: dict[str, list[int]] = {}
    for i, label in enumerate(clusters):
        members.setdefault(label, []).append(i)
    return list(members.values())


def draws(units: int, n_boot: int, seed: int) -> Any:
    """``n_boot`` x ``units`` unit indices, each row a resample with replacement, seeded by ``seed``."""
    import numpy as np

    return np.random.default_rng(seed).integers(0, units, size=(n_boot, units))


def counts(drawn: Any, units: int) -> Any:
    """How often each unit is drawn in each resample (rows of ``drawn``)."""
    import numpy as np

    rows = drawn.shape[0]
    flat = (drawn + units * np.arange(rows)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * units).reshape(rows, units).astype(float)


def resamples(n: int, n_boot: int, seed: int, clusters: Sequence[str] | None = None) -> list[list[int]]:
    """``n_boot`` index lists, each a resample with replacement of ``n`` samples, or of the clusters (every
    sample of a drawn cluster, as often as it is drawn), from a generator seeded by ``seed``."""
    groups = units_of(n, clusters)
    return [[i for g in row for i in groups[int(g)]] for row in draws(len(groups), n_boot, seed)]



def check_resamples(n_boot: int) -> None:
    """A bootstrap's number of resamples is a whole number >= 1."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot must be a whole number >= 1, got {n_boot!r}")


def basic_bootstrap(observed: float, replicates, sign: float, tolerance: float, alpha: float,  # noqa: ANN001
                    regression: bool, slack: float) -> tuple[float, tuple[float, float]]:
    """The p-value and two-sided interval (new - reference) of the basic bootstrap, from one set of replicates
    of the difference: the interval is the order statistic at which it inverts the p-value exactly.

    The basic replicates of the oriented difference are ``sign * (2 observed - replicate)``; a resample is as
    extreme as the observed difference under H0 exactly when its basic replicate is on the far side of
    ``-tolerance``, so ``p = (1 + that count) / (n + 1)``. ``slack`` (tiny) keeps float ties on the H0 side."""
    import numpy as np

    n_boot = int(np.size(replicates))
    basic = sign * (2.0 * observed - np.asarray(replicates, dtype=float))
    high, low = basic + slack, basic - slack
    extreme = int(np.count_nonzero(high >= -tolerance)) if regression else int(np.count_nonzero(low <= -tolerance))
    p = (1 + extreme) / (n_boot + 1)
    # k = most extreme replicates p can count and still be < alpha; the (k+1)-th replicate from each end is the
    # bound: p < alpha iff (k+1)-th largest of high < -tolerance (regression) or (k+1)-th smallest of low > it
    k = int(alpha * (n_boot + 1)) + 1
    while k >= 0 and not (1 + k) / (n_boot + 1) < alpha:
        k -= 1
    if k < 0:
        lo_o, hi_o = -math.inf, math.inf
    else:
        lo_o = float(np.partition(low, k)[k])
        hi_o = float(-np.partition(-high, k)[k])
    return p, ((lo_o, hi_o) if sign > 0 else (-hi_o, -lo_o))


def bootstrap_means(values, n_boot: int, seed: int):  # noqa: ANN001, ANN201 - numpy array in and out
    """Means of ``n_boot`` resamples (with replacement) of ``values``, from a generator seeded by ``seed``."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    n = values.size
    rng = np.random.default_rng(seed)
    out = np.empty(n_boot)
    chunk = max(1, (1 << 20) // n)
    done = 0
    while done < n_boot:
        rows = min(chunk, n_boot - done)
        out[done:done + rows] = values[rng.integers(0, n, size=(rows, n))].mean(axis=1)
        done += rows
    return out
