"""From a score and its reference to one decision: TensorRT-LLM's unpaired threshold, and the
paired test when the reference kept per-sample scores for the same samples.

``stats.method=auto`` decides with the paired test when every evaluated sample has a reference
score (same subset, same ids), because it needs far fewer samples for the same power; the
unpaired report is always printed next to it so the two can be compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from runner.errors import ConfigError
from runner.stats import HypothesisParams, Verdict, decide

METHODS = ("auto", "unpaired", "paired")
PAIRED_TESTS = ("auto", "mcnemar", "t", "bootstrap")


@dataclass
class Decision:
    verdict: Verdict  # the unpaired TensorRT-LLM test, always computed
    method: str  # which test decided: unpaired | paired
    passed: bool
    paired: Any = None  # runner.paired.PairedResult when a paired test ran
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        parts = [self.verdict.render()]
        if self.paired is not None:
            parts.append(self.paired.render())
        parts.append(f"decided by: {self.method} test -> {'PASSED' if self.passed else 'REGRESSION DETECTED'}")
        return "\n".join(parts)

    def metrics(self) -> dict[str, float]:
        out = {"reference": self.verdict.reference, "threshold": self.verdict.threshold, "margin": self.verdict.margin,
               "p_value": self.verdict.p_value, "passed": float(self.passed),
               "unpaired_passed": float(self.verdict.passed)}
        if self.paired is not None:
            p = self.paired.to_dict()
            out |= {"paired_p_value": p["p_value"], "paired_passed": float(p["passed"]), "paired_n": float(p["n"]),
                    "paired_mean_diff": p["mean_diff"]}
            out |= {f"paired_{k}": float(p[k]) for k in ("theta_paired", "discordant_b", "discordant_c") if p[k] is not None}
        return out


def validate(stats: Any) -> None:
    if stats.method not in METHODS:
        raise ConfigError("unknown statistics method", where="stats.method", given=stats.method, allowed=", ".join(METHODS))
    if stats.paired_test not in PAIRED_TESTS:
        raise ConfigError("unknown paired test", where="stats.paired_test", given=stats.paired_test,
                          allowed=", ".join(PAIRED_TESTS))


def decide_against(reference: Any, ref_dir: Path, scored: Sequence[Any], score: float, params: HypothesisParams,
                   stats: Any, chance_level: float | None, metric: str) -> Decision:
    """The unpaired verdict, the paired test when possible or asked for, and the warnings."""
    from runner import paired as paired_stats
    from runner import reference_samples

    notes: list[str] = []
    recorded = reference.recorded or {}
    per_sample = None
    if stats.method != "unpaired" and recorded.get("samples"):
        per_sample = reference_samples.load(ref_dir, str(recorded["samples"]), recorded.get("samples_sha256"))
    if per_sample and not all(v in (0.0, 100.0) for v in per_sample.values()):
        sigma = paired_stats.estimate_sigma(per_sample.values())
        notes.append(f"sigma {sigma:.3f} estimated from the reference's {len(per_sample)} per-sample scores "
                     f"(configured {params.sigma:g})")
        params = replace(params, sigma=sigma)
    verdict = decide(score, reference.value, params, reference.threshold, metric=metric)

    result = None
    new_scores = {s.sample_id: s.score for s in scored}
    if per_sample is not None:
        pairs = paired_stats.pair_scores(per_sample, new_scores)
        complete = pairs.n_matched == len(new_scores)
        if complete or stats.method == "paired":
            result = paired_stats.paired_test(pairs, params.alpha, params.beta, params.higher_is_better,
                                              method=stats.paired_test, seed=stats.bootstrap_seed)
            if not complete:
                notes.append(f"paired test on the {pairs.n_matched} of {len(new_scores)} samples the reference also scored")
        else:
            notes.append(f"unpaired test: only {pairs.n_matched} of {len(new_scores)} samples have reference scores "
                         "(another subset or seed); stats.method=paired uses the matched ones")
    elif stats.method == "paired":
        raise ConfigError("a paired test needs the reference's per-sample scores, and this entry has none",
                          where=f"{reference.path} entry {reference.index}", given="stats.method=paired",
                          fix="record the reference again with reference.mode=record, or use stats.method=auto|unpaired")

    method = "paired" if result is not None else "unpaired"
    passed = result.passed if result is not None else verdict.passed
    if chance_level is not None:
        theta = result.theta_paired if result is not None else verdict.theta
        warning = paired_stats.near_chance_warning(reference.value, min(theta, 1e9), chance_level, params.higher_is_better)
        if warning:
            notes.append(warning)
    return Decision(verdict, method, passed, result, notes)
