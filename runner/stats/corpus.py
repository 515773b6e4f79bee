"""Corpus metrics (corpus BLEU, a perplexity pooled over words): the bootstrap rule.

A corpus metric is not a mean of per-sample scores, so the t and McNemar tests do not apply to it. As
lm-evaluation-harness does for its standard errors, the documents are resampled with replacement and the
metric is recomputed on each resample; a group's subtasks (clusters) are resampled whole instead, so the
spread keeps their correlation.

- Unpaired (TensorRT-LLM's z-test): the per-sample spread it assumes is the bootstrap standard error of the
  metric times sqrt(n), so its theta and threshold speak of the corpus metric.
- Paired: one set of joint resamples gives the difference of the metric on both sides for each replicate; the
  p-value and the interval are the basic bootstrap's, the interval at the order statistic that inverts the
  p-value (:func:`runner.stats.paired.basic_bootstrap`), so the interval always agrees with the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from runner.contract.evaluator import CorpusMetric
from runner.stats.paired import basic_bootstrap, check_resamples
from runner.stats.paired_result import PairedResult
from runner.stats.planning import _k

def over_resamples(metric: CorpusMetric, items: Sequence[Any]) -> Callable[[list[int]], float]:
    """The metric on a resample of ``items`` given by its indices: the sum of the items' statistics rows when the
    metric has an additive form (computed once), else the metric recomputed on the resampled items."""
    if metric.statistics is not None and metric.from_statistics is not None:
        import numpy as np

        rows, score = np.asarray(metric.statistics(items)), metric.from_statistics
        return lambda idx: score(rows[idx].sum(axis=0))
    return lambda idx: metric.compute([items[i] for i in idx])


def resamples(n: int, n_boot: int, seed: int, clusters: Sequence[str] | None = None) -> list[list[int]]:
    """``n_boot`` index lists, each a resample with replacement of ``n`` samples, or of the clusters (every
    sample of a drawn cluster, as often as it is drawn), from a generator seeded by ``seed``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    if clusters is None:
        return [list(map(int, rng.integers(0, n, size=n))) for _ in range(n_boot)]
    members: dict[str, list[int]] = {}
    for i, label in enumerate(clusters):
        members.setdefault(label, []).append(i)
    groups = list(members.values())
    return [[i for g in rng.integers(0, len(groups), size=len(groups)) for i in groups[int(g)]]
            for _ in range(n_boot)]


def _check(n_boot: int, n: int) -> None:
    check_resamples(n_boot)
    if n < 2:
        raise ValueError(f"a corpus bootstrap needs at least 2 samples, got {n}")


def bootstrap_sigma(items: Sequence[Any], metric: CorpusMetric, n_boot: int, seed: int,
                    clusters: Sequence[str] | None = None) -> float:
    """The per-sample spread TensorRT-LLM's unpaired test assumes, for a corpus metric: the bootstrap standard
    error of the metric over ``items`` (sd of the resampled values, ddof 1) times sqrt(n)."""
    import numpy as np

    n = len(items)
    _check(n_boot, n)
    on = over_resamples(metric, items)
    values = [on(idx) for idx in resamples(n, n_boot, seed, clusters)]
    return float(np.std(values, ddof=1)) * math.sqrt(n)


@dataclass(frozen=True)
class Replicates:
    """One paired bootstrap of a corpus metric: its value on both sides and each resample's difference."""

    reference: float
    new: float
    differences: Any  # numpy array: statistic(new[idx]) - statistic(ref[idx]) per resample
    n: int
    resampled: str  # "documents" or "clusters"


def replicate(ref: Sequence[Any], new: Sequence[Any], metric: CorpusMetric, n_boot: int = 1000, seed: int = 0,
              clusters: Sequence[str] | None = None) -> Replicates:
    """``ref[i]`` and ``new[i]`` are one sample's items on both sides; each replicate recomputes the metric on
    both sides over the same resampled indices."""
    import numpy as np

    if len(ref) != len(new):
        raise ValueError(f"paired items need equal lengths, got {len(ref)} and {len(new)}")
    n = len(ref)
    _check(n_boot, n)
    ref_value, new_value = float(metric.compute(ref)), float(metric.compute(new))
    if not (math.isfinite(ref_value) and math.isfinite(new_value)):
        raise ValueError(f"the corpus metric is not a finite number (reference {ref_value}, new {new_value})")
    on_ref, on_new = over_resamples(metric, ref), over_resamples(metric, new)
    diffs = np.asarray([on_new(idx) - on_ref(idx) for idx in resamples(n, n_boot, seed, clusters)], dtype=float)
    return Replicates(ref_value, new_value, diffs, n, "clusters" if clusters is not None else "documents")


def paired_corpus_test(reps: Replicates, alpha: float, beta: float, higher_is_better: bool = True,
                       tolerance: float = 0.0, gate: str = "regression") -> PairedResult:
    """The paired bootstrap test of a corpus metric on the replicates of :func:`replicate`.

    The observed difference ``new - reference`` is oriented so that negative is worse (its sign flipped when
    lower is better) and shifted by ``tolerance`` (points): regression gate, H0 the shifted difference >= 0;
    non-inferiority gate, H0 <= 0; each rejected when ``p < alpha``. ``sd_diff`` is the replicates' sd times
    sqrt(n) (a per-sample spread, as the sample-size advice reads it), ``theta_paired`` the drop the design
    detects at this n."""
    import numpy as np

    observed = reps.new - reps.reference
    sign = 1.0 if higher_is_better else -1.0
    slack = 1e-12 * max(1.0, abs(observed), float(np.abs(reps.differences).max()))
    p, ci = basic_bootstrap(observed, reps.differences, sign, tolerance, alpha, gate == "regression", slack)
    se = float(reps.differences.std(ddof=1))
    return PairedResult.gated(
        p, alpha, beta, higher_is_better, gate, tolerance,
        method=f"paired corpus bootstrap ({reps.differences.size} resamples of the {reps.resampled})",
        n=reps.n,
        mean_diff=observed,
        theta_paired=_k(alpha, beta) * se,
        reference_mean=reps.reference,
        new_mean=reps.new,
        sd_diff=se * math.sqrt(reps.n),
        ci=ci,
        ci_method=f"bootstrap basic over resampled {reps.resampled} (inverts its p-value)",
        pooled=True,
    )
