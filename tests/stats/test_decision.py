"""The decision: rule precedence, pairing provenance, margins, intervals and warnings.

Expected figures are derived by hand from the rules (binomial tails, normal quantiles, Wilson's
closed form), not from the code's output.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from runner.contract.evaluator import ScoredSample
from runner.references import samples as reference_samples
from runner.references.samples import RunProvenance, pairing_problem
from runner.stats.dispatch import decide_against
from runner.stats.settings import StatsConfig, validate
from runner.stats.data.tolerance import Tolerance
from runner.contract.errors import ConfigError, ReferenceError_
from runner.references.store import Reference
from runner.contract.spec import AccuracySpec
from runner.stats.data.hypothesis import HypothesisParams

PARAMS = HypothesisParams(0.05, 0.2, 50.0, 100)
Z05 = 1.6448536269514722
RUN = RunProvenance(seed=0, dataset_source="packaged")


def stats(**kw) -> SimpleNamespace:
    return SimpleNamespace(**(vars(StatsConfig()) | kw))


TOL = Tolerance(2.75, "MMLU's designed theta")


def reference(tmp_path, scores: dict[str, float] | None, value: float, *, threshold: float | None = None,
              params: HypothesisParams = PARAMS, seed: int = 0, source: str = "packaged",
              prompt=lambda sid: f"prompt {sid}") -> Reference:
    recorded = None
    if scores is not None:
        rel, sha = reference_samples.store(tmp_path, "mmlu", ((k, v, prompt(k)) for k, v in scores.items()))
        recorded = {"samples": rel, "samples_sha256": sha, "seed": seed, "dataset_source": source}
    return Reference("mmlu", "m", AccuracySpec(), value, params, threshold, None, tmp_path / "mmlu.yaml", 0, recorded)


def scored(scores: dict[str, float]) -> list[ScoredSample]:
    return [ScoredSample(k, f"prompt {k}", "", "", v) for k, v in scores.items()]


def ref_scores(n: int = 100, right: int = 60) -> dict[str, float]:
    return {f"s/{i}": (100.0 if i < right else 0.0) for i in range(n)}


def decide(ref, new: dict[str, float], score: float, tmp_path, st=None, params=PARAMS, chance=None, metric="accuracy",
           run=RUN, gates=(), tol=TOL):
    """As a job decides: its reference step loads the per-sample scores, its decide step checks the pairing."""
    st = st or stats()
    recorded = ref.recorded or {}
    rows = problem = None
    if st.method != "unpaired" and recorded.get("samples"):
        rows = reference_samples.load_rows(tmp_path, recorded["samples"], recorded.get("samples_sha256"))
        problem = pairing_problem(recorded, rows, scored(new), run)
    return decide_against(ref, scored(new), score, params, st, chance, metric, rows, problem, gates, tol)


def test_paired_test_catches_what_the_unpaired_threshold_misses(tmp_path):
    ref = ref_scores()
    new = dict(ref) | {f"s/{i}": 0.0 for i in range(10)}  # ten right answers lost, nothing gained
    d = decide(reference(tmp_path, ref, 60.0), new, 50.0, tmp_path)
    # unpaired at n=100: threshold = 60 - 1.6448536 * sqrt(2 * 2500 / 100) = 60 - 11.63 -> 50 passes
    assert d.verdict.threshold == pytest.approx(60 - Z05 * (2 * 2500 / 100) ** 0.5, abs=1e-6)
    assert d.verdict.passed
    # paired: b = 10, c = 0, exact one-sided p = 0.5 ** 10
    assert d.rule == "paired" and d.paired.discordant == (10, 0)
    assert d.p_value == pytest.approx(1 / 1024)
    assert not d.passed and not d.all_passed
    m = d.metrics()
    assert m["passed"] == 0.0 and m["unpaired_passed"] == 1.0 and m["p_value"] == pytest.approx(1 / 1024)


def test_identical_answers_pass_the_paired_test(tmp_path):
    ref = ref_scores()
    d = decide(reference(tmp_path, ref, 60.0), ref, 60.0, tmp_path)
    assert d.rule == "paired" and d.passed and d.p_value == 1.0 and d.difference == 0.0


def test_explicit_threshold_keeps_its_rule_over_the_paired_test(tmp_path):
    """A registered threshold decides even when a paired test is possible (and would pass)."""
    ref = ref_scores()
    new = dict(ref) | {f"s/{i}": 0.0 for i in range(4)}  # 56%; McNemar b=4, c=0: p = 1/16 > 0.05 would pass
    d = decide(reference(tmp_path, ref, 60.0, threshold=58.0), new, 56.0, tmp_path)
    assert d.rule == "explicit_threshold" and not d.passed
    assert d.paired is None and d.p_value is None
    assert d.to_dict()["tests"][0] == {"name": "accuracy", "rule": "explicit_threshold", "gate": "regression",
                                       "p_value": None, "alpha": 0.05, "passed": False}


def test_exact_rule_one_lost_passkey_of_twenty_fails(tmp_path):
    """Passkey upstream: sigma 0, threshold = reference; 19 of 20 against 100 fails, as upstream."""
    params = HypothesisParams(0.5, 0.2, 0.0, 20)
    ref = {f"p/{i}": 100.0 for i in range(20)}
    new = dict(ref) | {"p/7": 0.0}
    d = decide(reference(tmp_path, ref, 100.0, params=params), new, 95.0, tmp_path, params=params)
    assert d.rule == "exact" and not d.passed and d.p_value is None and d.paired is None
    assert d.verdict.threshold == 100.0
    same = decide(reference(tmp_path, ref, 100.0, params=params), ref, 100.0, tmp_path, params=params)
    assert same.rule == "exact" and same.passed


def test_no_common_ids_falls_back_to_unpaired_and_paired_refuses(tmp_path):
    """passkey seed=1 against a reference recorded at seed 0 shares no id: auto must not crash."""
    ref = reference(tmp_path, ref_scores(), 60.0)
    new = {f"t/{i}": 100.0 for i in range(100)}
    d = decide(ref, new, 100.0, tmp_path)
    assert d.rule == "unpaired" and any("no sample id" in n for n in d.notes)
    with pytest.raises(ConfigError, match="cannot be paired"):
        decide(ref, new, 100.0, tmp_path, st=stats(method="paired"))


def test_other_subset_falls_back_to_unpaired_unless_paired_is_forced(tmp_path):
    ref = ref_scores()
    new = {f"t/{i}": 100.0 for i in range(50)} | {f"s/{i}": ref[f"s/{i}"] for i in range(50)}
    d = decide(reference(tmp_path, ref, 60.0), new, 75.0, tmp_path)
    assert d.rule == "unpaired" and any("50 of 100" in n for n in d.notes)
    d = decide(reference(tmp_path, ref, 60.0), new, 75.0, tmp_path, st=stats(method="paired"))
    assert d.rule == "paired" and d.paired.n == 50


@pytest.mark.parametrize("change, why", [
    ({"seed": 1}, "seed=0"),
    ({"source": "hub"}, "dataset source"),
    ({"prompt": lambda sid: "other" if sid == "s/3" else f"prompt {sid}"}, "1 of the 100 common samples"),
])
def test_pairing_needs_the_same_seed_source_and_prompts(tmp_path, change, why):
    ref = reference(tmp_path, ref_scores(), 60.0, **change)
    d = decide(ref, ref_scores(), 60.0, tmp_path)
    assert d.rule == "unpaired" and any(why in n for n in d.notes), d.notes
    with pytest.raises(ConfigError, match="cannot be paired"):
        decide(ref, ref_scores(), 60.0, tmp_path, st=stats(method="paired"))


def test_reference_without_prompt_hashes_is_not_paired(tmp_path):
    ref = reference(tmp_path, ref_scores(), 60.0)
    path = tmp_path / ref.recorded["samples"]
    body = "".join(line.split(', "prompt_sha256"')[0] + "}\n" for line in path.read_text().splitlines())
    rel, sha = "samples/mmlu/old.jsonl", __import__("hashlib").sha256(body.encode()).hexdigest()
    (tmp_path / rel).write_text(body)
    old = Reference("mmlu", "m", AccuracySpec(), 60.0, PARAMS, None, None, tmp_path / "mmlu.yaml", 0,
                    dict(ref.recorded, samples=rel, samples_sha256=sha))
    d = decide(old, ref_scores(), 60.0, tmp_path)
    assert d.rule == "unpaired" and any("no prompt hashes" in n for n in d.notes)


def test_paired_without_per_sample_scores_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="per-sample scores"):
        decide(reference(tmp_path, None, 60.0), ref_scores(), 60.0, tmp_path, st=stats(method="paired"))


def test_unpaired_method_ignores_per_sample_scores(tmp_path):
    d = decide(reference(tmp_path, ref_scores(), 60.0), ref_scores(), 60.0, tmp_path, st=stats(method="unpaired"))
    assert d.rule == "unpaired" and d.paired is None


def test_near_chance_reference_warns(tmp_path):
    # chance 25; reference 30 with unpaired theta at n=100 (2.4865 x 7.071 = 17.6) reaches chance
    d = decide(reference(tmp_path, None, 30.0), ref_scores(), 60.0, tmp_path, chance=25.0)
    assert any("chance level" in n for n in d.notes)
    d = decide(reference(tmp_path, None, 80.0), ref_scores(), 80.0, tmp_path, chance=25.0)
    assert not any("chance level" in n for n in d.notes)


def test_no_chance_warning_when_the_paired_theta_is_undefined(tmp_path):
    """Identical answers: 0 discordant pairs, the paired theta is undefined, nothing to warn about."""
    ref = ref_scores(right=30)
    d = decide(reference(tmp_path, ref, 30.0), ref, 30.0, tmp_path, chance=25.0)
    assert d.rule == "paired" and d.theta is None
    assert not any("chance level" in n for n in d.notes)
    # a reference at or below chance is worth the warning whatever theta is (the embedded model on MMLU)
    low = ref_scores(right=20)
    d = decide(reference(tmp_path, low, 20.0), low, 20.0, tmp_path, chance=25.0)
    assert d.theta is None and any("not above chance level" in n for n in d.notes)


def test_continuous_scores_estimate_sigma_from_the_reference(tmp_path):
    ref = {f"s/{i}": float(v) for i, v in enumerate([10, 20, 30, 40, 50])}
    d = decide(reference(tmp_path, ref, 30.0), ref, 30.0, tmp_path, params=HypothesisParams(0.05, 0.2, 11.06, 5),
               metric="rouge1")
    # sample sd of 10..50 step 10 = sqrt(250) = 15.811...
    assert d.verdict.params.sigma == pytest.approx(250 ** 0.5)
    assert any("estimated from the reference" in n for n in d.notes)
    # theta in the metrics is the one of the estimated sigma (one computation, written everywhere)
    assert d.metrics()["sigma"] == pytest.approx(250 ** 0.5)


def test_identical_continuous_rerun_gives_difference_0_and_p_1(tmp_path):
    """Full-precision per-sample scores: no rounding noise in an identical rerun."""
    ref = {f"s/{i}": 14.0 + i / 3.0 + 1e-9 * i for i in range(40)}
    params = HypothesisParams(0.01, 0.2, 4.48, 40, higher_is_better=False)
    score = sum(ref.values()) / len(ref)
    d = decide(reference(tmp_path, ref, score, params=params), ref, score, tmp_path, params=params, metric="perplexity")
    assert d.rule == "paired" and d.difference == 0.0 and d.p_value == 1.0 and d.passed


def test_tampered_samples_file_is_refused(tmp_path):
    ref = reference(tmp_path, ref_scores(), 60.0)
    path = tmp_path / ref.recorded["samples"]
    path.write_text(path.read_text().replace('"score": 100.0', '"score": 0.0', 1))
    with pytest.raises(ReferenceError_, match="modified"):
        decide(ref, ref_scores(), 60.0, tmp_path)


# ----------------------------------------------------------------------------- intervals


def test_unpaired_interval_is_the_wald_interval_of_the_test(tmp_path):
    d = decide(reference(tmp_path, None, 60.0), ref_scores(), 55.0, tmp_path)
    half = Z05 * math.sqrt(2 * 2500 / 100)  # 11.6309
    assert d.ci == pytest.approx((-5.0 - half, -5.0 + half), abs=1e-9)
    assert d.to_dict()["ci_level"] == pytest.approx(0.9)


def test_paired_binary_interval_inverts_the_exact_test_and_the_verdict_agrees(tmp_path):
    """b=10, c=3: McNemar's exact p = P(X >= 10 | 13, 1/2) = (286 + 78 + 13 + 1) / 8192 = 0.0461 < 0.05."""
    ref = ref_scores()  # 60 right
    new = dict(ref) | {f"s/{i}": 0.0 for i in range(10)} | {f"s/{i}": 100.0 for i in range(60, 63)}
    d = decide(reference(tmp_path, ref, 60.0), new, 53.0, tmp_path)
    assert d.rule == "paired" and d.difference == pytest.approx(-7.0)
    assert d.p_value == pytest.approx(378 / 8192)
    assert d.outcome == "NO-GO" and d.ci[1] < 0  # the regression shows in the interval's upper bound
    assert d.ci[0] < -2.75  # and the tolerance is not shown
    m = d.metrics()
    assert m["diff_ci_low"] == pytest.approx(d.ci[0]) and m["no_go"] == 1.0
    assert d.to_dict()["verdict"] == "NO-GO" and d.exit_status == 3


