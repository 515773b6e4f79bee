"""Paired tests: the reference run and the new run answered the *same* samples.

TensorRT-LLM's test (:mod:`runner.stats.unpaired`) treats the two runs as independent samples, so the
difference of their means has standard deviation ``sqrt(2 sigma^2 / n)``. When both runs
answer the same questions, most answers agree, and only the disagreements carry information
about a regression. A paired test looks at those alone and detects the same drop with several
times fewer samples.

* Binary scores (0/100, or 0/1): McNemar's exact test. ``b`` counts samples the reference got
  right and the new run got wrong, ``c`` the reverse. Under H0 ("no regression") each of the
  ``b + c`` discordant samples is equally likely to fall either way, so the one-sided p-value is
  ``P(X >= b)`` with ``X ~ Bin(b + c, 1/2)``; a regression is flagged when ``p < alpha``.
* Continuous scores (ROUGE, perplexity, ...): a one-sided paired t-test on the per-sample
  differences, or a seeded paired bootstrap.

Minimum detectable effect (``theta``) of the binary test, on the 0-100 scale, with discordance
rate ``d = (b + c) / n`` (planning: ``d = 1 - agreement``) and ``k = |z(alpha)| + |z(beta)|``::

    theta = 100 * (k * sqrt(d / n) + 1 / n)

The first term is the normal approximation of McNemar's statistic. The ``1 / n`` term is the
continuity correction: the exact test is discrete and conservative (its false-alarm rate is
below alpha), and without the correction its power at the uncorrected theta is only about
0.75-0.78 instead of 0.80 for the sample sizes the tasks use. With it, the power at theta is at
least ``1 - beta`` (checked by Monte Carlo in ``tests/stats/test_simulation.py``). Pass
``continuity=False`` for the plain normal-approximation figure.

A paired theta assumes the runs keep disagreeing on a fraction ``d`` of the samples. A drop of
``theta`` points changes at least ``theta`` percent of the answers, so ``theta <= 100 d`` must
hold for the figure to mean anything (:func:`paired_feasible`).

numpy and scipy are imported inside the functions that need them, so importing this module
(and ``python -m runner.plan --help``) stays fast.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from runner.contract.errors import UserError
from runner.stats.paired_binary import tango_p
from runner.stats.planning import _binary_theta, _check_prob, _k



class PairingError(UserError, ValueError):
    """The two runs cannot be paired (no common sample id, a non-numeric score)."""


# --------------------------------------------------------------------------- pairing


@dataclass(frozen=True)
class PairedScores:
    """Scores of the samples both runs answered, matched by sample id (sorted by id)."""

    ids: tuple[str, ...]
    reference: tuple[float, ...]
    new: tuple[float, ...]
    reference_only: tuple[str, ...]  # ids only the reference run has
    new_only: tuple[str, ...]  # ids only the new run has

    @property
    def n_matched(self) -> int:
        return len(self.ids)

    def summary(self) -> str:
        total_ref = self.n_matched + len(self.reference_only)
        return (
            f"{self.n_matched} of {total_ref} reference sample ids matched "
            f"({len(self.reference_only)} only in the reference, {len(self.new_only)} only in the new run)"
        )


def _score(value: object, run: str, sample_id: str) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        out = math.nan
    if not math.isfinite(out):
        raise PairingError(
            "a per-sample score is not a finite number",
            where=f"{run} run, sample '{sample_id}'",
            given=repr(value),
            allowed="a finite number on the metric's scale",
        )
    return out


def pair_scores(reference: Mapping[str, float], new: Mapping[str, float]) -> PairedScores:
    """Match the two runs' per-sample scores by sample id.

    Raises :class:`PairingError` (a :class:`UserError` and a :class:`ValueError`) when no id
    is common to both runs, or when a matched score is not a finite number.
    """
    common = sorted(set(reference) & set(new))
    if not common:
        raise PairingError(
            "the reference run and the new run have no sample id in common",
            given=f"{len(reference)} reference ids (e.g. {_examples(reference)}), "
            f"{len(new)} new ids (e.g. {_examples(new)})",
            fix="compare runs made on the same task, subset and seed, so that sample ids match",
        )
    ref_scores = tuple(_score(reference[i], "reference", i) for i in common)
    new_scores = tuple(_score(new[i], "new", i) for i in common)
    common_set = set(common)
    return PairedScores(
        ids=tuple(common),
        reference=ref_scores,
        new=new_scores,
        reference_only=tuple(sorted(i for i in reference if i not in common_set)),
        new_only=tuple(sorted(i for i in new if i not in common_set)),
    )


def _examples(ids: Iterable[str], k: int = 3) -> str:
    first = sorted(ids)[:k]
    return ", ".join(repr(i) for i in first) if first else "none"


def min_discordant_to_reject(alpha: float) -> int:
    """Fewest discordant samples with which the exact test can flag a regression at all.

    With ``m`` discordant samples the smallest p-value is ``0.5^m`` (all of them lost), so
    ``0.5^m < alpha`` is needed: 5 for alpha 0.05.
    """
    _check_prob("alpha", alpha)
    m = 0
    while 0.5**m >= alpha:
        m += 1
    return m


def estimate_sigma(scores: Iterable[float]) -> float:
    """Sample standard deviation (``ddof=1``) of per-sample scores: ``sigma`` for a non-Bernoulli metric.

    Step 1 of adding a task upstream: estimate sigma on the full dataset, then plan n with it.
    """
    import numpy as np

    arr = np.asarray([float(s) for s in scores], dtype=float)
    if arr.size < 2:
        raise ValueError(f"estimating sigma needs at least 2 scores, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("estimating sigma needs finite scores; got NaN or infinity")
    return float(np.std(arr, ddof=1))


def near_chance_warning(reference: float, theta: float, chance: float, higher_is_better: bool = True) -> str | None:
    """A warning when a regression of ``theta`` would land at or past chance level.

    ``chance`` is the score of a model that guesses (25 for 4-choice MMLU) or the metric's floor
    (its ceiling for a lower-is-better metric). If ``reference - theta <= chance`` (mirrored when
    lower is better), a model that regressed by theta could not be told apart from one that
    guesses, so passing the test says little. Returns ``None`` when there is room.
    """
    for name, value in (("reference", reference), ("theta", theta), ("chance", chance)):
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    if theta < 0:
        raise ValueError(f"theta must be >= 0, got {theta!r}")
    if higher_is_better:
        room = reference - chance
        near = reference - theta <= chance
        side, beyond = "above", "below"
    else:
        room = chance - reference
        near = reference + theta >= chance
        side, beyond = "below", "above"
    if not near:
        return None
    if room <= 0:
        return (
            f"warning: the reference {reference:g} is not {side} chance level ({chance:g}); "
            "this task cannot show whether the model regressed. Use a task the model does better than chance."
        )
    return (
        f"warning: the reference {reference:g} is only {room:.2f} points {side} chance level ({chance:g}), "
        f"which is not more than theta ({theta:.2f}): a model that regressed by theta would score at or "
        f"{beyond} chance, and the test cannot tell it from one that guesses. Evaluate more samples "
        "(a smaller theta) or use a task the model does clearly better than chance on."
    )


# --------------------------------------------------------------------------- tests


@dataclass(frozen=True)
class PairedResult:
    """The outcome of a paired test, in metric units (0-100 scale).

    ``p_value`` belongs to the gate's null hypothesis (``gate``: regression, H0 drop <= tolerance;
    noninferiority, H0 drop >= tolerance); the gate's H0 is rejected when ``p < alpha``."""

    method: str
    n: int
    mean_diff: float  # new - reference, metric units, whatever the direction
    p_value: float
    passed: bool
    alpha: float
    beta: float
    higher_is_better: bool
    theta_paired: float  # inf when the data cannot support any detection (see render)
    reference_mean: float
    new_mean: float
    discordant: tuple[int, int] | None = None  # (b, c) for binary scores
    discordance_rate: float | None = None  # (b + c) / n for binary scores
    sd_diff: float | None = None  # standard deviation of the differences, continuous scores
    ci: tuple[float, float] | None = None  # two-sided (1 - 2 alpha) interval for new - reference
    ci_method: str = ""
    tolerance: float = 0.0
    gate: str = "regression"

    def to_dict(self) -> dict[str, object]:
        """Flat, JSON-friendly form (``theta_paired`` is ``None`` when it is undefined)."""
        return {
            "method": self.method,
            "n": self.n,
            "mean_diff": self.mean_diff,
            "p_value": self.p_value,
            "passed": self.passed,
            "alpha": self.alpha,
            "beta": self.beta,
            "higher_is_better": self.higher_is_better,
            "theta_paired": self.theta_paired if math.isfinite(self.theta_paired) else None,
            "reference_mean": self.reference_mean,
            "new_mean": self.new_mean,
            "discordant_b": self.discordant[0] if self.discordant else None,
            "discordant_c": self.discordant[1] if self.discordant else None,
            "discordance_rate": self.discordance_rate,
            "sd_diff": self.sd_diff,
            "ci_low": self.ci[0] if self.ci else None,
            "ci_high": self.ci[1] if self.ci else None,
            "ci_method": self.ci_method,
            "tolerance": self.tolerance,
            "gate": self.gate,
        }

    def render(self) -> str:
        """A short block to print next to the unpaired report."""
        direction = "higher is better" if self.higher_is_better else "lower is better"
        rule = "-" * 64
        lines = [
            rule,
            f"Paired test: {self.method} ({direction}), same samples in both runs",
            rule,
            f"  paired n     {self.n:10d}   samples scored by both runs",
            f"  reference    {self.reference_mean:10.3f}   mean on those samples",
            f"  new          {self.new_mean:10.3f}",
            f"  difference   {self.mean_diff:+10.3f}   new - reference",
        ]
        if self.ci is not None:
            lines.append(f"  {1 - 2 * self.alpha:.0%} CI       [{self.ci[0]:+.3f}, {self.ci[1]:+.3f}]   {self.ci_method}")
        if self.discordant is not None:
            b, c = self.discordant
            lines.append(
                f"  discordant   {f'b={b} c={c}':>10}   reference right & new wrong (b), the reverse (c); "
                f"{self.discordance_rate:.1%} of samples"
            )
        if self.sd_diff is not None:
            lines.append(f"  sd(diff)     {self.sd_diff:10.3f}   standard deviation of the per-sample differences")
        if math.isfinite(self.theta_paired):
            lines.append(
                f"  theta        {self.theta_paired:10.3f}   smallest regression caught with probability "
                f"{1 - self.beta:.0%} by this paired test"
            )
        else:
            lines.append(
                f"  theta        {'undefined':>10}   fewer than {min_discordant_to_reject(self.alpha)} "
                "disagreements: the exact test cannot flag any regression"
            )
        lines.append(f"  p-value      {self.p_value:10.4f}   {_p_meaning(self.gate, self.tolerance)}")
        lines.append(rule)
        if self.passed:
            lines.append("paired test: no regression shown - " + (
                "the disagreements are within what chance explains." if self.gate == "regression"
                else f"the data show the drop is smaller than the tolerance (p < {self.alpha:g})."))
        else:
            lines.append("paired test: regression shown - " + (
                f"on the same samples, the new run loses more than chance explains (p < {self.alpha:g})."
                if self.gate == "regression" else
                f"the data do not show the drop is smaller than the tolerance (p >= {self.alpha:g})."))
        lines.append(rule)
        return "\n".join(lines)


