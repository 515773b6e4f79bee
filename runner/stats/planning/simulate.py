"""Monte Carlo check of the two designs: does each test keep its promises?

Model: ``n`` questions, binary per-sample correctness (0/100).

* **unpaired** (TensorRT-LLM's): the reference run and the new run are two independent
  Bernoulli runs, with accuracy ``p_ref`` and ``p_ref - true_drop / 100``. The new run is judged
  with :func:`runner.stats.numerics.ztest.compute_threshold` at ``sigma`` (50, as TensorRT-LLM does): an alarm
  is raised when ``score < threshold``.
* **paired**: the reference run is Bernoulli(``p_ref``) per question. A question the reference
  got right is lost with probability ``b / p_ref`` and one it got wrong is won with probability
  ``c / (1 - p_ref)``, where ``b`` and ``c`` are the expected discordant fractions of the
  regression model (:data:`runner.stats.numerics.power.REGRESSION_MODELS`; ``d = 1 - agreement``,
  ``delta = true_drop / 100``): ``added`` (default), ``b = d/2 + delta`` and ``c = d/2``, the
  healthy disagreements plus the regression's flips; ``split``, ``b = (d + delta)/2`` and
  ``c = (d - delta)/2``. The new accuracy is ``p_ref - delta`` in expectation either way. The
  decision is McNemar's exact test (:func:`runner.stats.rules.paired_binary.mcnemar_exact`, through the same tail
  function, vectorized over trials).

The false-alarm rate is the alarm rate at ``true_drop = 0`` (promise: at most alpha); the power
is the alarm rate at ``true_drop = theta`` (promise: at least ``1 - beta``).

``python -m runner.stats.planning.simulate --design both --n 1024 4096 --agreement 0.95 --trials 2000 [--json]``
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from runner.stats.numerics.paired_binomial.sign_test import upper_tail_half
from runner.stats.numerics.power import REGRESSION_MODELS
from runner.stats.planning.paired import paired_theta
from runner.stats.numerics.ztest import compute_theta
from runner.stats.data.hypothesis import scale
from runner.stats.numerics.normal import z

DESIGNS = ("unpaired", "paired")
_CHUNK_CELLS = 1 << 21  # per-sample draws held in memory at once (per run)


@dataclass(frozen=True)
class SimResult:
    """Alarm rate of one design at one true drop, over ``trials`` simulated comparisons."""

    design: str
    n: int
    p_ref: float
    agreement: float | None  # None for the unpaired design (independent runs)
    true_drop: float  # points on the 0-100 scale
    alpha: float
    beta: float
    trials: int
    seed: int
    alarms: int
    theta: float  # the design's theta at n (what "power at theta" refers to)

    @property
    def rate(self) -> float:
        """Fraction of trials that raised an alarm."""
        return self.alarms / self.trials

    @property
    def se(self) -> float:
        """Binomial standard error of :attr:`rate`."""
        r = self.rate
        return math.sqrt(r * (1.0 - r) / self.trials)

    @property
    def false_alarm_rate(self) -> float | None:
        return self.rate if self.true_drop == 0 else None

    @property
    def power(self) -> float | None:
        return self.rate if self.true_drop > 0 else None

    def to_dict(self) -> dict[str, object]:
        return {
            "design": self.design,
            "n": self.n,
            "p_ref": self.p_ref,
            "agreement": self.agreement,
            "true_drop": self.true_drop,
            "alpha": self.alpha,
            "beta": self.beta,
            "trials": self.trials,
            "seed": self.seed,
            "alarms": self.alarms,
            "rate": self.rate,
            "se": self.se,
            "theta": self.theta,
        }


def design_theta(
    design: str, n: int, agreement: float | None, alpha: float, beta: float, sigma: float = 50.0, *, continuity: bool = True,
    model: str = "added",
) -> float:
    """Theta of a design at ``n``: TensorRT-LLM's for unpaired, McNemar's for paired."""
    if design == "unpaired":
        return compute_theta(n, sigma, alpha, beta)
    if design == "paired":
        if agreement is None:
            raise ValueError("the paired design needs an agreement rate")
        return paired_theta(n, agreement, alpha, beta, continuity=continuity, model=model)
    raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")


def paired_flip_probabilities(p_ref: float, agreement: float, true_drop: float,
                              model: str = "added") -> tuple[float, float]:
    """``(P(lose | reference right), P(win | reference wrong))`` giving the drop under the regression model."""
    if model not in REGRESSION_MODELS:
        raise ValueError(f"model must be one of {REGRESSION_MODELS}, got {model!r}")
    d = 1.0 - agreement
    delta = true_drop / 100.0
    b, c = ((d + delta) / 2.0, (d - delta) / 2.0) if model == "split" else (d / 2.0 + delta, d / 2.0)
    if c < -1e-12:
        raise ValueError(
            f"a drop of {true_drop:g} points needs at least {true_drop:g}% of answers to change, "
            f"but agreement {agreement:g} leaves only {100 * d:g}%"
        )
    if b > p_ref + 1e-12 or c > 1.0 - p_ref + 1e-12:
        raise ValueError(
            f"agreement {agreement:g} with a drop of {true_drop:g} points is impossible at reference accuracy {p_ref:g}"
        )
    return min(1.0, max(0.0, b / p_ref)), min(1.0, max(0.0, c / (1.0 - p_ref)))


def _alarms_unpaired(ref, new, alpha: float, sigma: float):  # noqa: ANN001, ANN202 - numpy arrays
    """Per-trial alarm of TensorRT-LLM's test: new score < reference score + z(alpha) * scale."""
    n = ref.shape[1]
    ref_score = 100.0 * ref.mean(axis=1)
    new_score = 100.0 * new.mean(axis=1)
    threshold = ref_score + z(alpha) * scale(n, sigma)  # = compute_threshold(ref_score, ...)
    return new_score < threshold