def test_a_tie_at_the_margin_prints_a_bound_that_agrees_with_the_verdict(tmp_path):
    """The score exactly at the unpaired threshold: the p-value and the Wald bound tie, and computed apart
    they disagreed in the last bit (bound -0.020000000000003 < -0.02 with no NO-GO)."""
    s = math.sqrt(2 * 2500 / 100)
    for margin in (0.02, 0.03, 0.06, 0.5, 1.25):
        d = decide(reference(tmp_path, None, 60.0), ref_scores(), 60 - margin - Z05 * s, tmp_path,
                   st=stats(margin=margin))
        assert (d.ci[1] < -margin) == (d.outcome == "NO-GO") == (not d.passed), margin
        assert (d.to_dict()["no_go_bound"] < -margin) == (not d.passed)


def test_the_printed_go_bound_is_never_the_tolerance(tmp_path):
    """A GO bound just inside the tolerance prints with the digits that show it; one just outside never prints
    inside (the score at the GO threshold, tolerances around it)."""
    s = math.sqrt(2 * 2500 / 100)
    for k in range(40):
        tol = 2.0 + 0.0137 * k
        for nudge in (-1e-9, 0.0, 1e-9):
            d = decide(reference(tmp_path, None, 60.0), ref_scores(), 60 - tol + Z05 * s + nudge, tmp_path,
                       tol=Tolerance(tol, "test"))
            line = next(x for x in d.render().splitlines() if x.startswith("difference:"))
            bound, thr = line.split("GO bound ")[1].split(" (GO iff > ")
            thr = thr.split(")")[0]
            assert (float(bound) > float(thr)) == (d.outcome == "GO") == d.claims.within, line
            assert d.outcome != "GO" or bound != thr