def _p_meaning(gate: str, tolerance: float) -> str:
    if gate == "regression":
        return ("chance of a result this bad if nothing regressed" if not tolerance
                else f"chance of a result this bad if the drop were at most {tolerance:g}")
    return f"chance of a result this good if the drop were {tolerance:g} or more"


def _upper_tail_half(b, m):  # noqa: ANN001, ANN202 - scalars or numpy arrays
    """``P(X >= b)`` for ``X ~ Bin(m, 1/2)``; 1 when ``m == 0``. Vectorized (used by runner.stats.simulate)."""
    from scipy import stats

    return stats.binom.sf(b - 1, m, 0.5)


def _binary_values(ref: Sequence[float], new: Sequence[float]) -> tuple[list[float], list[float], float]:
    ref_v = [float(v) for v in ref]
    new_v = [float(v) for v in new]
    if len(ref_v) != len(new_v):
        raise ValueError(f"paired scores need equal lengths, got {len(ref_v)} and {len(new_v)}")
    if not ref_v:
        raise ValueError("a paired test needs at least one sample")
    values = set(ref_v) | set(new_v)
    if values <= {0.0, 1.0}:
        unit = 1.0
    elif values <= {0.0, 100.0}:
        unit = 100.0
    else:
        odd = sorted(values - {0.0, 1.0, 100.0})[:3] or sorted(values)
        raise ValueError(
            f"McNemar's test needs binary scores (all 0/100 or all 0/1), got values such as {odd}; "
            "use paired_continuous for continuous metrics"
        )
    return ref_v, new_v, unit