def _alarms_paired(ref, new, alpha: float):  # noqa: ANN001, ANN202 - numpy arrays
    """Per-trial alarm of McNemar's exact test: P(X >= b) < alpha, X ~ Bin(b + c, 1/2)."""
    b = (ref & ~new).sum(axis=1)
    c = (~ref & new).sum(axis=1)
    return upper_tail_half(b, b + c) < alpha


def _draw(design: str, rng, k: int, n: int, p_ref: float, agreement: float | None, true_drop: float,  # noqa: ANN001, ANN202
          model: str = "added"):
    """``k`` simulated (reference, new) pairs of boolean correctness arrays, shape ``(k, n)``."""
    ref = rng.random((k, n)) < p_ref
    if design == "unpaired":
        new = rng.random((k, n)) < p_ref - true_drop / 100.0
    else:
        lose, win = paired_flip_probabilities(p_ref, agreement, true_drop, model)  # type: ignore[arg-type]
        u = rng.random((k, n))
        new = (ref & (u >= lose)) | (~ref & (u < win))
    return ref, new


def simulate(
    design: str,
    n: int,
    p_ref: float,
    agreement: float | None = None,
    true_drop: float = 0.0,
    alpha: float = 0.05,
    beta: float = 0.2,
    trials: int = 2000,
    seed: int = 0,
    *,
    sigma: float = 50.0,
    continuity: bool = True,
    model: str = "added",
) -> SimResult:
    """Alarm rate of ``design`` over ``trials`` seeded comparisons of ``n`` binary samples.

    ``p_ref`` is the reference accuracy as a probability (0-1); ``true_drop`` is in points
    (0-100 scale), like theta. ``agreement`` is used by the paired design only (the unpaired
    runs are independent). ``sigma`` is the unpaired test's sigma; ``continuity`` only affects
    the reported paired theta; ``model`` is the paired regression model.
    """
    import numpy as np

    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a whole number >= 1, got {n!r}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be a whole number >= 1, got {trials!r}")
    if not 0.0 < p_ref < 1.0:
        raise ValueError(f"p_ref is the reference accuracy as a probability in (0, 1), got {p_ref!r}")
    if design == "unpaired":
        if not 0.0 <= p_ref - true_drop / 100.0 <= 1.0:
            raise ValueError(f"a drop of {true_drop:g} points from accuracy {p_ref:g} leaves [0, 1]")
    else:
        if agreement is None or not 0.0 <= agreement < 1.0:
            raise ValueError(f"the paired design needs an agreement rate in [0, 1), got {agreement!r}")
        paired_flip_probabilities(p_ref, agreement, true_drop, model)  # validates the combination
    theta = design_theta(design, n, agreement, alpha, beta, sigma, continuity=continuity, model=model)
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_CELLS // n)
    alarms = 0
    done = 0
    while done < trials:
        k = min(chunk, trials - done)
        ref, new = _draw(design, rng, k, n, p_ref, agreement, true_drop, model)
        hit = _alarms_unpaired(ref, new, alpha, sigma) if design == "unpaired" else _alarms_paired(ref, new, alpha)
        alarms += int(np.count_nonzero(hit))
        done += k
    return SimResult(
        design=design,
        n=n,
        p_ref=float(p_ref),
        agreement=None if design == "unpaired" else float(agreement),  # type: ignore[arg-type]
        true_drop=float(true_drop),
        alpha=float(alpha),
        beta=float(beta),
        trials=trials,
        seed=seed,
        alarms=alarms,
        theta=theta,
    )


