"""The graphical multiple-testing procedure of Bretz, Maurer, Brannath & Posch (2009), and the graph of a
release's tiers.

Each hypothesis ``i`` holds a share ``w_i`` of alpha (the shares sum to at most 1) and a row ``G[i]`` saying how
its share moves to the others once it is rejected. Their Algorithm 1: reject any ``i`` with ``p_i < w_i alpha_i``;
give its share to the others along ``G[i]``, rewire the graph around it, and repeat until nothing more is
rejected. Any weights and any graph make a closed test of weighted Bonferroni tests, so the chance of rejecting
any true hypothesis is at most alpha under any dependence between the p-values; Holm's procedure is the graph
with equal weights that passes a share equally to the rest. Each test keeps its own alpha (``p_i`` is compared
with ``w_i alpha_i``), as the project's Holm does (``u = p / alpha``).

A release gives its critical tasks a larger share than Holm's equal split: :func:`tiers` builds that graph.
"""

from __future__ import annotations

import math

from collections.abc import Sequence
from dataclasses import dataclass

EPSILON = 1e-6
"""The share a tier passes to the other tier while its own tasks remain (Bretz et al.'s epsilon edges): enough
that a share is never lost when one tier is exhausted, too little to matter otherwise."""


@dataclass(frozen=True)
class Graph:
    """Initial shares of alpha and the transition matrix (rows: from, columns: to)."""

    weights: tuple[float, ...]
    transitions: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        m = len(self.weights)
        if len(self.transitions) != m or any(len(row) != m for row in self.transitions):
            raise ValueError(f"the transition matrix must be {m} x {m}")
        if any(w < 0 for w in self.weights) or sum(self.weights) > 1 + 1e-12:
            raise ValueError(f"weights must be >= 0 and sum to at most 1, got {self.weights}")
        for i, row in enumerate(self.transitions):
            if row[i] != 0 or any(g < 0 for g in row) or sum(row) > 1 + 1e-12:
                raise ValueError(f"row {i} of the transition matrix must be >= 0, 0 on the diagonal and sum to <= 1")


def reject(graph: Graph, p_values: Sequence[float], alphas: Sequence[float]) -> list[bool]:
    """Which hypotheses Algorithm 1 of Bretz et al. (2009) rejects (``p_i < w_i alpha_i``, strict as every rule
    of the project); the result does not depend on the order rejections are found in (their Theorem 1)."""
    m = len(graph.weights)
    if len(p_values) != m or len(alphas) != m:
        raise ValueError(f"{m} hypotheses need {m} p-values and alphas, got {len(p_values)} and {len(alphas)}")
    w = list(graph.weights)
    g = [list(row) for row in graph.transitions]
    active = set(range(m))
    rejected = [False] * m
    while True:
        j = next((i for i in sorted(active) if p_values[i] < w[i] * alphas[i]), None)
        if j is None:
            return rejected
        rejected[j] = True
        active.discard(j)
        g = _update(w, g, active, j)


def _update(w: list[float], g: list[list[float]], active: set[int], j: int) -> list[list[float]]:
    """Pass ``j``'s share along its row and rewire the graph around it (Algorithm 1, step 2)."""
    for k in active:
        w[k] += w[j] * g[j][k]
    new = [row[:] for row in g]
    for l in active:
        for k in active:
            denom = 1.0 - g[l][j] * g[j][l]
            new[l][k] = 0.0 if l == k or denom <= 0 else (g[l][k] + g[l][j] * g[j][k]) / denom
    w[j] = 0.0
    return new


def adjusted(graph: Graph, p_values: Sequence[float], alphas: Sequence[float]) -> list[float]:
    """Adjusted p-values on the scale of each test's own alpha (reject iff ``adjusted_i < alpha_i``): Bretz et al.
    (2011)'s sequentially rejective algorithm on ``u_i = p_i / alpha_i``: the smallest ``u_j / w_j`` is rejected
    first, the running maximum is its adjusted ``u``, the graph is updated, and so on (``alpha_i u``, capped at 1)."""
    m = len(graph.weights)
    if len(p_values) != m or len(alphas) != m:
        raise ValueError(f"{m} hypotheses need {m} p-values and alphas, got {len(p_values)} and {len(alphas)}")
    u = [float(p) / float(a) for p, a in zip(p_values, alphas)]
    w = list(graph.weights)
    g = [list(row) for row in graph.transitions]
    active = set(range(m))
    out = [math.inf] * m
    running = 0.0
    while active:
        ratio = {i: (u[i] / w[i] if w[i] > 0 else math.inf) for i in active}
        j = min(sorted(active), key=lambda i: ratio[i])
        running = max(running, ratio[j])
        out[j] = running
        active.discard(j)
        g = _update(w, g, active, j)
    return [min(1.0, v * float(a)) for v, a in zip(out, alphas)]


def holm(m: int) -> Graph:
    """Holm's procedure as a graph: equal shares, each passed equally to the others."""
    if m < 1:
        raise ValueError("a family needs at least one hypothesis")
    share = 1.0 / (m - 1) if m > 1 else 0.0
    return Graph(tuple([1.0 / m] * m), tuple(tuple(0.0 if i == k else share for k in range(m)) for i in range(m)))


def tiers(critical: Sequence[bool], critical_share: float) -> Graph:
    """The release graph: the critical tasks split ``critical_share`` of alpha, the supporting ones the rest.

    A rejected task passes its share to the others of its tier equally, and ``EPSILON`` of it to the other tier
    (all of it when it is the last of its tier). With no supporting task the critical ones take all of alpha;
    ``critical_share = 1 / m`` per task is not Holm (the tiers still pass within themselves first)."""
    m = len(critical)
    if not 0.0 < critical_share <= 1.0:
        raise ValueError(f"the critical tasks' share of alpha must be in (0, 1], got {critical_share!r}")
    crit = [i for i in range(m) if critical[i]]
    supp = [i for i in range(m) if not critical[i]]
    if not crit or not supp:
        return holm(m)
    weights = [critical_share / len(crit) if critical[i] else (1.0 - critical_share) / len(supp) for i in range(m)]
    rows = []
    for i in range(m):
        own, other = (crit, supp) if critical[i] else (supp, crit)
        mates = [k for k in own if k != i]
        keep = 1.0 - EPSILON if mates else 0.0
        row = [0.0] * m
        for k in mates:
            row[k] = keep / len(mates)
        for k in other:
            row[k] = (1.0 - keep) / len(other)
        rows.append(tuple(row))
    return Graph(tuple(weights), tuple(rows))