def mcnemar_exact(
    ref_correct: Sequence[float],
    new_correct: Sequence[float],
    alpha: float,
    beta: float,
    higher_is_better: bool = True,
    gate: str = "regression",
    margin: float = 0.0,
) -> PairedResult:
    """McNemar's exact one-sided test on binary per-sample scores (0/100 or 0/1, or booleans).

    With a ``margin`` (points, > 0; regression gate only) the regression claim "drop > margin" is
    tested with Tango's (1998) score test for paired proportions instead, which has a margin.

    ``b`` = samples the reference got right and the new run wrong, ``c`` = the reverse ("right"
    is the high value, or the low one when ``higher_is_better`` is false). Regression gate:
    ``p = P(X >= b)`` with ``X ~ Bin(b + c, 1/2)``, a regression when ``p < alpha``. The
    non-inferiority gate with no tolerance asks the reverse: ``p = P(X <= b)``, a pass when
    ``p < alpha``. ``p = 1`` when ``b + c == 0``. Means and the difference
    are on the 0-100 scale (0/1 scores are read as fractions).
    """
    _k(alpha, beta)  # validates alpha and beta
    ref_v, new_v, unit = _binary_values(ref_correct, new_correct)
    good = unit if higher_is_better else 0.0
    b = sum(1 for r, w in zip(ref_v, new_v) if r == good and w != good)
    c = sum(1 for r, w in zip(ref_v, new_v) if r != good and w == good)
    n = len(ref_v)
    if margin:
        if gate != "regression":
            raise ValueError("a margin belongs to the regression claim (gate 'regression')")

        p = tango_p(b, c, len(ref_v), -margin / 100.0, "less")
    elif b + c == 0:
        p = 1.0
    elif gate == "regression":
        p = float(_upper_tail_half(b, b + c))
    else:
        p = float(_upper_tail_half(c, b + c))
    rate = (b + c) / n
    if b + c < min_discordant_to_reject(alpha):
        theta = math.inf
    else:
        theta = _binary_theta(n, rate, alpha, beta, continuity=True, model="split")
    to_points = 100.0 / unit
    ref_mean = sum(ref_v) / n * to_points
    new_mean = sum(new_v) / n * to_points
    rejected = p < alpha
    return PairedResult(
        method=f"Tango score test (margin {margin:g})" if margin else "McNemar exact",
        n=n,
        mean_diff=new_mean - ref_mean,
        p_value=p,
        passed=not rejected if gate == "regression" else rejected,
        alpha=float(alpha),
        beta=float(beta),
        higher_is_better=bool(higher_is_better),
        theta_paired=theta,
        reference_mean=ref_mean,
        new_mean=new_mean,
        discordant=(b, c),
        discordance_rate=rate,
        tolerance=float(margin),
        gate=gate,
    )


