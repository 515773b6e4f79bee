"""The system's own noise, computed: an A/A replicate of paired per-sample scores, the floor it sets, the flips it
leads one to expect, and a run's fidelity to the reference's option log-likelihoods.

A paired test of a continuous metric holds its alpha against the noise of drawing samples, not against a systematic
numeric shift with nothing changed: 40 documents all moving by +0.00015 is a "significant" regression to a t-test.
The replicate measures that shift; a NO-GO claim of a continuous rule is then tested against the larger of the
margin and the shift's one-sided upper bound (the floor). A 0/100 rule keeps its p-values (a symmetric flip only
costs power) and reports the discordance the replicate leads one to expect.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from runner.stats.data.noise import CONFIDENCE, Fidelity, Replicate
from runner.stats.numerics.token_fidelity import token_fidelity


def replicate(perturbation: str, a: Sequence[float], b: Sequence[float], changed: int,
              a_logliks: Sequence[Sequence[float]] | None = None, b_logliks: Sequence[Sequence[float]] | None = None,
              hosts: Mapping[str, Mapping[str, str]] | None = None, confidence: float = CONFIDENCE,
              a_tokens: Sequence[str] | None = None, b_tokens: Sequence[str] | None = None) -> Replicate:
    """The replicate of paired per-sample scores ``a`` (as recorded) and ``b`` (perturbed), ``changed`` of whose
    predictions differ; ``*_logliks``: each sample's scored options' log-likelihoods, in the same order;
    ``*_tokens``: each sample's per-position top-k record (a teacher-forced text), for the token fidelity."""
    import numpy as np
    from scipy import stats

    if len(a) != len(b) or not a:
        raise ValueError(f"a replicate pairs equal, non-empty score lists (got {len(a)} and {len(b)})")
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = y - x
    mean = float(d.mean())
    half = 0.0
    if len(d) > 1 and float(d.std(ddof=1)) > 0:
        half = float(stats.t.ppf(confidence, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))
    binary = bool(np.isin(x, (0.0, 100.0)).all() and np.isin(y, (0.0, 100.0)).all())
    worse = int(((x == 100.0) & (y == 0.0)).sum()) if binary else None
    better = int(((x == 0.0) & (y == 100.0)).sum()) if binary else None
    ll_max = ll_p99 = kl = None
    if a_logliks is not None and b_logliks is not None:
        moves = [abs(q - p) for ra, rb in zip(a_logliks, b_logliks) for p, q in zip(ra, rb)]
        if moves:
            ll_max, ll_p99 = float(max(moves)), float(np.percentile(moves, 99))
        kl = fidelity(a_logliks, b_logliks).option_kl
    tokens = None
    if a_tokens is not None and b_tokens is not None and a_logliks is not None and b_logliks is not None:
        tokens = token_fidelity(a_tokens, b_tokens, [sum(r) for r in a_logliks], [sum(r) for r in b_logliks])
    return Replicate(perturbation, len(d), int(changed), mean, mean - half, mean + half, worse, better, ll_max, ll_p99,
                     confidence, {k: dict(v) for k, v in (hosts or {}).items()}, kl, tokens=tokens)



def fidelity(a_logliks: Sequence[Sequence[float]], b_logliks: Sequence[Sequence[float]]) -> Fidelity:
    """The :class:`Fidelity` of paired option log-likelihoods (samples with fewer than two options count toward
    neither figure)."""
    import numpy as np

    picks, kls = 0, []
    for ra, rb in zip(a_logliks, b_logliks):
        if len(ra) < 2 or len(ra) != len(rb):
            continue
        x, y = np.asarray(ra, dtype=float), np.asarray(rb, dtype=float)
        picks += int(np.argmax(x) != np.argmax(y))
        p, q = np.exp(x - np.logaddexp.reduce(x)), y - np.logaddexp.reduce(y)
        kls.append(float(np.sum(p * ((x - np.logaddexp.reduce(x)) - q))))
    return Fidelity(len(kls), picks, float(np.mean(kls)) if kls else None)



def floor(replicates: Sequence[Replicate]) -> float:
    """The noise floor of a metric: the largest shift any replicate does not rule out (0 with none)."""
    return max((r.floor for r in replicates), default=0.0)


def expected_discordance(replicates: Sequence[Replicate], n: int) -> float | None:
    """How many of ``n`` paired 0/100 samples the noise alone flips, at the largest replicate's rate (None: no 0/100
    replicate)."""
    rates = [r.discordant / r.n for r in replicates if r.discordant is not None and r.n]
    return max(rates) * n if rates else None


def discordance_upper(replicates: Sequence[Replicate], n: int, confidence: float = CONFIDENCE) -> float | None:
    """The one-sided upper ``confidence`` bound of the flips noise alone causes among ``n`` paired 0/100 samples: the
    Clopper-Pearson bound of the largest replicate's discordance rate, times ``n`` (None: no 0/100 replicate)."""
    from scipy import stats

    bounds = [1.0 if r.discordant >= r.n else float(stats.beta.ppf(confidence, r.discordant + 1, r.n - r.discordant))
              for r in replicates if r.discordant is not None and r.n]
    return max(bounds) * n if bounds else None