def test_b4_c0_is_not_a_pass_with_an_interval_below_zero(tmp_path):
    """The audit's case: b=4, c=0, n=100: exact p = 1/16 = 0.0625, so no regression is shown, and the
    interval must not lie below 0 (Newcombe's did, at -0.78)."""
    ref = ref_scores()
    new = dict(ref) | {f"s/{i}": 0.0 for i in range(4)}
    d = decide(reference(tmp_path, ref, 60.0), new, 56.0, tmp_path)
    assert d.p_value == pytest.approx(1 / 16)
    assert d.ci[1] >= 0 and d.outcome == "INCONCLUSIVE" and d.exit_status == 4


def test_identical_answers_at_n_100_do_not_prove_the_tolerance(tmp_path):
    """Zero discordant pairs of 100 never prove a 2.75-point tolerance by themselves."""
    ref = ref_scores()
    d = decide(reference(tmp_path, ref, 60.0), ref, 60.0, tmp_path)
    assert d.passed and d.outcome == "INCONCLUSIVE"
    assert d.ci[0] < -2.75 and d.advice is None  # the job (run.advise) adds the advice


# ----------------------------------------------------------------------------- margins and tolerances


def test_margin_and_tolerance_on_a_continuous_metric(tmp_path):
    """Continuous metric, lower is better: every document's perplexity rises by 3%. Unbounded: the t-test decides
    only when chosen (stats.paired_test=t); under auto it makes no claim."""
    ref = {f"s/{i}": 10.0 + (i % 7) for i in range(50)}
    new = {k: v * 1.03 for k, v in ref.items()}
    params = HypothesisParams(0.01, 0.2, 4.48, 50, higher_is_better=False)
    r = reference(tmp_path, ref, sum(ref.values()) / 50, params=params)
    score = sum(new.values()) / 50
    tol5 = Tolerance(0.05 * r.value, "5%")
    auto = decide(r, new, score, tmp_path, params=params, metric="perplexity", tol=tol5)
    assert auto.outcome == "INCONCLUSIVE" and any(n.startswith("no claim: the scores are unbounded") for n in auto.notes)

    def stats(**kw) -> SimpleNamespace:  # noqa: F811 - the chosen asymptotic t-test, on 50 documents trusting that
        # no change hides in fewer than 10% of them (it claims from 44 samples at alpha 0.01; 90 by default)
        return SimpleNamespace(**(vars(StatsConfig()) | {"paired_test": "t", "t_rare_share": 0.1} | kw))

    strict = decide(r, new, score, tmp_path, st=stats(), params=params, metric="perplexity", tol=tol5)
    # a rise > 0 is shown and a rise < 5% is shown: worse, but within tolerance; stats.gate decides
    assert strict.rule == "paired" and not strict.passed and strict.both_shown and strict.outcome == "NO-GO"
    assert "worse, but within tolerance" in strict.render() and "increase" in strict.hypothesis()
    go = decide(r, new, score, tmp_path, st=stats(gate="noninferiority"), params=params, metric="perplexity", tol=tol5)
    assert go.outcome == "GO" and go.both_shown
    relaxed = decide(r, new, score, tmp_path, st=stats(margin=5.0, margin_unit="percent"), params=params,
                     metric="perplexity", tol=tol5)
    assert relaxed.passed and relaxed.verdict.tolerance == pytest.approx(0.05 * r.value) and relaxed.outcome == "GO"
    # a 2% tolerance is not shown (the rise is 3%), and no rise beyond a 5% margin is shown either
    undecided = decide(r, new, score, tmp_path, st=stats(margin=5.0, margin_unit="percent"), params=params,
                       metric="perplexity", tol=Tolerance(0.02 * r.value, "2%"))
    assert undecided.outcome == "INCONCLUSIVE"
    lo, hi = undecided.ci  # new - reference: the interval reaches past 2% and stays inside 5%
    assert lo < 0.05 * r.value and hi > 0.02 * r.value


