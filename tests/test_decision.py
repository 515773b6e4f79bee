"""The decision: unpaired TensorRT-LLM threshold, paired test on recorded per-sample scores, warnings."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from evaluators.base import ScoredSample
from runner import reference_samples
from runner.decision import decide_against
from runner.errors import ConfigError, ReferenceError_
from runner.references import Reference
from runner.spec import AccuracySpec
from runner.stats import HypothesisParams

PARAMS = HypothesisParams(0.05, 0.2, 50.0, 100)
AUTO = SimpleNamespace(method="auto", paired_test="auto", bootstrap_seed=0)


def reference(tmp_path, scores: dict[str, float] | None, value: float) -> Reference:
    recorded = None
    if scores is not None:
        rel, sha = reference_samples.store(tmp_path, "mmlu", scores.items())
        recorded = {"samples": rel, "samples_sha256": sha}
    return Reference("mmlu", "m", AccuracySpec(), value, PARAMS, None, None, tmp_path / "mmlu.yaml", 0, recorded)


def scored(scores: dict[str, float]) -> list[ScoredSample]:
    return [ScoredSample(k, "", "", "", v) for k, v in scores.items()]


def ref_scores() -> dict[str, float]:
    return {f"s/{i}": (100.0 if i < 60 else 0.0) for i in range(100)}  # 60% accurate


def test_paired_test_catches_what_the_unpaired_threshold_misses(tmp_path):
    ref = ref_scores()
    new = dict(ref)
    for i in range(10):  # ten answers the reference got right are now wrong; nothing gained
        new[f"s/{i}"] = 0.0
    d = decide_against(reference(tmp_path, ref, 60.0), tmp_path, scored(new), 50.0, PARAMS, AUTO, None, "accuracy")
    # unpaired at n=100: threshold = 60 - 1.6448536 * sqrt(2 * 2500 / 100) = 60 - 11.63 -> 50 passes
    assert d.verdict.threshold == pytest.approx(60 - 1.6448536 * (2 * 2500 / 100) ** 0.5, abs=1e-4)
    assert d.verdict.passed
    # paired: b = 10, c = 0, exact one-sided p = 0.5 ** 10
    assert d.method == "paired" and d.paired.discordant == (10, 0)
    assert d.paired.p_value == pytest.approx(1 / 1024)
    assert not d.passed
    assert d.metrics()["passed"] == 0.0 and d.metrics()["unpaired_passed"] == 1.0


def test_identical_answers_pass_the_paired_test(tmp_path):
    ref = ref_scores()
    d = decide_against(reference(tmp_path, ref, 60.0), tmp_path, scored(ref), 60.0, PARAMS, AUTO, None, "accuracy")
    assert d.method == "paired" and d.passed and d.paired.p_value == 1.0


def test_other_subset_falls_back_to_unpaired_unless_paired_is_forced(tmp_path):
    ref = ref_scores()
    new = {f"t/{i}": 100.0 for i in range(50)} | {f"s/{i}": ref[f"s/{i}"] for i in range(50)}
    d = decide_against(reference(tmp_path, ref, 60.0), tmp_path, scored(new), 75.0, PARAMS, AUTO, None, "accuracy")
    assert d.method == "unpaired" and any("50 of 100" in n for n in d.notes)
    forced = SimpleNamespace(method="paired", paired_test="auto", bootstrap_seed=0)
    d = decide_against(reference(tmp_path, ref, 60.0), tmp_path, scored(new), 75.0, PARAMS, forced, None, "accuracy")
    assert d.method == "paired" and d.paired.n == 50


def test_paired_without_per_sample_scores_is_a_config_error(tmp_path):
    forced = SimpleNamespace(method="paired", paired_test="auto", bootstrap_seed=0)
    with pytest.raises(ConfigError, match="per-sample scores"):
        decide_against(reference(tmp_path, None, 60.0), tmp_path, scored(ref_scores()), 60.0, PARAMS, forced, None, "accuracy")


def test_unpaired_method_ignores_per_sample_scores(tmp_path):
    unpaired = SimpleNamespace(method="unpaired", paired_test="auto", bootstrap_seed=0)
    d = decide_against(reference(tmp_path, ref_scores(), 60.0), tmp_path, scored(ref_scores()), 60.0, PARAMS,
                       unpaired, None, "accuracy")
    assert d.method == "unpaired" and d.paired is None


def test_near_chance_reference_warns(tmp_path):
    # MMLU chance is 25; reference 30 with unpaired theta at n=100 (= 2.486... * 7.07 = 17.6) is within reach of chance
    d = decide_against(reference(tmp_path, None, 30.0), tmp_path, scored(ref_scores()), 60.0, PARAMS, AUTO, 25.0, "accuracy")
    assert any("chance level" in n for n in d.notes)
    d = decide_against(reference(tmp_path, None, 80.0), tmp_path, scored(ref_scores()), 80.0, PARAMS, AUTO, 25.0, "accuracy")
    assert not any("chance level" in n for n in d.notes)


def test_continuous_scores_estimate_sigma_from_the_reference(tmp_path):
    ref = {f"s/{i}": float(v) for i, v in enumerate([10, 20, 30, 40, 50])}
    d = decide_against(reference(tmp_path, ref, 30.0), tmp_path, scored(ref), 30.0,
                       HypothesisParams(0.05, 0.2, 11.06, 5), AUTO, None, "rouge1")
    # sample sd of 10..50 step 10 = sqrt(250) = 15.811...
    assert d.verdict.params.sigma == pytest.approx(250 ** 0.5)
    assert any("estimated from the reference" in n for n in d.notes)


def test_tampered_samples_file_is_refused(tmp_path):
    ref = reference(tmp_path, ref_scores(), 60.0)
    path = tmp_path / ref.recorded["samples"]
    path.write_text(path.read_text().replace('"score": 100.0', '"score": 0.0', 1))
    with pytest.raises(ReferenceError_, match="modified"):
        decide_against(ref, tmp_path, scored(ref_scores()), 60.0, PARAMS, AUTO, None, "accuracy")
