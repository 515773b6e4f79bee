"""Two runs' per-sample scores, paired and decided: B (the candidate) against A (the reference).

Pairing follows the references' rules (:func:`runner.references.samples.pairing_problem`): the same sample ids,
the same seed and dataset source where both runs say, and every common sample asked with the same prompt; two
lm-eval files must also agree on each common document's hash and target hash. When they do not pair, the
comparison stops with the reason, or, when the user allows it, falls back to TensorRT-LLM's unpaired test with a
note. The decision is the job's own (:func:`runner.stats.dispatch.decide_against`) on the paired samples only, so a
run with a few extra samples is still compared pair for pair; the samples only one run has are counted as dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.contract.errors import UserError
from runner.contract.evaluator import ScoredSample
from runner.references.samples import RunProvenance, SampleRow, pairing_problem, prompt_hash
from runner.reports.runs import RunSample, RunSamples
from runner.stats import advising
from runner.stats.numerics import scale
from runner.stats.decision import Decision
from runner.stats.dispatch import decide_against
from runner.stats.data.entry import Entry
from runner.stats.settings import StatsConfig, margin_points, validate
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.verdicts import INCONCLUSIVE
from runner.stats.data.tolerance import Tolerance, check_binary_range

BERNOULLI_SIGMA = 50.0  # the largest spread of a 0/100 score, when the runs show none


def _scored(sample_id: str, prompt: str, score: float) -> ScoredSample:
    """A candidate sample as :func:`pairing_problem` and :func:`decide_against` read it: id, prompt, score."""
    return ScoredSample(sample_id, prompt, prediction="", target="", score=score)


@dataclass
class Comparison:
    """What was compared, how it paired, what moved, and the decision."""

    a: RunSamples
    b: RunSamples
    common: list[str]
    a_only: list[str]
    b_only: list[str]
    problem: str | None  # why the runs do not pair (None: they do)
    decision: Decision
    higher_is_better: bool
    worse: list[str] = field(default_factory=list)  # ids where B is worse than A (A right, B wrong for 0/100)
    better: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def paired(self) -> bool:
        return self.problem is None

    @property
    def n(self) -> int:
        return self.decision.n


def provenance_problem(a: RunSamples, b: RunSamples, common: list[str]) -> str | None:
    """Why A's and B's common samples are not the same questions (None: they are)."""
    if any(a.samples[i].prompt is None for i in common) or any(b.samples[i].prompt is None for i in common):
        return "a run keeps no prompts for its samples, so they cannot be checked to be the same questions"
    recorded = {"seed": a.seed if b.seed is not None else None, "dataset_source": a.dataset_source}
    rows = {i: SampleRow(s.score, prompt_hash(s.prompt) if s.prompt is not None else None) for i, s in a.samples.items()}
    asked = [_scored(i, s.prompt, s.score) for i, s in b.samples.items() if s.prompt is not None]
    found = pairing_problem(recorded, rows, asked, RunProvenance(b.seed or 0, b.dataset_source))
    if found is not None:
        return found.replace("this run", "B").replace("the reference", "A").replace("reference's", "A's")
    for what in ("doc_hash", "target_hash"):
        differ = [i for i in common if _differs(getattr(a.samples[i], what), getattr(b.samples[i], what))]
        if differ:
            return (f"{len(differ)} of the {len(common)} common samples have another {what} in B than in A "
                    f"(first: doc_id {differ[0]})")
    return None


def _differs(x: str | None, y: str | None) -> bool:
    return x is not None and y is not None and x != y


def stats_config(alpha: float, margin: float, margin_unit: str, tolerance: float | None, tolerance_unit: str,
                 paired_test: str, gate: str, on_inconclusive: str) -> StatsConfig:
    """The job's ``stats`` settings from the command's options, checked as a job checks them."""
    stats = StatsConfig(paired_test=paired_test, margin=margin, margin_unit=margin_unit, tolerance=tolerance,
                        tolerance_unit=tolerance_unit, gate=gate, on_inconclusive=on_inconclusive)
    validate(stats)
    if not 0.0 < alpha < 0.5:
        raise UserError("alpha is out of range", where="--alpha", given=repr(alpha), allowed="0 < alpha < 0.5")
    return stats


def tolerance_for(stats: StatsConfig, a: RunSamples, reference: float) -> Tolerance:
    """``--tolerance``, else the tolerance A's own job decided with; a GO claim needs one."""
    if stats.tolerance is not None:
        if stats.tolerance_unit == "percent":
            return Tolerance(abs(reference) * stats.tolerance / 100.0,
                             f"--tolerance {stats.tolerance:g}% of A's {reference:g}")
        return Tolerance(float(stats.tolerance), "--tolerance")
    if a.tolerance is not None:
        return Tolerance(float(a.tolerance), f"the tolerance of A's job ({a.where}/report.json)")
    raise UserError("a GO verdict needs the drop you tolerate", where="--tolerance", given="none (and A's report "
                    "names none)", allowed="a drop > 0 in the metric's points (percent points for 0/1 accuracy), "
                    "or a percent of A's score with --tolerance-unit percent",
                    fix="pass e.g. --tolerance 2: B is GO when its drop against A is shown to be below 2 points")


