"""Truncation- and error-aware verdicts (issue 49, point 5): per sample and arm, whether the prompt was cut, the
generation stopped at its token limit, the answer was unparsed or the backend failed; each tested paired (McNemar,
one-sided) against the reference's rows; failures left out of both arms up to ``stats.max_failed_share``.

Pipeline logic on the scripted backend over 12 GSM8K questions: a scripted text of 300 words runs into the task's
256-token limit (the fake counts words) and holds no number (GSM8K's extraction finds none); a scripted failure is
an error instead of an answer. Every count and p-value below follows by hand from the script."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from runner.cache.generations import GenerationCache, decode_response, encode_response
from runner.contract.errors import ConfigError
from runner.contract.indicators import Generated, GenerationFacts, sample_indicators
from runner.contract.requests import GenerationRequest
from runner.job.flow import run
from runner.references import samples as reference_samples
from runner.stats.data.verdicts import INCONCLUSIVE
from runner.stats.numerics.indicators import mcnemar_more_often, paired_indicator
from tests.conftest import compose

N = 12
LONG = " ".join(["step"] * 300)  # past the 256-word limit, and no number in it
GSM = ["backend=fake", "task=gsm8k", f"task.num_samples={N}", "tracking=none", "cache=off",
       "backend.default_answer=The answer is 42."]


def test_mcnemar_one_sided_golden_numbers():
    # by hand: P(X >= 9 | Bin(10, 1/2)) = (C(10,9) + C(10,10)) / 2^10 = 11/1024
    assert mcnemar_more_often(9, 1) == pytest.approx(11 / 1024, rel=1e-12)
    assert mcnemar_more_often(1, 9) == pytest.approx(1 - 1 / 1024, rel=1e-12)  # P(X >= 1) = 1 - 2^-10
    assert mcnemar_more_often(3, 0) == pytest.approx(1 / 8)
    assert mcnemar_more_often(0, 0) == 1.0
    pairs = [(False, True)] * 9 + [(True, False)] + [(False, False)] * 5 + [(True, True)] * 2
    t = paired_indicator("hit_limit", pairs, 0.05)
    assert (t.n, t.run, t.reference, t.only_run, t.only_reference) == (17, 11, 3, 9, 1)
    assert t.more_often and not paired_indicator("hit_limit", pairs, 0.01).more_often  # 0.0107 between the two
    with pytest.raises(ValueError):
        mcnemar_more_often(-1, 2)


def test_beyond_the_replicates_excess_the_same_counts_say_less():
    """With an A/A excess the null is "the run's excess rate is at most that" (Tango/exact, the tolerance claim's
    test): 9 vs 1 of 12 is an excess of 8/12; an allowance of 1/12 still leaves it significant at 0.05, one at the
    observed excess itself cannot be (p >= 1/2 there, the statistic is 0), and p grows with the allowance."""
    pairs = [(False, True)] * 9 + [(True, False)] + [(False, False)] * 2
    at = [paired_indicator("hit_limit", pairs, 0.05, a).p_value for a in (0.0, 1 / 12, 4 / 12, 8 / 12)]
    assert at[0] == pytest.approx(11 / 1024) and at[1] <= 0.05 and at[3] >= 0.5
    assert at == sorted(at)
    assert paired_indicator("hit_limit", pairs, 0.05, 8 / 12).allowance == pytest.approx(8 / 12)


def test_a_replicate_keeps_its_indicator_counts():
    from runner.stats.data.noise import Replicate

    rep = Replicate("dtype=float32", 12, 3, 0.0, -1.0, 1.0, indicators={"hit_limit": (2, 1), "unparsed": (0, 0)})
    back = Replicate.from_dict(json.loads(json.dumps(rep.to_dict())))
    assert back.indicators == {"hit_limit": (2, 1), "unparsed": (0, 0)}
    assert Replicate.from_dict({k: v for k, v in rep.to_dict().items() if k != "indicators"}).indicators is None
    with pytest.raises(ValueError, match="indicators.hit_limit.more"):
        Replicate.from_dict(rep.to_dict() | {"indicators": {"hit_limit": {"more": "two", "fewer": 1}}})


def test_mcnemar_holds_alpha_under_the_null_by_enumeration():
    """Under H0 (both arms flag alike: each discordant pair is the run's with probability 1/2) the one-sided test
    rejects at most alpha of the time at every number of discordant pairs m: the exact rate, enumerated."""
    for m in range(1, 60):
        rate = sum(math.comb(m, b) for b in range(m + 1) if mcnemar_more_often(b, m - b) <= 0.05) / 2 ** m
        assert rate <= 0.05


def test_a_sample_indicators_from_its_facts_and_its_reading():
    cut = Generated("x", GenerationFacts(input_cut=True, hit_limit=False))
    assert sample_indicators([cut], False) == {"input_cut": True, "hit_limit": False, "unparsed": False,
                                               "failed": False}
    # a plain text says nothing of the cut or the limit; an empty one is unparsed whatever the task says
    assert sample_indicators(["  "], None) == {"input_cut": None, "hit_limit": None, "unparsed": True,
                                               "failed": False}
    assert sample_indicators([], None) is None  # a log-likelihood sample: nothing to say
    failed = Generated("", GenerationFacts(failed=True))
    assert sample_indicators([failed], None)["failed"] is True
    assert cut.with_text("y").facts == cut.facts and str(cut.with_text("y")) == "y"


def test_the_cache_keeps_a_texts_facts_and_never_a_failure(tmp_path):
    request = GenerationRequest("q", 4)
    facts = GenerationFacts(input_cut=False, hit_limit=True)
    back = decode_response(encode_response(Generated("a b c d", facts), "k"), "k")
    assert isinstance(back, Generated) and back == "a b c d" and back.facts == facts
    plain = decode_response(json.dumps({"value": "old row", "key": "k"}), "k")  # written before facts were kept
    assert plain == "old row" and not isinstance(plain, Generated)
    with pytest.raises(ValueError):
        decode_response(json.dumps({"value": "x", "key": "k", "facts": {"hit_limit": "yes"}}), "k")
    bound = GenerationCache(tmp_path / "c.sqlite").bind({"job": 1})
    failed = Generated("", GenerationFacts(failed=True))
    assert bound.resolve([request], lambda reqs: [failed], 8) == [failed]
    assert bound.store.count() == 0  # a rerun asks again
    assert bound.resolve([request], lambda reqs: [Generated("ok", facts)], 8)[0].facts == facts
    assert bound.store.count() == 1


@pytest.fixture(scope="module")
def prompts(tmp_path_factory) -> list[str]:
    """The 12 questions' prompts, in sample order (a run without a reference writes them to samples.jsonl)."""
    out = tmp_path_factory.mktemp("prompts")
    run(compose([*GSM, "reference.mode=skip", f"output_dir={out / 'skip'}"]))
    return [json.loads(line)["prompt"] for line in (out / "skip" / "samples.jsonl").read_text().splitlines()]


def _script(path: Path, rows: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def refs(tmp_path_factory, prompts) -> Path:
    """A reference whose last question ran into the token limit (and, with no number, is unparsed)."""
    root = tmp_path_factory.mktemp("refs")
    script = _script(root / "rec.jsonl", [{"prompt": prompts[-1], "text": LONG}])
    run(compose([*GSM, "reference.mode=record", f"reference.dir={root / 'refs'}", f"backend.script={script}",
                 f"output_dir={root / 'rec'}"]))
    return root / "refs"


def _check(tmp_path: Path, refs: Path, rows: list[dict], *args: str):
    script = _script(tmp_path / "run.jsonl", rows)
    out = tmp_path / "chk"
    outcome = run(compose([*GSM, f"reference.dir={refs}", f"backend.script={script}", f"output_dir={out}", *args]))
    return outcome, out


def test_a_run_that_hits_the_limit_more_often_is_inconclusive_with_the_counts(tmp_path, prompts, refs):
    # the run: the first 9 questions run into the limit, the last (the reference's) does not: b = 9, c = 1
    outcome, out = _check(tmp_path, refs, [{"prompt": p, "text": LONG} for p in prompts[:9]])
    d = outcome.decision
    assert d is not None and d.outcome == INCONCLUSIVE and outcome.exit_status == 4
    tests = {t.name: t for t in d.indicators.tests}
    for name in ("hit_limit", "unparsed"):
        t = tests[name]
        assert (t.n, t.run, t.reference, t.only_run, t.only_reference) == (N, 9, 1, 9, 1)
        assert t.p_value == pytest.approx(11 / 1024) and t.more_often
    assert tests["input_cut"].run == 0 and not tests["input_cut"].more_often
    # the verdict on the 2 questions neither arm cut (both answered "42." in both arms: nothing moved)
    assert d.indicators.clean is not None and d.indicators.clean.n == 2
    report = (out / "report.txt").read_text()
    assert "generation stopped at its token limit: run 9 of 12, reference 1 (run only 9, reference only 1), " \
           "McNemar one-sided p=0.0107" in report
    assert "on the 2 samples neither arm cut, stopped at the token limit or failed:" in report
    assert "INCONCLUSIVE (not like-for-like: generation stopped at its token limit in 9 vs 1 of 12" in report
    payload = json.loads((out / "report.json").read_text())
    assert payload["verdict"] == INCONCLUSIVE and payload["indicators"]["blocks"] is True
    assert payload["indicators"]["clean"]["n"] == 2
    results = json.loads((out / "results.json").read_text())
    assert results["runner"]["indicators"]["tests"][1]["only_run"] == 9
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert [r["meta"]["indicators"]["hit_limit"] for r in rows] == [True] * 9 + [False] * 3


def test_report_mode_shows_the_counts_and_keeps_the_verdict(tmp_path, prompts, refs):
    rows = [{"prompt": p, "text": LONG} for p in prompts[:9]]
    shown, _ = _check(tmp_path / "a", refs, rows, "stats.indicators=report")
    off, _ = _check(tmp_path / "b", refs, rows, "stats.indicators=off")
    assert shown.decision.indicators.tests and not shown.decision.indicators.blocks
    assert off.decision.indicators is None
    assert shown.decision.outcome == off.decision.outcome and shown.exit_status == off.exit_status


def test_a_run_that_hits_the_limit_no_more_often_keeps_its_verdict(tmp_path, prompts, refs):
    # 2 of the run's questions hit the limit, the reference's one among them: b = 1, c = 0, p = 1/2
    outcome, _ = _check(tmp_path, refs, [{"prompt": p, "text": LONG} for p in (prompts[0], prompts[-1])])
    t = {t.name: t for t in outcome.decision.indicators.tests}["hit_limit"]
    assert (t.only_run, t.only_reference, t.p_value) == (1, 0, 0.5)
    assert not outcome.decision.indicators.blocks and outcome.decision.indicators.clean is None


def test_failures_are_left_out_of_both_arms_up_to_the_cap(tmp_path, prompts, refs):
    failing = [{"prompt": prompts[0], "failed": True}]
    # 1 of 12 (8.3%) is over the default cap of 2%: INCONCLUSIVE, the counts named
    over, out = _check(tmp_path / "over", refs, failing)
    d = over.decision
    assert d.outcome == INCONCLUSIVE and d.indicators.over_cap and over.exit_status == 4
    f = d.indicators.failures
    assert (f.n, f.run, f.reference, f.excluded) == (N, 1, 0, 1)
    assert any("backend failures: 1 of 12 samples left out of both arms" in n for n in over.notes)
    assert len((out / "samples.jsonl").read_text().splitlines()) == N  # every answer kept on disk
    # under a cap of 10% the failed question is left out of both arms and the rest decides
    under, _ = _check(tmp_path / "under", refs, failing, "stats.max_failed_share=0.1")
    assert not under.decision.indicators.blocks and under.decision.n == N - 1
    assert under.decision.paired is not None and under.decision.paired.n == N - 1


def test_the_replicates_excess_is_allowed_for(tmp_path, prompts, refs):
    """The reference's A/A replicate saw the other numeric path cut 8 of 12 answers more (8 - 0): the run's 9 vs 1
    (an excess of 8 of 12) is no more than the system's own noise, so the verdict is the rule's own."""
    import shutil

    from runner.contract.spec import AccuracySpec
    from runner.references.noise import attach, noise_block
    from runner.stats.data.noise import Replicate

    copy = tmp_path / "refs"
    shutil.copytree(refs, copy)
    rep = Replicate("dtype=float32", N, 8, 0.0, 0.0, 0.0, indicators={"input_cut": (0, 0), "hit_limit": (8, 0),
                                                                      "unparsed": (8, 0)})
    attach(copy, "gsm8k", "HuggingFaceTB/SmolLM2-135M-Instruct", AccuracySpec(extra_acc_spec="fewshot_split=test"),
           noise_block("replicate", [rep]))
    outcome, out = _check(tmp_path, copy, [{"prompt": p, "text": LONG} for p in prompts[:9]])
    t = {t.name: t for t in outcome.decision.indicators.tests}["hit_limit"]
    assert t.allowance == pytest.approx(8 / 12) and not t.more_often and not outcome.decision.indicators.blocks
    assert "beyond the A/A excess 0.667: Tango/exact one-sided p=" in (out / "report.txt").read_text()


def test_a_recording_leaves_its_failures_out_and_refuses_too_many(tmp_path, prompts):
    from runner.contract.errors import EndpointError
    from runner.references.samples import load_rows

    script = _script(tmp_path / "rec.jsonl", [{"prompt": prompts[0], "failed": True}])
    common = [*GSM, f"reference.dir={tmp_path / 'refs'}", "reference.mode=record", f"backend.script={script}"]
    with pytest.raises(EndpointError, match="too many samples to record a reference"):
        run(compose([*common, f"output_dir={tmp_path / 'over'}"]))
    assert not (tmp_path / "refs" / "gsm8k.yaml").exists()
    assert len((tmp_path / "over" / "samples.jsonl").read_text().splitlines()) == N
    run(compose([*common, "stats.max_failed_share=0.1", f"output_dir={tmp_path / 'under'}"]))
    recorded = yaml.safe_load((tmp_path / "refs" / "gsm8k.yaml").read_text())
    entry = recorded["HuggingFaceTB/SmolLM2-135M-Instruct"][0]
    assert entry["recorded"]["num_samples"] == N - 1
    assert len(load_rows(tmp_path / "refs", entry["recorded"]["samples"])) == N - 1


def test_a_reference_recorded_without_indicators_leaves_its_arm_unknown(tmp_path, prompts, refs):
    """An older entry's rows carry no indicators: nothing is tested and the report says so, with the run's counts."""
    old = tmp_path / "old"
    old.mkdir()
    yaml_text = (refs / "gsm8k.yaml").read_text()
    recorded = yaml.safe_load(yaml_text)["HuggingFaceTB/SmolLM2-135M-Instruct"][0]["recorded"]
    rows = reference_samples.load_rows(refs, recorded["samples"])
    stored = [(sid, row.score, p) for (sid, row), p in zip(rows.items(), prompts)]
    relative, sha = reference_samples.store(old, "gsm8k", stored)  # the older layout: no indicators
    (old / "gsm8k.yaml").write_text(yaml_text.replace(recorded["samples"], relative)
                                    .replace(recorded["samples_sha256"], sha))
    outcome, out = _check(tmp_path, old, [{"prompt": p, "text": LONG} for p in prompts[:9]])
    checked = outcome.decision.indicators
    assert checked.tests == [] and not checked.reference_known and not checked.blocks
    assert checked.run_counts == {"input_cut": 0, "hit_limit": 9, "unparsed": 9}
    assert "indicators: the reference's are unknown" in (out / "report.txt").read_text()


def test_bad_settings_are_refused_before_any_model_loads():
    from omegaconf import OmegaConf

    from runner.stats.settings import validate

    stats = OmegaConf.to_object(compose(["stats.indicators=sometimes"]).stats)
    with pytest.raises(ConfigError, match="unknown indicator mode"):
        validate(stats)
    stats = OmegaConf.to_object(compose(["stats.max_failed_share=1.5"]).stats)
    with pytest.raises(ConfigError, match="largest share of failed samples"):
        validate(stats)


@pytest.mark.e2e
def test_the_embedded_model_cut_at_a_few_tokens_records_and_reports_it(tmp_path):
    """The real embedded model on 2 GSM8K questions with 4 new tokens: a worked solution cannot end in 4 tokens, so
    an answer that is not empty stops at the limit (on this host one of the two is empty: the model ends at once);
    the reference's rows keep that, and a rerun against them shows the same counts in both arms (b = c = 0: p = 1,
    the verdict is the rule's own)."""
    common = ["task=gsm8k", "task.num_samples=2", "task.max_output_len=4", "cache=off", "tracking=none",
              f"reference.dir={tmp_path / 'refs'}"]
    run(compose([*common, "reference.mode=record", f"output_dir={tmp_path / 'rec'}"]))
    rows = [json.loads(line) for line in (tmp_path / "rec" / "samples.jsonl").read_text().splitlines()]
    hits = [r["meta"]["indicators"]["hit_limit"] for r in rows]
    assert hits == [bool(r["prediction"].strip()) for r in rows] and any(hits)
    assert [r["meta"]["indicators"]["input_cut"] for r in rows] == [False, False]
    outcome = run(compose([*common, f"output_dir={tmp_path / 'chk'}"]))
    tests = {t.name: t for t in outcome.decision.indicators.tests}
    k = sum(hits)
    assert (tests["hit_limit"].run, tests["hit_limit"].reference, tests["hit_limit"].p_value) == (k, k, 1.0)
    assert not outcome.decision.indicators.blocks
    assert f"generation stopped at its token limit: run {k} of 2, reference {k}" in \
        (tmp_path / "chk" / "report.txt").read_text()


def test_the_settings_are_mlflow_params():
    """Every config field is logged as a run parameter (runner.job.flow: flatten of the resolved config)."""
    from omegaconf import OmegaConf

    from runner.tracking.provenance import flatten

    cfg = compose(["stats.max_failed_share=0.05", "output_dir=/tmp/unused"])
    params = flatten(OmegaConf.to_container(cfg, resolve=True))
    assert params["stats.indicators"] == "paired" and params["stats.max_failed_share"] == 0.05


def test_a_sequential_look_leaves_failures_out_as_the_final_decision_does(tmp_path):
    """Planned looks at 20 and 40 GSM8K questions; the reference answers all 40 right. The run answers right too,
    but the backend fails on 10 of look 1's questions. Counted as wrong answers those 10 would be a regression the
    first look stops on (McNemar b = 10, c = 0: Z = 10 / sqrt(10) = 3.16, past O'Brien-Fleming's first bound of
    2.54 at alpha 0.05 one-sided: the looks decided before the failures were left out, and this run stopped at
    n = 20); left out of both arms, as the final decision leaves them, look 1 sees no difference and the run goes
    on to its second look."""
    common = ["backend=fake", "task=gsm8k", "task.num_samples=40", "tracking=none", "cache=off",
              f"reference.dir={tmp_path / 'refs'}"]
    run(compose([*common, "reference.mode=skip", f"output_dir={tmp_path / 'skip'}"]))
    rows = [json.loads(line) for line in (tmp_path / "skip" / "samples.jsonl").read_text().splitlines()]
    right = [{"prompt": r["prompt"], "text": f"#### {r['target']}"} for r in rows]
    recorded = run(compose([*common, "reference.mode=record", f"backend.script={_script(tmp_path / 'rec.jsonl', right)}",
                            f"output_dir={tmp_path / 'rec'}"]))
    assert recorded.score == 100.0
    failing = [{"prompt": r["prompt"], "failed": True} for r in rows[:10]] + right[10:]
    outcome = run(compose([*common, "stats.sequential.enabled=true", "stats.sequential.looks=2",
                           "stats.max_failed_share=0.3", f"backend.script={_script(tmp_path / 'run.jsonl', failing)}",
                           f"output_dir={tmp_path / 'chk'}"]))
    d = outcome.decision
    assert [look.n for look in d.sequential.looks] == [20, 40]  # look 1 did not stop
    assert d.outcome != "NO-GO" and d.paired.discordant == (0, 0) and d.paired.n == 30
    assert d.indicators.failures.excluded == 10 and not d.indicators.over_cap


def test_the_dispatcher_decides_the_indicators_from_data_alone():
    """``dispatch.indicator_check`` on hand-made data, no job: 9 vs 1 of 12 at the limit (p = 11/1024 by hand) blocks
    and asks for the clean samples' decision once; a reference arm that does not pair (a pairing problem) is unknown
    and tests nothing; ``off`` without failures checks nothing; failures alone are carried and judged by their cap."""
    from runner.stats.data.indicators import CleanSubset, Failures, IndicatorData
    from runner.stats.dispatch import indicator_check

    def marks(hit: bool) -> dict:
        return {"input_cut": False, "hit_limit": hit, "unparsed": False}

    run_marks = {f"s{i}": marks(i < 9) for i in range(N)}
    ref_marks = {f"s{i}": marks(i == N - 1) for i in range(N)}
    clean = CleanSubset(frozenset({"s9", "s10"}), 50.0, None)
    asked: list[CleanSubset] = []

    class Clean:  # the decision on the clean samples, as the dispatcher would return it
        outcome = "GO"

        @staticmethod
        def verdict_line() -> str:
            return "GO (by hand)"

    def on_clean(subset: CleanSubset):
        asked.append(subset)
        return Clean()

    data = IndicatorData("paired", run_marks, ref_marks, {}, None, clean)
    found = indicator_check(0.05, data, None, on_clean)
    t = {t.name: t for t in found.tests}["hit_limit"]
    assert (t.only_run, t.only_reference, t.p_value) == (9, 1, pytest.approx(11 / 1024)) and found.blocks
    assert asked == [clean] and (found.clean.n, found.clean.outcome, found.clean.line) == (2, "GO", "GO (by hand)")
    unpaired = indicator_check(0.05, data, "another seed", on_clean)
    assert unpaired.tests == [] and not unpaired.reference_known and not unpaired.blocks and len(asked) == 1
    assert indicator_check(0.05, IndicatorData("off", run_marks, ref_marks), None, on_clean) is None
    failures = Failures(N, 1, 0, 1, 0.02)
    only = indicator_check(0.05, IndicatorData("off", run_marks, ref_marks, failures=failures), None, on_clean)
    assert only.tests == [] and only.over_cap and only.blocks and len(asked) == 1