def test_unpaired_margin_shifts_the_threshold_and_the_p_value(tmp_path):
    r = reference(tmp_path, None, 60.0)
    s = math.sqrt(2 * 2500 / 100)
    d = decide(r, ref_scores(), 47.0, tmp_path, st=stats(margin=2.0))
    assert d.verdict.threshold == pytest.approx(60 - 2 - Z05 * s)
    # H0: drop <= 2; observed drop 13: p = Phi((47 - 60 + 2) / s)
    assert d.p_value == pytest.approx(0.5 * math.erfc(11 / s / math.sqrt(2)))
    # p = Phi(-1.556) = 0.06: not shown, and the interval's upper bound -13 + 1.645 s = -1.37 is above -2
    assert d.ci[1] == pytest.approx(-13 + Z05 * s) and d.ci[1] > -2 and d.outcome == "INCONCLUSIVE"
    # GO needs 59 - 60 - 1.645 s > -2.75: not at n=100 (s = 7.07); p of H0 drop >= 2.75 = Phi(-(1.75) / s)
    ni = decide(r, ref_scores(), 59.0, tmp_path, st=stats(margin=2.0))
    assert ni.outcome == "INCONCLUSIVE" and ni.p_within == pytest.approx(0.5 * math.erfc(1.75 / s / math.sqrt(2)))