def compare(a: RunSamples, b: RunSamples, stats: StatsConfig, alpha: float, beta: float,
            higher_is_better: bool | None, allow_unpaired: bool,
            score_bounds: tuple[float, float] | None = None) -> Comparison:
    """Pair B with A and decide; a :class:`UserError` when they cannot be compared as asked. ``score_bounds``
    (``--score-bounds``): the range of every per-sample score, else the one the runs' jobs recorded."""
    hib = _direction(a, b, higher_is_better)
    bounds = bounds_for(a, b, score_bounds)
    common = sorted(set(a.samples) & set(b.samples))
    a_only = sorted(set(a.samples) - set(b.samples))
    b_only = sorted(set(b.samples) - set(a.samples))
    notes = list(dict.fromkeys(a.notes + b.notes))
    if a.metric != b.metric:
        notes.append(f"A's metric is {a.metric} and B's is {b.metric}: check that they measure the same thing")
    same = same_run(a, b)
    if same:
        notes.append(same)
    problem = provenance_problem(a, b, common) if common else "A and B have no sample id in common"
    if problem is not None and not allow_unpaired:
        raise UserError("A and B cannot be paired", where=f"A: {a.describe()}; B: {b.describe()}", given=problem,
                        allowed="runs of the same task on the same samples, each asked with the same prompt",
                        fix="compare runs made with the same task, subset, seed and prompt settings; or pass "
                            "--unpaired for TensorRT-LLM's unpaired test of the two means (far less power)")
    ref_samples = [a.samples[i] for i in common] if problem is None else list(a.samples.values())
    new_samples = [b.samples[i] for i in common] if problem is None else list(b.samples.values())
    # run A as the reference: its mean over the samples it contributes, measured on that many
    reference = Entry(_mean(ref_samples), samples_measured=len(ref_samples), path=a.where)
    tolerance = tolerance_for(stats, a, reference.value)
    if all(s.score in (0.0, 100.0) for s in ref_samples + new_samples):
        check_binary_range(tolerance.points, margin_points(stats, reference.value), "--tolerance / --margin")
    params = HypothesisParams(alpha, beta, _sigma(ref_samples + new_samples), len(new_samples), hib)
    rows = {s.sample_id: SampleRow(s.score, None) for s in ref_samples}
    scored = [_scored(s.sample_id, s.prompt or "", s.score) for s in new_samples]
    check_within(ref_samples + new_samples, bounds, tolerance.points)
    decision = decide_against(reference, scored, _mean(new_samples), params, stats, None, a.metric, rows,
                              problem, tolerance=tolerance, score_bounds=bounds)
    if decision.outcome == INCONCLUSIVE:
        decision.advice = advising.for_decision(decision, len(ref_samples))
    notes += decision.notes
    if problem is not None:
        notes.append(f"unpaired comparison of all {len(ref_samples)} samples of A and {len(new_samples)} of B, as "
                     "--unpaired asked")
    worse, better = flips(a, b, common, hib) if problem is None else ([], [])
    return Comparison(a, b, common, a_only, b_only, problem, decision, hib, worse, better, notes)


