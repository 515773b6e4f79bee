"""How often following the fixed-look advice of a paired 0/100 job reaches the claim it names, exactly.

    python benchmarks/binary_advice.py

A job at ``n0`` observed ``b`` losses and ``c`` wins (the rounded expectation of a truth: discordance ``d``, drop
``D``) and is INCONCLUSIVE; its advice (runner.stats.numerics.advice.more_samples, as runner.stats.advising calls it) names
N. If the observed difference holds, a rerun at N is a fixed test at full alpha; its chance of the named claim is
summed over every table of N samples (runner.stats.numerics.paired_binomial.enumeration: the GO region of Tango's test with its
exact unconditional check, McNemar's for NO-GO). The normal formula without the continuity term (the rule
before) is beside it. The claim stated: 80%.
"""

from __future__ import annotations

import math
import time

from runner.stats.numerics.advice import POWER, binary_spread, more_samples
from runner.stats.numerics.paired_binomial import enumeration as en
from runner.stats.numerics.normal import z

ALPHA = 0.05
CASES = [  # (n0, discordance, drop, tolerance)
    (100, 0.05, 0.0, 2.75), (100, 0.10, 0.0, 2.75), (100, 0.20, 0.0, 5.0), (500, 0.05, 0.0, 1.0),
    (100, 0.05, 1.0, 5.0), (100, 0.20, 1.0, 5.0), (57, 0.05, 3.0, 5.0), (200, 0.1, 2.0, 5.0),
]


def hit(n_total: int, target: str, d: float, drop: float, tolerance: float) -> float:
    """P(a fixed rerun at ``n_total`` shows ``target``) when the discordance is ``d`` and the drop ``drop`` points."""
    if target == "GO":
        return en.region_rate(en.go_cutoffs(n_total, -tolerance / 100.0, ALPHA), n_total, d,
                              (d + drop / 100.0) / (2 * d))
    return en.region_rate(en.mcnemar_cutoffs(n_total, ALPHA), n_total, d, (d - drop / 100.0) / (2 * d))


def main() -> None:
    start = time.time()
    print("| n0 | discordance | drop | t | claim | N before | reaches | N now | reaches |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n0, d, drop, tol in CASES:
        b, c = round(n0 * (d + drop / 100) / 2), round(n0 * (d - drop / 100) / 2)
        spread, share = binary_spread(b, c, n0)
        observed = 100.0 * (b - c) / n0
        advice = more_samples(observed, spread, n0, 0.0, tol, ALPHA, discordance=share)
        gap = tol - observed if advice.target == "GO" else observed
        before = max(n0 + 1, math.ceil((z(1 - ALPHA) + z(POWER)) ** 2 * spread ** 2 / gap ** 2))
        print(f"| {n0} | {share:.3f} | {observed:.2f} | {tol:g} | {advice.target} | {before} | "
              f"{hit(before, advice.target, share, observed, tol):.4f} | {advice.n_total} | "
              f"{hit(advice.n_total, advice.target, share, observed, tol):.4f} |")
    print(f"\nexact; {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