def paired_continuous(
    ref: Sequence[float],
    new: Sequence[float],
    alpha: float,
    beta: float,
    higher_is_better: bool = True,
    method: str = "t",
    seed: int = 0,
    n_boot: int = 10_000,
    tolerance: float = 0.0,
    gate: str = "regression",
) -> PairedResult:
    """One-sided paired test on per-sample score differences (ROUGE, perplexity; 0/100 with a tolerance).

    The differences ``new - ref`` are oriented so that negative means worse (their sign is
    flipped when lower is better), and ``tolerance`` (points, >= 0) is added to them. Regression
    gate, H0: the shifted mean is >= 0, rejected (a regression) when ``p < alpha``.
    Non-inferiority gate, H0: the shifted mean is <= 0, rejected (a pass) when ``p < alpha``.

    * ``method="t"``: paired t-test; interval ``mean +- t_{1-alpha, n-1} sd / sqrt(n)``.
    * ``method="bootstrap"``: the shifted differences are centred on 0 (H0) and resampled
      ``n_boot`` times with a generator seeded by ``seed``;
      ``p = (1 + #{resampled mean <= observed mean}) / (n_boot + 1)`` (``>=`` for
      non-inferiority); the interval is the basic bootstrap interval of the same resampled means
      (``2 mean - `` their order statistics), at the order statistic that makes it invert the
      p-value exactly: oriented as ``sign * (new - reference)``, its upper end is below
      ``-tolerance`` iff the regression p-value is below alpha, and its lower end above
      ``-tolerance`` iff the non-inferiority p-value is.

    ``theta_paired = (|z(alpha)| + |z(beta)|) * sd(diff) / sqrt(n)``.
    """
    import numpy as np

    k = _k(alpha, beta)
    if method not in ("t", "bootstrap"):
        raise ValueError(f"method must be 't' or 'bootstrap', got {method!r}")
    r = np.asarray([float(v) for v in ref], dtype=float)
    w = np.asarray([float(v) for v in new], dtype=float)
    if r.shape != w.shape:
        raise ValueError(f"paired scores need equal lengths, got {r.size} and {w.size}")
    n = int(r.size)
    if n < 2:
        raise ValueError(f"a paired continuous test needs at least 2 samples, got {n}")
    if not (np.all(np.isfinite(r)) and np.all(np.isfinite(w))):
        raise ValueError("paired scores must be finite numbers")
    diff = w - r
    sign = 1.0 if higher_is_better else -1.0
    shifted = sign * diff + tolerance
    mean_s = float(shifted.mean())
    mean_d = float(diff.mean())
    sd = float(diff.std(ddof=1))
    regression = gate == "regression"
    if method == "t":
        name = "paired t-test"
        from scipy import stats

        if sd == 0.0:
            if regression:
                p = 0.0 if mean_s < 0 else 1.0
            else:
                p = 0.0 if mean_s > 0 else 1.0
            ci = (mean_d, mean_d)
        else:
            t_stat = mean_s / (sd / math.sqrt(n))
            p = float(stats.t.cdf(t_stat, n - 1) if regression else stats.t.sf(t_stat, n - 1))
            half = float(stats.t.ppf(1 - alpha, n - 1)) * sd / math.sqrt(n)
            ci = (mean_d - half, mean_d + half)
        ci_method = "paired t"
    else:
        name = "paired bootstrap"
        if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
            raise ValueError(f"n_boot must be a whole number >= 1, got {n_boot!r}")
        means = bootstrap_means(diff, n_boot, seed)
        # basic-bootstrap replicates of the oriented difference, 2 * mean - resampled mean; a
        # resample is as extreme as the observed mean under the H0-centred shift exactly when its
        # replicate is on the far side of -tolerance, so the p-value counts these replicates
        basic = sign * (2.0 * mean_d - means)
        slack = 1e-12 * max(1.0, float(np.abs(shifted).max()))
        high, low = basic + slack, basic - slack
        if regression:
            extreme = int(np.count_nonzero(high >= -tolerance))
        else:
            extreme = int(np.count_nonzero(low <= -tolerance))
        p = (1 + extreme) / (n_boot + 1)
        # k = most extreme replicates p can count and still be < alpha; the (k+1)-th replicate
        # from each end is the bound: p < alpha iff (k+1)-th largest of high < -tolerance
        # (regression) or (k+1)-th smallest of low > -tolerance (non-inferiority)
        k = int(alpha * (n_boot + 1)) + 1
        while k >= 0 and not (1 + k) / (n_boot + 1) < alpha:
            k -= 1
        if k < 0:
            lo_o, hi_o = -math.inf, math.inf
        else:
            lo_o = float(np.partition(low, k)[k])
            hi_o = float(-np.partition(-high, k)[k])
        ci = (lo_o, hi_o) if sign > 0 else (-hi_o, -lo_o)
        ci_method = "bootstrap basic (inverts the shift p-value)"
    rejected = p < alpha
    return PairedResult(
        method=name,
        n=n,
        mean_diff=mean_d,
        p_value=p,
        passed=not rejected if regression else rejected,
        alpha=float(alpha),
        beta=float(beta),
        higher_is_better=bool(higher_is_better),
        theta_paired=k * sd / math.sqrt(n),
        reference_mean=float(r.mean()),
        new_mean=float(w.mean()),
        sd_diff=sd,
        ci=ci,
        ci_method=ci_method,
        tolerance=float(tolerance),
        gate=gate,
    )


