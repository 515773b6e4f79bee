"""Fidelity signals that plan a run, never decide it: a run's pick changes (or teacher-forced NLL change) against the
reference's, set beside the A/A replicate's, say whether the run is likely to fail and how many samples a verdict
needs.

A multiple-choice look: its pick-change rate's one-sided 95% Clopper-Pearson lower bound above the largest A/A rate's
upper bound means more answers move than the system's own noise moves: likely to fail; McNemar's test at the
look's agreement needs ``paired_min_samples(tolerance, agreement)`` samples to show a drop of the tolerance. Within
the floor, a GO (a drop smaller than the tolerance shown) needs that many at the agreement the noise allows. A
teacher-forced look: its NLL change's interval outside every replicate's means a systematic move; the samples a
paired t-test needs to show it follow from the look's own spread."""

from __future__ import annotations

import math
from collections.abc import Sequence

from runner.stats.data.noise import CONFIDENCE, Fidelity, Replicate
from runner.stats.numerics.normal import t_quantile, z
from runner.stats.planning.paired import paired_feasible, paired_min_samples


def rate_bounds(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """One-sided ``confidence`` Clopper-Pearson lower and upper bounds of a rate of ``k`` in ``n``."""
    from scipy import stats

    lower = 0.0 if k == 0 else float(stats.beta.ppf(1 - confidence, k, n - k + 1))
    upper = 1.0 if k >= n else float(stats.beta.ppf(confidence, k + 1, n - k))
    return lower, upper


def aa_pick_rate(replicates: Sequence[Replicate]) -> tuple[float, float] | None:
    """The largest A/A answer-change rate of the replicates of a multiple-choice or 0/100 metric (a changed pick is a
    changed answer there) and its upper bound (None: none)."""
    rates = [(r.answer_changes / r.n, rate_bounds(r.answer_changes, r.n)[1])
             for r in replicates if (r.option_kl is not None or r.worse is not None) and r.n]
    return max(rates, key=lambda x: x[1]) if rates else None


def samples_for(tolerance: float, agreement: float, alpha: float, beta: float) -> int | None:
    """McNemar's samples for a drop of ``tolerance`` points at ``agreement`` (None: it does not fit)."""
    agreement = min(agreement, 1 - 1e-6)
    if tolerance <= 0 or not paired_feasible(tolerance, agreement):
        return None
    return paired_min_samples(tolerance, agreement, alpha, beta)


def pick_plan(found: Fidelity, replicates: Sequence[Replicate], tolerance: float, alpha: float,
              beta: float) -> str | None:
    """What a multiple-choice look's pick changes say about the run (None: no look or no A/A replicate)."""
    aa = aa_pick_rate(replicates)
    if not found.n or aa is None:
        return None
    rate = found.picks / found.n
    low, _ = rate_bounds(found.picks, found.n)
    if low > aa[1]:
        n = samples_for(tolerance, 1 - rate, alpha, beta)
        return (f"picks changed at {rate:.3f} (95% lower {low:.3f}), above the A/A floor {aa[0]:.3f} (95% upper "
                f"{aa[1]:.3f}): the run is likely to fail; "
                + (f"McNemar's test at agreement {1 - rate:.3f} needs about {n} samples to show a drop of "
                   f"{tolerance:.4g} points" if n else f"a drop of {tolerance:.4g} points does not fit that agreement"))
    agreement = 1 - max(rate, aa[0])
    n = samples_for(tolerance, agreement, alpha, beta)
    return (f"picks changed at {rate:.3f}, within the A/A floor (95% upper {aa[1]:.3f}): "
            + (f"a GO (a drop smaller than {tolerance:.4g} points shown) needs about {n} samples at agreement "
               f"{agreement:.3f}" if n else f"a tolerance of {tolerance:.4g} points does not fit agreement "
                                            f"{agreement:.3f}"))


def token_plan(found: Fidelity, replicates: Sequence[Replicate], alpha: float, beta: float) -> str | None:
    """What a teacher-forced look's NLL change says beside the replicates' (None: no token look or replicate)."""
    tokens = found.tokens
    floors = [r.tokens for r in replicates if r.tokens is not None]
    if tokens is None or not floors:
        return None
    floor = max(max(abs(f.nll.lower), abs(f.nll.upper)) for f in floors)
    shift = tokens.nll.mean
    if tokens.nll.lower > floor or tokens.nll.upper < -floor:
        half = (tokens.nll.upper - tokens.nll.lower) / 2
        sd = half * math.sqrt(tokens.n) / t_quantile(0.5 + tokens.confidence / 2, tokens.n - 1) if tokens.n > 1 else 0
        n = max(2, math.ceil(((z(1 - alpha) + z(1 - beta)) * sd / abs(shift)) ** 2)) if sd and shift else None
        return (f"NLL change {shift:+.3g}/token (95% {tokens.nll.lower:+.3g}, {tokens.nll.upper:+.3g}) beyond the "
                f"A/A floor +-{floor:.3g}: the model's numbers moved more than the system's noise moves them"
                + (f"; a paired t-test needs about {n} texts to show this change" if n else ""))
    return (f"NLL change {shift:+.3g}/token within the A/A floor +-{floor:.3g}: no move beyond the system's noise "
            "so far")


def look_plan(found: Fidelity | None, replicates: Sequence[Replicate], tolerance: float | None, alpha: float,
              beta: float) -> str | None:
    """The plan a fidelity look gives (None: nothing to say); a note beside the verdict, never the verdict."""
    if found is None:
        return None
    parts = [pick_plan(found, replicates, tolerance, alpha, beta) if tolerance is not None else None,
             token_plan(found, replicates, alpha, beta)]
    said = [p for p in parts if p]
    return "; ".join(said) + " (a look that plans, never a verdict)" if said else None
