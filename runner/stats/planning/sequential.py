"""``python -m runner.plan --sequential K``: group-sequential boundaries, maximum and expected n, both designs.

For a target regression ``theta`` (``--target-theta``, default 3 points) it plans K looks equally spaced in
samples and prints, for the unpaired test (``--sigma``) and the paired McNemar test (normal approximation,
``--agreement`` measured between two healthy runs): the efficacy (regression) and futility (pass)
bounds on the z scale, the fixed n, the maximum n (the fixed n times the inflation factor) and the
expected n with no regression and with a regression of theta. The reference is taken as recorded on the
maximum n, so the unpaired test's information fraction at sample fraction s is 2 s / (1 + s).

The paired fixed n comes from :func:`runner.stats.planning.paired.paired_min_samples` under the ``added``
regression model (``--regression-model``; the regression's flips come on top of the healthy
disagreements), without the exact test's ``1/n`` continuity term since the sequential statistic is
McNemar's normal approximation: Connor's (1987) n. The ``split`` model (the agreement held under the
regression) plans too few samples: about 0.7 power at theta for agreement 0.9 at the defaults.
"""

from __future__ import annotations

import json
from typing import Any

from runner.stats.numerics import group_sequential as gs
from runner.stats.planning.paired import paired_min_samples
from runner.stats.numerics.ztest import min_samples_for_theta


def plans(k: int, alpha: float, beta: float, sigma: float, agreement: float, theta: float, spending: str,
          futility: str, binding: bool, model: str = "added") -> list[gs.Plan]:
    """The unpaired and the paired design of K equal looks for a regression of ``theta`` points."""
    sizes = [(i + 1) / k for i in range(k)]
    unpaired = gs.design(gs.unpaired_info(sizes), alpha, beta, spending, futility, binding)
    paired = gs.design(sizes, alpha, beta, spending, futility, binding)
    paired_fixed = paired_min_samples(theta, agreement, alpha, beta, continuity=False, model=model)
    return [gs.Plan("unpaired", unpaired, sizes, min_samples_for_theta(theta, sigma, alpha, beta), {"sigma": sigma}),
            gs.Plan("paired", paired, sizes, paired_fixed, {"agreement": agreement, "regression_model": model})]


def run(args: Any) -> int:
    alpha = 0.05 if args.alpha is None else args.alpha
    beta = 0.2 if args.beta is None else args.beta
    sigma = 50.0 if args.sigma is None else args.sigma
    agreement = 0.9 if args.agreement is None else args.agreement
    theta = 3.0 if args.target_theta is None else args.target_theta
    model = getattr(args, "regression_model", None) or "added"
    out = plans(args.sequential, alpha, beta, sigma, agreement, theta, args.spending, args.futility, args.binding,
                model)
    rows = [p.to_dict() for p in out]
    if args.json:
        print(json.dumps({"looks": args.sequential, "alpha": alpha, "beta": beta, "target_theta": theta,
                          "spending": args.spending, "futility": args.futility, "binding": args.binding,
                          "designs": rows}))
        return 0
    print(f"group-sequential gate: K={args.sequential} looks, one-sided alpha={alpha:g}, beta={beta:g}, theta={theta:g} "
          f"points; efficacy {args.spending}, futility {args.futility}, {'binding' if args.binding else 'non-binding'}")
    print(f"{'look':>4} {'samples':>8} {'info U':>7} {'regress U':>10} {'pass U':>8} {'regress P':>10} {'pass P':>8}")
    u, p = rows

    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.4f}"
    for i in range(args.sequential):
        print(f"{i + 1:>4} {u['sample_fractions'][i]:>8.3f} {u['info_fractions'][i]:>7.3f} {f(u['efficacy_z'][i]):>10} "
              f"{f(u['futility_z'][i]):>8} {f(p['efficacy_z'][i]):>10} {f(p['futility_z'][i]):>8}")
    for r in rows:
        what = f"sigma {r['sigma']:g}" if r["design"] == "unpaired" else \
            f"agreement {r['agreement']:g}, {r['regression_model']} model"
        print(f"{r['design']:>8} ({what}): fixed n {r['fixed_n']}, max n {r['max_n']} (x{r['inflation']:.3f}), "
              f"expected n {r['expected_n_h0']:.0f} with no regression, {r['expected_n_theta']:.0f} with a "
              f"regression of theta ({1 - r['expected_n_h0'] / r['fixed_n']:.0%} / "
              f"{1 - r['expected_n_theta'] / r['fixed_n']:.0%} below the fixed n)")
    print("U: unpaired (TensorRT-LLM's test), P: paired (McNemar, normal approximation); z scale, a regression "
          "when Z >= 'regress', a pass when Z <= 'pass'")
    return 0
