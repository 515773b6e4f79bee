"""Issue 47's rules through the job's decision: clustered claims count the clusters that carry the variance."""

from __future__ import annotations

from dataclasses import replace

from benchmarks.calibration_grid.clustered import _decide
from runner.stats.settings import StatsConfig


def _padded_run() -> tuple[list[float], list[float], list[str]]:
    """3 clusters of 150 (each 3 wins and 2 losses among concordant answers) and 9 single samples: 12 clusters,
    3 of which carry a difference."""
    ref, new, labels = [], [], []
    for c in range(3):
        pairs = [(0.0, 100.0)] * 3 + [(100.0, 0.0)] * 2 + [(100.0, 100.0)] * 100 + [(0.0, 0.0)] * 45
        ref += [r for r, _ in pairs]
        new += [w for _, w in pairs]
        labels += [f"big{c}"] * len(pairs)
    for s in range(9):
        ref.append(100.0)
        new.append(100.0)
        labels.append(f"single{s}")
    return ref, new, labels


def test_single_samples_do_not_count_toward_min_clusters():
    ref, new, labels = _padded_run()
    anything = _decide(ref, new, labels, 5.0, paired=True, stats=replace(StatsConfig(), min_clusters=2))
    assert anything.claims.within  # the clustered and independent tests both show GO at tolerance 5
    now = _decide(ref, new, labels, 5.0, paired=True)
    assert not now.claims.within and now.outcome == "INCONCLUSIVE"
    assert now.clustering.clusters == 12 and now.clustering.carrying == 3
    assert any("3 of 12 clusters" in n for n in now.notes)
