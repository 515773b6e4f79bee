"""SCORE's metrics from per-question records: per-variant accuracies with upstream's names, their
minimum, maximum and range, and the consistency rate with a question-level bootstrap interval.

Scale: percent (0-100) like every runner metric; upstream reports fractions rounded to 4 decimals.
Accuracy per variant is macro-averaged over categories for MMLU-Pro prompt and option-order tasks
(upstream's ``*_macro_accuracy``) and micro elsewhere: AGIEval and MATH subsets are micro within a
subset and upstream's groups weight subsets by size, which is micro over the pooled questions; the
non-greedy summary is micro for every family (``seed_{s}_accuracy``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence


def metric_name(family: str, kind: str, key: str) -> str:
    """Upstream's per-variant metric name for a variant key (prompt_3, option_B, seed_2); MLflow-safe."""
    macro = family == "mmlu_pro"
    suffix = key.split("_", 1)[1]
    if kind == "prompt":
        return f"{suffix}_macro_accuracy" if macro else f"{suffix}_accuracy"
    if kind == "option_order":
        return f"per_option_macro_accuracy_{suffix}" if macro else f"per_option_accuracy_{suffix}"
    return f"seed_{suffix}_accuracy"


def consistency_metric(kind: str) -> str:
    return "options_consistency_rate" if kind == "option_order" else "consistency_rate"


def per_variant_accuracy(rows: Iterable[tuple[str, str, bool]], macro: bool) -> dict[str, float]:
    """``rows``: (metric name, group, correct). Percent per metric; macro = mean of per-group accuracies."""
    table: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for metric, group, correct in rows:
        table[metric][group if macro else ""].append(int(correct))
    out = {}
    for metric, groups in table.items():
        per_group = [sum(v) / len(v) for v in groups.values()]
        out[metric] = 100.0 * sum(per_group) / len(per_group)
    return out


@dataclass(frozen=True)
class Interval:
    value: float  # percent
    se: float
    low: float
    high: float


def bootstrap_ratio(agree: Sequence[int], pairs: Sequence[int], replicates: int, seed: int, level: float) -> Interval:
    """Consistency rate (sum agree / sum pairs, percent) and its question-level percentile bootstrap:
    questions are drawn with replacement and the ratio recomputed on each replicate."""
    import numpy as np

    a = np.asarray(agree, dtype=np.int64)
    p = np.asarray(pairs, dtype=np.int64)
    total = int(p.sum())
    value = float(100.0 * a.sum() / total) if total else 0.0
    n = len(a)
    if n < 2 or total == 0 or replicates < 2:
        return Interval(value, float("nan"), float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    reps = []
    chunk = max(1, 2_000_000 // n)
    for start in range(0, replicates, chunk):
        idx = rng.integers(0, n, size=(min(chunk, replicates - start), n))
        den = p[idx].sum(axis=1)
        reps.append(np.where(den > 0, a[idx].sum(axis=1) / np.maximum(den, 1), 0.0))
    r = 100.0 * np.concatenate(reps)
    tail = (1.0 - level) / 2.0
    return Interval(value, float(r.std(ddof=1)), float(np.quantile(r, tail)), float(np.quantile(r, 1.0 - tail)))


def summarize(per_variant: dict[str, float]) -> dict[str, float]:
    """Minimum, maximum and range over the per-variant accuracies (the paper's accuracy range)."""
    if not per_variant:
        return {}
    values = list(per_variant.values())
    return {"accuracy_min": min(values), "accuracy_max": max(values), "accuracy_range": max(values) - min(values)}
