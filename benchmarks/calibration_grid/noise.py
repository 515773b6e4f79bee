"""Calibration of the noise floor (``reference.floor``): real A/A pairs replayed, resampled, through the continuous
paired rule.

An A/A pair is one sample scored twice with nothing changed but the system (batch size 1, float32 for bfloat16):
a recording's ``samples.jsonl`` and its perturbed pass ``replicate-K.jsonl`` (``reference.noise=replicate``), shipped
in ``tests/data/aa_pairs/`` (``python benchmarks/noise_calibration.py --pairs-from RECORD_DIR``). Each trial draws a
replicate (n pairs, with replacement) and, independently, a run (n pairs); the replicate's floor
(:func:`runner.stats.numerics.noise.replicate`) is measured on the first and the paired t-test
(:func:`runner.stats.rules.paired_continuous.paired_continuous`) judges the second at max(margin 0, floor). A NO-GO on
an A/A run is a false alarm. "Swapped": the perturbed pass is the reference (a reference recorded in float32, a run
where ``auto`` chose bfloat16). The floor's own bound is one-sided 95%, so a trial can draw a floor below the true
shift; the rate counts those trials too. Without the floor the same rule's rate is printed by
``benchmarks/noise_calibration.py`` (it does not hold: that is why the floor exists).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmarks.calibration_grid.cells import Cell, Family, Grid, Rate
from runner.stats.rules.paired_continuous import FLOOR_CLAIMS

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "tests" / "data" / "aa_pairs"
ALPHA = 0.01  # perplexity's alpha, the task the shipped pairs come from
RULE, = (r.name for r in FLOOR_CLAIMS)
CLAIM, = FLOOR_CLAIMS[0].claims


@dataclass(frozen=True)
class Pairs:
    """Real A/A pairs of one task and perturbation: per-sample scores as recorded (``a``) and perturbed (``b``)."""

    name: str
    a: tuple[float, ...]
    b: tuple[float, ...]
    higher_is_better: bool


def load(path: Path) -> Pairs:
    """A pairs file: ``{"name", "higher_is_better", "pairs": [[a, b], ...]}``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return Pairs(str(data["name"]), tuple(float(p[0]) for p in data["pairs"]),
                 tuple(float(p[1]) for p in data["pairs"]), bool(data["higher_is_better"]))


def false_nogo(pairs: Pairs, n: int, alpha: float, trials: int, seed: int, floored: bool,
               swap: bool = False, worse: float = 0.0) -> Rate:
    """How often the paired t-test says NO-GO on a resampled A/A run of ``n`` pairs; ``floored``: at max(0, the floor
    of an independently resampled replicate of ``n`` pairs); ``swap``: the perturbed side is the reference;
    ``worse``: the run's scores made worse by this share of each (power: a real regression, not an A/A run)."""
    import numpy as np

    from runner.stats.numerics.noise import replicate
    from runner.stats.rules.paired_continuous import paired_continuous

    rng = np.random.default_rng(seed)
    a, b = (np.asarray(pairs.b), np.asarray(pairs.a)) if swap else (np.asarray(pairs.a), np.asarray(pairs.b))
    hits = 0
    for _ in range(trials):
        margin = 0.0
        if floored:
            rep = rng.integers(0, len(a), n)
            margin = replicate("aa", a[rep].tolist(), b[rep].tolist(), 0).floor
        run = rng.integers(0, len(a), n)
        new = b[run] * (1.0 + (-worse if pairs.higher_is_better else worse))
        result = paired_continuous(a[run].tolist(), new.tolist(), alpha, 0.2, pairs.higher_is_better, method="t",
                                   tolerance=margin)
        hits += not result.passed
    return Rate.monte_carlo(hits, trials)


def pair_files() -> list[Path]:
    return sorted(PAIRS.glob("*.json"))


def cells(grid: Grid) -> list[Cell]:
    out = []
    for path in pair_files():
        pairs = load(path)
        for n in grid.pick([20, 40], [40]):
            for swap in (False, True):
                setting = f"{pairs.name}{' (swapped)' if swap else ''} n={n}"
                out.append(Cell(RULE, CLAIM, setting, "error", ALPHA,
                                partial(_measure, path, n, swap)))
        if grid.full:  # power beside the error cells: the run 1% worse on every sample
            out.append(Cell(RULE, "power: NO-GO, every sample 1% worse", f"{pairs.name} n=40", "power", 0.0,
                            partial(_measure, path, 40, False, worse=0.01)))
    return out


def _measure(path: Path, n: int, swap: bool, trials: int, seed: int, worse: float = 0.0) -> Rate:
    return false_nogo(load(path), n, ALPHA, trials, seed, floored=True, swap=swap, worse=worse)


FAMILY = Family("noise", FLOOR_CLAIMS, cells)
