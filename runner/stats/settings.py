"""``stats``: the settings of a job's decision, and their checks (what a mistake says before any model loads)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from runner.contract.errors import ConfigError
from runner.contract.task_config import TaskConfig
from runner.stats.numerics.cluster_variance import CLUSTER_MODES
from runner.stats.numerics.group_sequential import SequentialConfig, validate as validate_sequential
from runner.stats.data.hypothesis import GATES
from runner.stats.data.indicators import INDICATOR_MODES
from runner.stats.data.tolerance import Tolerance, check_percent
from runner.stats.numerics.ztest import compute_theta
from runner.stats.data.verdicts import validate as validate_verdicts

METHODS = ("auto", "unpaired", "paired")
PAIRED_TESTS = ("auto", "auto_t", "mcnemar", "betting", "t", "bootstrap")
"""``auto_t``: as ``auto``, but the paired t-test (asymptotic) decides unbounded scores, where ``auto`` makes no claim."""
MARGIN_UNITS = ("points", "percent")
UNPAIRED_TESTS = ("ztest", "exact")  # runner.stats.rules.unpaired


@dataclass
class StatsConfig:
    """How the verdict is decided: the rules, the margin and tolerance, and how the exit status reads it."""

    method: str = "auto"  # auto (paired when possible) | unpaired (TensorRT-LLM's threshold) | paired
    # auto: McNemar for 0/100 scores, the finite-sample betting test for other bounded scores (the task's
    # score_bounds), the t-test for unbounded ones | mcnemar | betting | t | bootstrap (t and bootstrap: asymptotic)
    paired_test: str = "auto"
    # seeds the paired bootstrap's resamples and the order the betting test bets on the differences in
    bootstrap_seed: int = 0
    # the betting test's largest bet, as a share of the most the capital allows (0 < c < 1; the paper's 1/2 to 3/4
    # bet less and decide less at small n; docs/statistics.md, "Continuous scores")
    betting_truncation: float = 0.9
    # resamples of a corpus metric's bootstrap (corpus BLEU, pooled perplexity): each recomputes the metric on both
    # sides; its p-value resolves 1 / (this + 1)
    corpus_bootstrap_iters: int = 1000
    # the unpaired rule for 0/100 scores: ztest (TensorRT-LLM's, its verdicts; its excess over alpha at the run's n
    # is printed) | exact (the exact unconditional test of two binomials: alpha at every n, docs/statistics.md)
    unpaired_test: str = "ztest"
    # a paired corpus claim needs at least this many documents whose items changed between the runs (fewer: the
    # bootstrap-t's tails are too thin, false GO 0.065 at n=500 with 2-5% changed; docs/statistics.md)
    corpus_min_changed: int = 30
    # an unpaired corpus claim (the reference kept no items) needs a run that misses the rarest share of documents
    # carrying half the pooled metric's variance at most alpha of the time: (1 - share)^n <= alpha, 129 documents at
    # alpha 0.05 (the longest 1 - Phi(2) = 2.3% of documents whose lengths are lognormal with log-sd 1; below it the
    # reference's imputed error is too small, false GO 0.056 at n=57; docs/statistics.md "Corpus metrics")
    corpus_rare_share: float = 0.023
    # the paired t-test withholds a claim when the differences' sample skewness puts its one-sided error more than
    # this above alpha, or its skewness-corrected p-value is not below alpha (one-term Edgeworth; rare large changes
    # make it err, docs/statistics.md "Unbounded scores"); 0.005 from the calibration grid; 1 keeps only the correction
    t_skew_limit: float = 0.005
    # the paired t-test claims only on a sample that misses a change carried by this share of the samples at most
    # alpha of the time: (1 - share)^n <= alpha, 59 samples at 0.05 (a sample of 40 misses it 13% of the time and the
    # t-test then errs unseen, docs/statistics.md "Unbounded scores"); 0.05 is the calibration grid's rarest tail
    t_rare_share: float = 0.05
    # NO-GO needs a drop larger than the margin: 0 keeps upstream's rule. In points, or percent of the reference.
    margin: float = 0.0
    margin_unit: str = "points"  # points | percent
    # GO needs the drop shown smaller than the tolerance; null: the task's tolerance, else its designed theta
    tolerance: Optional[float] = None
    tolerance_unit: str = "points"  # points | percent
    # when a regression beyond the margin AND a drop within the tolerance are both shown ("worse, but within
    # tolerance"): regression -> NO-GO, noninferiority -> GO
    gate: str = "regression"
    verdicts: str = "three_way"  # three_way (GO / NO-GO / INCONCLUSIVE) | two_way (TensorRT-LLM's PASS / FAIL)
    on_inconclusive: str = "inconclusive"  # inconclusive (exit 4) | pass (exit 0) | fail (exit 3)
    sequential: SequentialConfig = field(default_factory=SequentialConfig)  # group-sequential looks (off by default)
    # extensions planned at the first look (0: a fixed test at full alpha, upstream's); look k may spend
    # alpha up to spend(k / (extensions + 1)) of stats.sequential.efficacy
    extensions: int = 0
    extend: list[int] = field(default_factory=list)  # samples added by each extension so far (runner.extend)
    # clustered standard errors: auto (the task's cluster_key, when it declares one: MMLU subjects, GPQA domains)
    # | off (every sample independent). It changes the figures, so it is recorded (MLflow params, report.json).
    cluster: str = "auto"
    # fewer clusters than this (of more than one sample): no clustered claim, the verdict is INCONCLUSIVE. A clustered
    # variance rests on the cluster sums alone; with GPQA's 3 domains its false GO rate is 0.1-0.4 even with CR2 and
    # t(C-1) (docs/statistics.md, "Clustered questions")
    min_clusters: int = 10
    # per-sample indicators (prompt cut, token limit reached, answer unparsed), each tested paired against the
    # reference's rows (McNemar, one-sided): paired (a run that shows one significantly more often is INCONCLUSIVE,
    # the verdict on the clean samples shown) | report (shown, the verdict unchanged) | off (docs/noise.md)
    indicators: str = "paired"
    # the backend's failures (an error instead of an answer) are left out of both arms up to this share of the
    # samples; above it the verdict is INCONCLUSIVE
    max_failed_share: float = 0.02


def validate(stats: Any) -> None:
    if stats.method not in METHODS:
        raise ConfigError("unknown statistics method", where="stats.method", given=stats.method, allowed=", ".join(METHODS))
    if stats.paired_test not in PAIRED_TESTS:
        raise ConfigError("unknown paired test", where="stats.paired_test", given=stats.paired_test,
                          allowed=", ".join(PAIRED_TESTS))
    if stats.gate not in GATES:
        raise ConfigError("unknown gate", where="stats.gate", given=stats.gate, allowed=", ".join(GATES),
                          fix="what a verdict follows when a regression beyond the margin and a drop within the "
                              "tolerance are both shown: regression (NO-GO) or noninferiority (GO)")
    unpaired_test = getattr(stats, "unpaired_test", "ztest")
    if unpaired_test not in UNPAIRED_TESTS:
        raise ConfigError("unknown unpaired test", where="stats.unpaired_test", given=repr(unpaired_test),
                          allowed=", ".join(UNPAIRED_TESTS),
                          fix="ztest (TensorRT-LLM's verdicts) or exact (alpha at every n, 0/100 scores)")
    if stats.margin_unit not in MARGIN_UNITS:
        raise ConfigError("unknown margin unit", where="stats.margin_unit", given=stats.margin_unit,
                          allowed=", ".join(MARGIN_UNITS))
    if stats.cluster not in CLUSTER_MODES:
        raise ConfigError("unknown clustering mode", where="stats.cluster", given=repr(stats.cluster),
                          allowed=", ".join(CLUSTER_MODES),
                          fix="auto: cluster-robust errors by the task's cluster_key; off: samples independent")
    mc = getattr(stats, "min_clusters", 10)
    if isinstance(mc, bool) or not isinstance(mc, int) or mc < 2:
        raise ConfigError("the fewest clusters a clustered claim needs is a whole number >= 2",
                          where="stats.min_clusters", given=repr(mc),
                          fix="10 (the default, from the calibration); 2 accepts any clustered variance")
    c = getattr(stats, "betting_truncation", 0.9)
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.0 < c < 1.0:
        raise ConfigError("the betting test's truncation must be a number strictly between 0 and 1",
                          where="stats.betting_truncation", given=repr(c),
                          fix="0.9 (the default); 0.75 or 0.5 (the paper's) bet less and decide less at small n")
    least = getattr(stats, "corpus_min_changed", 30)
    if isinstance(least, bool) or not isinstance(least, int) or least < 0:
        raise ConfigError("the fewest changed documents a paired corpus claim needs is a whole number >= 0",
                          where="stats.corpus_min_changed", given=repr(least),
                          fix="30 (the default, from the calibration); 0 accepts any")
    _check_share(stats, "corpus_rare_share", 0.023, "documents the unpaired corpus bootstrap",
                 "0.023 (the default: an unpaired corpus claim from 129 documents at alpha 0.05); a larger share claims "
                 "from fewer documents, trusting that the corpus's longest documents carry less of its variance")
    skew = getattr(stats, "t_skew_limit", 0.005)
    if isinstance(skew, bool) or not isinstance(skew, (int, float)) or not 0.0 <= skew <= 1.0:
        raise ConfigError("the paired t-test's skewness limit must be a number from 0 to 1",
                          where="stats.t_skew_limit", given=repr(skew),
                          fix="0.005 (the default, from the calibration); 1 keeps only the skewness-corrected p-value")
    _check_share(stats, "t_rare_share", 0.05, "samples the paired t-test",
                 "0.05 (the default, from the calibration: the t-test claims from 59 samples at alpha 0.05); a larger "
                 "share claims from fewer samples, trusting that no rarer change exists")
    iters = stats.corpus_bootstrap_iters
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 99:
        raise ConfigError("too few bootstrap resamples for a corpus metric", where="stats.corpus_bootstrap_iters",
                          given=repr(iters), allowed="a whole number >= 99 (the p-value resolves 1 / (n + 1))",
                          fix="1000 (the default); lm-eval uses 100 for BLEU's standard error")
    validate_indicators(stats)
    validate_sequential(stats.sequential)
    validate_verdicts(stats)
    validate_extensions(stats)
    margin = stats.margin
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin) or margin < 0:
        raise ConfigError("the margin must be a finite number >= 0", where="stats.margin", given=repr(margin),
                          allowed="0 (upstream's rule) or a tolerated drop, e.g. 1 (points) or 2 with margin_unit=percent")
    if stats.margin_unit == "percent":
        check_percent(float(margin), "stats.margin", fraction_below=None)


def validate_indicators(stats: Any) -> None:
    """``stats.indicators`` is a known mode and ``stats.max_failed_share`` a share in [0, 1)."""
    mode = getattr(stats, "indicators", "paired")
    if mode not in INDICATOR_MODES:
        raise ConfigError("unknown indicator mode", where="stats.indicators", given=repr(mode),
                          allowed=", ".join(INDICATOR_MODES),
                          fix="paired (a run that truncates or fails more often than its reference is INCONCLUSIVE), "
                              "report (the counts shown, the verdict unchanged) or off")
    cap = getattr(stats, "max_failed_share", 0.02)
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not 0.0 <= cap < 1.0:
        raise ConfigError("the largest share of failed samples must be a number from 0 up to (not including) 1",
                          where="stats.max_failed_share", given=repr(cap),
                          fix="0.02 (the default: up to 2% of the samples may fail and are left out of both arms); "
                              "0 makes any failure INCONCLUSIVE")


def validate_extensions(stats: Any) -> None:
    """Extensions are planned (0 to 10), each adds samples, and there are no more than planned."""
    k, extend = stats.extensions, list(stats.extend)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 10:
        raise ConfigError("the planned extensions must be a whole number from 0 to 10", where="stats.extensions",
                          given=repr(k), allowed="0 (a fixed test, upstream's rule) .. 10, e.g. 3")
    if any(isinstance(e, bool) or not isinstance(e, int) or e < 1 for e in extend):
        raise ConfigError("each extension adds a whole number of samples >= 1", where="stats.extend",
                          given=repr(extend), allowed="e.g. [200] after one extension, [200,300] after two")
    if len(extend) > k:
        raise ConfigError("more extensions than were planned at the first look", where="stats.extend",
                          given=f"{len(extend)} extension(s) with stats.extensions={k}",
                          fix="a further look needs alpha that the first look left for it; with "
                              "stats.extensions=0 the first look was a fixed test at full alpha and nothing is "
                              "left: run the extended n as a new run, or plan extensions from the start "
                              "(stats.extensions=3)")
    margin = stats.margin
    if (k or stats.sequential.enabled) and isinstance(margin, (int, float)) and not isinstance(margin, bool) \
            and margin > 0:
        looks = f"stats.extensions={k}" if k else "stats.sequential.enabled=true"
        raise ConfigError("a margin cannot be tested across looks", where="stats.margin",
                          given=f"stats.margin={margin:g} with {looks}",
                          fix="stats.margin=0 (the looks then show any drop), or a fixed test with the margin "
                              "(stats.extensions=0, stats.sequential.enabled=false): for 0/100 scores the "
                              "looks' normal statistic at a margin exceeds alpha with few discordant samples "
                              "(docs/statistics.md, Extending a run)")
    if k and stats.sequential.enabled:
        raise ConfigError("extensions and planned sequential looks are two designs; choose one",
                          where="stats.extensions", given=f"{k} with stats.sequential.enabled=true",
                          fix="stats.extensions=0, or stats.sequential.enabled=false")


def margin_points(stats: Any, reference: float) -> float:
    """``stats.margin`` in metric points (a percent margin is a share of the reference's value)."""
    return float(stats.margin) if stats.margin_unit == "points" else abs(reference) * float(stats.margin) / 100.0



def resolve_tolerance(stats: Any, task: TaskConfig, reference: float) -> Tolerance:
    """``stats.tolerance``, else the task's ``tolerance``, else the task's designed theta.

    The designed theta is the minimum detectable drop of the task's registered design (its
    ``design_num_samples``, alpha, beta and sigma), never the theta of the run at hand: an imprecise
    run must not claim GO by being imprecise."""
    if stats.tolerance is not None:
        value, unit, where = float(stats.tolerance), stats.tolerance_unit, "stats.tolerance"
    elif task.tolerance is not None:
        value, unit, where = float(task.tolerance), "points", f"task {task.name}'s tolerance"
    else:
        n = task.design_num_samples or task.num_samples
        theta = compute_theta(n, task.sigma, task.alpha, task.beta)
        return Tolerance(theta, f"designed theta of task {task.name}: n={n}, alpha {task.alpha:g}, "
                                f"beta {task.beta:g}, sigma {task.sigma:g}")
    if unit == "percent":
        return Tolerance(abs(reference) * value / 100.0, f"{where} = {value:g}% of the reference {reference:g}")
    return Tolerance(value, where)


def _check_share(stats: Any, name: str, default: float, what: str, fix: str) -> None:
    """A rare-share setting (:mod:`runner.stats.numerics.rare_share`): a number strictly between 0 and 1."""
    share = getattr(stats, name, default)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < share < 1.0:
        raise ConfigError(f"the rarest share of {what} must see is a number strictly between 0 and 1",
                          where=f"stats.{name}", given=repr(share), fix=fix)