def bounds_for(a: RunSamples, b: RunSamples, asked: tuple[float, float] | None) -> tuple[float, float] | None:
    """``--score-bounds``, else the bounds the runs' jobs recorded (both must agree where both recorded some)."""
    if asked is not None:
        lo, hi = (float(v) for v in asked)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise UserError("score bounds must be two finite numbers, the lower first", where="--score-bounds",
                            given=f"{lo:g} {hi:g}", allowed="LO HI with LO < HI, e.g. 0 100 or 0 1")
        return (lo, hi)
    recorded = {r.score_bounds for r in (a, b) if r.score_bounds is not None}
    if len(recorded) > 1:
        raise UserError("A's and B's jobs recorded different score bounds", where="report.json of each run",
                        given=f"A: {a.score_bounds}, B: {b.score_bounds}",
                        fix="check that A and B ran the same task; pass --score-bounds LO HI to say which holds")
    return recorded.pop() if recorded else None


def check_within(samples: list[RunSample], bounds: tuple[float, float] | None, tolerance: float) -> None:
    """Every score within the bounds the betting test relies on (a score outside them is a wrong bound), and the
    tolerance, in the scores' own units, smaller than their range."""
    if bounds is None:
        return
    if tolerance >= bounds[1] - bounds[0]:
        raise UserError("the tolerance is not smaller than the scores' range", where="--tolerance",
                        given=f"{tolerance:g} for scores within [{bounds[0]:g}, {bounds[1]:g}]",
                        fix="give the tolerance in the scores' own units (e.g. 0.01 for a 1-point drop of a "
                            "fraction)")
    outside = [s for s in samples if not bounds[0] <= s.score <= bounds[1]]
    if outside:
        raise UserError("a per-sample score lies outside the score bounds", where=f"sample {outside[0].sample_id}",
                        given=f"score {outside[0].score:g}, bounds [{bounds[0]:g}, {bounds[1]:g}]",
                        fix="pass the metric's true range with --score-bounds LO HI (e.g. 0 1 for a fraction)")


def same_run(a: RunSamples, b: RunSamples) -> str | None:
    """A note when B is A itself (the same path) or a copy of it (every sample's id, score and prompt equal):
    such a comparison says nothing about a change, whatever its verdict."""
    if Path(a.where).expanduser().resolve() == Path(b.where).expanduser().resolve():
        return f"A and B are the same run ({a.where}): the comparison says nothing about a change"
    if a.samples == b.samples:
        return ("A and B hold the same samples with the same scores and prompts: a run compared with a copy of "
                "itself says nothing about a change")
    return None


def _direction(a: RunSamples, b: RunSamples, asked: bool | None) -> bool:
    if asked is not None:
        return asked
    said = {r.higher_is_better for r in (a, b) if r.higher_is_better is not None}
    if len(said) > 1:
        raise UserError("A and B disagree on the metric's direction", where="config.yaml of each run",
                        given=f"A: higher_is_better={a.higher_is_better}, B: {b.higher_is_better}",
                        fix="pass --higher-is-better or --lower-is-better")
    return said.pop() if said else True


def _mean(samples: list[RunSample]) -> float:
    return sum(s.score for s in samples) / len(samples)


def _sigma(samples: list[RunSample]) -> float:
    """The per-sample spread the unpaired test shown beside the paired one uses (never 0: that is the exact rule)."""
    spread = scale.estimate_sigma(s.score for s in samples) if len(samples) >= 2 else 0.0
    return spread if spread > 0 else BERNOULLI_SIGMA


def flips(a: RunSamples, b: RunSamples, common: list[str], higher_is_better: bool) -> tuple[list[str], list[str]]:
    """Common samples where B scores worse than A, and better (for 0/100 scores: A right and B wrong, the reverse)."""
    sign = 1.0 if higher_is_better else -1.0
    moved = [(i, sign * (b.samples[i].score - a.samples[i].score)) for i in common]
    return [i for i, d in moved if d < 0], [i for i, d in moved if d > 0]


def summary(result: Comparison) -> dict[str, Any]:
    """The pairing figures of report.json (the decision is written beside them)."""
    return {"paired": result.paired, "pairing_problem": result.problem, "n_common": len(result.common),
            "n_decided": result.n, "only_in_a": len(result.a_only), "only_in_b": len(result.b_only),
            "dropped": {"only_in_a": result.a_only, "only_in_b": result.b_only},
            "flipped": {"worse": result.worse, "better": result.better}}