# --------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m runner.stats.planning.simulate",
        description=(
            "Monte Carlo check of the unpaired (TensorRT-LLM) and paired (McNemar) tests: the empirical "
            "false-alarm rate at no drop and the power at a drop of theta, with binomial standard errors."
        ),
        epilog="example:\n  python -m runner.stats.planning.simulate --design both --n 1024 4096 --agreement 0.95 --trials 2000",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--design", choices=("unpaired", "paired", "both"), default="both")
    p.add_argument("--n", type=int, nargs="+", default=[1024], help="number of samples (one or more)")
    p.add_argument("--agreement", type=float, help="paired design: fraction of samples both runs score the same")
    p.add_argument("--p-ref", type=float, default=0.5, help="reference accuracy as a probability (default 0.5)")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--beta", type=float, default=0.2)
    p.add_argument("--sigma", type=float, default=50.0, help="the unpaired test's sigma (default 50)")
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--plain-theta",
        action="store_true",
        help="paired: test the power at the normal-approximation theta without the 1/n continuity term",
    )
    p.add_argument("--regression-model", choices=REGRESSION_MODELS, default="added",
                   help="paired: added (default: the regression's flips come on top of the healthy agreement) or "
                        "split (the agreement holds under the regression)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    designs = DESIGNS if args.design == "both" else (args.design,)
    if "paired" in designs and args.agreement is None:
        parser.error("--agreement is required for the paired design")
    if any(n < 1 for n in args.n) or args.trials < 1:
        parser.error("--n and --trials must be >= 1")
    rows: list[dict[str, object]] = []
    try:
        for design in designs:
            for n in args.n:
                agreement = args.agreement if design == "paired" else None
                theta = design_theta(design, n, agreement, args.alpha, args.beta, args.sigma,
                                     continuity=not args.plain_theta, model=args.regression_model)
                common = dict(alpha=args.alpha, beta=args.beta, trials=args.trials, seed=args.seed, sigma=args.sigma,
                              continuity=not args.plain_theta, model=args.regression_model)
                null = simulate(design, n, args.p_ref, agreement, 0.0, **common)
                alt = simulate(design, n, args.p_ref, agreement, theta, **common)
                rows.append(
                    {
                        "design": design,
                        "n": n,
                        "agreement": agreement,
                        "theta": theta,
                        "false_alarm_rate": null.rate,
                        "false_alarm_se": null.se,
                        "power": alt.rate,
                        "power_se": alt.se,
                        "trials": args.trials,
                    }
                )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    settings = {
        "p_ref": args.p_ref,
        "alpha": args.alpha,
        "beta": args.beta,
        "sigma": args.sigma,
        "trials": args.trials,
        "seed": args.seed,
        "paired_theta": "plain" if args.plain_theta else "continuity-corrected",
        "regression_model": args.regression_model,
    }
    if args.json:
        print(json.dumps({"settings": settings, "results": rows}))
        return 0
    print(
        f"Monte Carlo check: {args.trials} trials per cell, reference accuracy {args.p_ref:g}, "
        f"alpha {args.alpha:g}, beta {args.beta:g}, unpaired sigma {args.sigma:g}, seed {args.seed}"
    )
    fa_head = f"false alarms (<= {args.alpha:g})"
    pw_head = f"power at theta (>= {1 - args.beta:g})"
    print(f"{'design':<9} {'agreement':>9} {'n':>6} {'theta':>8}   {fa_head:<22}  {pw_head}")
    for r in rows:
        agree = "-" if r["agreement"] is None else f"{r['agreement']:.2f}"
        fa = f"{r['false_alarm_rate']:.4f} +- {r['false_alarm_se']:.4f}"
        pw = f"{r['power']:.4f} +- {r['power_se']:.4f}"
        print(f"{r['design']:<9} {agree:>9} {r['n']:>6} {r['theta']:>8.4f}   {fa:<22}  {pw}")
    print("+- is one binomial standard error. unpaired: independent runs judged at sigma; "
          "paired: McNemar's exact test on the same questions.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