def test_binary_paired_margin_uses_tangos_score_test(tmp_path):
    ref = ref_scores()
    new = dict(ref) | {f"s/{i}": 0.0 for i in range(10)}  # drop 10 points, b=10 c=0
    d = decide(reference(tmp_path, ref, 60.0), new, 50.0, tmp_path, st=stats(margin=12.0))
    assert d.rule == "paired" and d.paired.method.startswith("Tango") and d.passed
    assert d.p_value > 0.5 and d.ci[1] > -12  # the drop (10) is on the safe side of the margin (12)
    tight = decide(reference(tmp_path, ref, 60.0), new, 50.0, tmp_path, st=stats(margin=2.0))
    assert not tight.passed and tight.ci[1] < -2


def test_bad_stats_settings_are_config_errors():
    with pytest.raises(ConfigError, match="stats.margin"):
        validate(stats(margin=-1.0))
    with pytest.raises(ConfigError, match="stats.gate"):
        validate(stats(gate="superiority"))
    with pytest.raises(ConfigError, match="stats.margin_unit"):
        validate(stats(margin_unit="pct"))


# ----------------------------------------------------------------------------- extra gates


class _Gate:
    metric, alpha, checked, p_value = "consistency_rate", 0.05, True, 0.001
    passed = False

    def render(self) -> str:
        return "consistency gate: REGRESSION"

    def metrics(self) -> dict[str, float]:
        return {"consistency_rate_passed": 0.0}