def bootstrap_means(values, n_boot: int, seed: int):  # noqa: ANN001, ANN201 - numpy array in and out
    """Means of ``n_boot`` resamples (with replacement) of ``values``, from a generator seeded by ``seed``."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    n = values.size
    rng = np.random.default_rng(seed)
    out = np.empty(n_boot)
    chunk = max(1, (1 << 20) // n)
    done = 0
    while done < n_boot:
        rows = min(chunk, n_boot - done)
        out[done:done + rows] = values[rng.integers(0, n, size=(rows, n))].mean(axis=1)
        done += rows
    return out


def is_binary(pairs: PairedScores) -> bool:
    """Whether every matched score is 0/1 or every one is 0/100."""
    values = set(pairs.reference) | set(pairs.new)
    return values <= {0.0, 1.0} or values <= {0.0, 100.0}


def paired_test(
    pairs: PairedScores,
    alpha: float,
    beta: float,
    higher_is_better: bool = True,
    method: str = "auto",
    seed: int = 0,
    tolerance: float = 0.0,
    gate: str = "regression",
) -> PairedResult:
    """Run the fitting paired test: McNemar for binary scores, the t-test otherwise.

    ``method`` is ``"auto"``, ``"mcnemar"``, ``"t"`` or ``"bootstrap"``. For binary scores a
    ``tolerance`` (the regression margin) moves McNemar's exact test to Tango's score test, which
    tests a shifted difference of paired proportions.
    """
    if method == "auto":
        method = "mcnemar" if is_binary(pairs) else "t"
    if method == "mcnemar":
        return mcnemar_exact(pairs.reference, pairs.new, alpha, beta, higher_is_better, gate=gate, margin=tolerance)
    return paired_continuous(pairs.reference, pairs.new, alpha, beta, higher_is_better, method=method, seed=seed,
                             tolerance=tolerance, gate=gate)