def test_a_failed_extra_gate_fails_the_decision(tmp_path):
    ref = ref_scores()
    d = decide(reference(tmp_path, ref, 60.0), ref, 60.0, tmp_path, gates=[_Gate()])
    assert d.passed and not d.all_passed and d.outcome == "NO-GO"
    tests = d.to_dict()["tests"]
    assert [(t["name"], t["gate"]) for t in tests] == [("accuracy", "regression"), ("accuracy", "noninferiority"),
                                                       ("consistency_rate", "regression")]
    assert tests[2]["p_value"] == 0.001 and not tests[2]["passed"]
    assert "failed gate: consistency_rate" in d.render()


def test_a_claim_the_rule_withheld_is_not_made_again_by_a_sweep(tmp_path):
    """40 perplexity-like documents all worse by about 15 (p far below alpha) under the paired t-test: the rule
    withholds NO-GO below its fewest samples (59 at alpha 0.05), and the sweep's judge, which corrects the jobs'
    p-values as one family, must keep that job INCONCLUSIVE instead of reading NO-GO from its p-value."""
    from runner.sweep.judge import judge

    ref = {f"s/{i}": 50.0 + (i % 7) for i in range(40)}
    new = {k: v - 15.0 - 0.1 * (i % 5) for i, (k, v) in enumerate(ref.items())}
    params = HypothesisParams(0.05, 0.2, 4.48, 40)
    d = decide(reference(tmp_path, ref, 53.0, params=params), new, 38.0, tmp_path,
               st=stats(paired_test="t"), params=params)
    assert d.outcome == "INCONCLUSIVE" and d.p_value < 1e-10  # withheld, though its p-value shows it
    regression = [t for t in d.tests() if t["gate"] == "regression"][0]
    assert regression["p_value"] is None and regression["passed"]
    rows = [{"verdict": d.outcome.lower(), "_tests": d.tests()}]
    judge(rows, "holm", None)
    assert rows[0]["sweep_verdict"] == "inconclusive"
