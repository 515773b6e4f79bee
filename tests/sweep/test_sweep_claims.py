"""Which claims a sweep corrects, and one answer per job on every surface.

The sweep's GO (every job GO) is an intersection-union test: no correction on the GO claims by default,
Holm (or BH) kept on the NO-GO claims; ``sweep.go_correction=holm`` for sweeps that pick among alternatives.
Each job's own verdict and its verdict within the sweep are both shown, labelled, in the console, the
summary files, MLflow (child tags), JUnit and markdown; a verdict the correction changed carries advice.
The sweep agrees with the release gate (``gate=...``) on the same evidence."""

from __future__ import annotations

import json
import random
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from omegaconf import OmegaConf

from runner.reports.ci import publish_sweep
from runner.stats.data.verdicts import WORDS, combine
from runner.sweep import summary as sweep_summary
from runner.sweep.policy import GateConfig, GateTask
from tests.sweep.test_sweep import RecordingClient, fake_job


def claims(p_regression: float, p_go: float, alpha: float = 0.05) -> dict:
    """report.json's ``decision`` of a job decided by the paired test, with both claims' p-values."""
    regression, within = p_regression < alpha, p_go < alpha
    verdict = combine(regression, within, "regression")
    tests = [{"name": "accuracy", "rule": "paired", "gate": "regression", "p_value": p_regression, "alpha": alpha,
              "passed": not regression},
             {"name": "accuracy", "rule": "paired", "gate": "noninferiority", "p_value": p_go, "alpha": alpha,
              "passed": within}]
    shown = p_go if verdict == "GO" else p_regression
    return {"rule": "paired", "passed": verdict != "NO-GO", "accuracy_passed": verdict != "NO-GO",
            "verdict": verdict, "claim": verdict if verdict != "INCONCLUSIVE" else None, "reference": 51.75,
            "difference": -0.5, "ci_low": -2.0, "ci_high": 1.0, "threshold": None, "theta": 3.6, "alpha": alpha,
            "p_value": shown, "n": 570, "tests": tests}


def six_go(sweep: Path, p_go: float = 0.013) -> None:
    for num in range(6):
        fake_job(sweep, num, f"q{num}", decided=claims(0.9, p_go))


def test_six_identical_go_jobs_are_a_go_sweep_without_correction(tmp_path):
    """The issue's case: six jobs each GO at p 0.013 (alpha 0.05). Holm on GO made them six INCONCLUSIVE rows;
    the sweep's GO is an intersection-union test, so each GO stands unadjusted and the sweep is GO."""
    six_go(tmp_path)
    summary = sweep_summary.build(tmp_path, "holm", None)
    assert [r["verdict"] for r in summary.rows] == ["go"] * 6
    assert [r["sweep_verdict"] for r in summary.rows] == ["go"] * 6
    assert [r["p_adjusted"] for r in summary.rows] == pytest.approx([0.013] * 6)  # the GO claim, unadjusted
    assert summary.verdict == "GO" and summary.exit_status == 0
    assert "GO when every job is GO, each unadjusted (an intersection-union test)" in summary.render()


def test_go_correction_holm_is_the_opt_in_for_picking_among_alternatives_and_says_how_to_decide(tmp_path):
    six_go(tmp_path)
    picked = sweep_summary.build(tmp_path, "holm", None, go_correction="holm")
    assert [r["p_adjusted"] for r in picked.rows] == pytest.approx([6 * 0.013] * 6)  # 0.078 >= 0.05
    assert [r["sweep_verdict"] for r in picked.rows] == ["inconclusive"] * 6
    assert picked.verdict == "INCONCLUSIVE" and picked.exit_status == 4
    advice = picked.rows[0]["advice"]
    assert advice.startswith("GO alone, INCONCLUSIVE in the sweep") and "Holm across the sweep's 6 GO claims" in advice
    assert "p 0.0130, Holm-adjusted 0.0780, not below alpha 0.05" in advice
    assert "sweep.go_correction=none" in advice and "add samples" in advice
    text = picked.render()
    assert f"  {picked.rows[0]['job']}: GO alone, INCONCLUSIVE in the sweep" in text  # printed under the table
    assert "GO claims Holm-adjusted (sweep.go_correction" in text


def test_a_no_go_undone_by_holm_carries_advice(tmp_path):
    """Two jobs regress at p 0.03 and 0.04 among four: Holm lifts them to 0.12 and 0.12; the INCONCLUSIVE it
    makes says so, and how to decide."""
    for num, p in enumerate((0.03, 0.04, 0.6, 0.7)):
        fake_job(tmp_path, num, f"q{num}", decided=claims(p, 0.5 if p < 0.05 else 0.01))
    summary = sweep_summary.build(tmp_path, "holm", None)
    assert [r["verdict"] for r in summary.rows] == ["no-go", "no-go", "go", "go"]
    assert [r["sweep_verdict"] for r in summary.rows] == ["inconclusive", "inconclusive", "go", "go"]
    advice = summary.rows[0]["advice"]
    assert advice.startswith("NO-GO alone, INCONCLUSIVE in the sweep") and "Holm across the sweep's 4 NO-GO" in advice
    assert "sweep.correction=none" in advice and "add samples to this job" in advice
    assert summary.rows[2]["advice"] is None  # an unchanged verdict needs none


def test_both_verdicts_labelled_on_every_surface(tmp_path, monkeypatch):
    for num, p in enumerate((0.03, 0.6)):
        fake_job(tmp_path, num, f"q{num}", decided=claims(p, 0.5 if p < 0.05 else 0.01))
    summary = sweep_summary.build(tmp_path, "holm", None)
    assert [(r["verdict"], r["sweep_verdict"]) for r in summary.rows] == [("no-go", "inconclusive"), ("go", "go")]
    # console: two labelled columns and a legend that says what each is
    text = summary.render()
    header = next(line for line in text.splitlines() if line.startswith("job "))
    assert header.rstrip().endswith("job verdict  sweep verdict")
    assert "job verdict: the job's own, at its\ntask's alpha" in text and "sweep verdict: the job's within the sweep" in text
    assert any(line.startswith("0-smollm2_135m-q0-mmlu") and line.rstrip().endswith("no-go        inconclusive")
               for line in text.splitlines())
    # summary.csv / .json / .html
    header = (tmp_path / "summary.csv").read_text().splitlines()[0].split(",")
    assert {"verdict", "sweep_verdict", "advice"} <= set(header)
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert set(saved["verdict_columns"]) == {"verdict", "sweep_verdict"} and saved["go_correction"] == "none"
    html = (tmp_path / "summary.html").read_text()
    assert "<th class='l'>job verdict</th><th class='l'>sweep verdict</th>" in html and "NO-GO alone" in html
    # MLflow: each child gets its sweep verdict beside its own tag `verdict`, the parent's note both columns
    client = RecordingChildren()
    summary.log_to(client, "parent")
    assert client.by_run["run0"]["sweep_verdict"] == "inconclusive" and "NO-GO alone" in client.by_run["run0"]["sweep_advice"]
    assert client.by_run["run1"]["sweep_verdict"] == "go" and "sweep_advice" not in client.by_run["run1"]
    assert "| job verdict | sweep verdict |" in client.by_run["parent"]["mlflow.note.content"]
    # JUnit and markdown: the case counts the sweep verdict and names both
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    config = OmegaConf.create({"report": {"junit": str(tmp_path / "j.xml"), "markdown": str(tmp_path / "s.md")},
                               "sweep": {"name": None}})
    publish_sweep(config, summary)
    case = ET.parse(tmp_path / "j.xml").getroot().find("testsuite/testcase")
    props = {p.get("name"): p.get("value") for p in case.findall("properties/property")}
    assert props == {"job_verdict": "no-go", "sweep_verdict": "inconclusive"}
    assert case.find("failure").get("message").startswith("job verdict no-go, sweep verdict inconclusive")
    md = (tmp_path / "s.md").read_text()
    assert "| job | job verdict | sweep verdict |" in md and "| no-go | ❔ inconclusive |" in md


class RecordingChildren(RecordingClient):
    """RecordingClient that keeps each run's tags apart."""

    def __init__(self) -> None:
        super().__init__()
        self.by_run: dict[str, dict[str, str]] = {}

    def set_tag(self, run_id: str, key: str, value: str) -> None:
        self.by_run.setdefault(run_id, {})[key] = value


def test_the_sweep_and_the_release_gate_agree_on_the_same_evidence(tmp_path, monkeypatch):
    """One configuration, every task critical: the release's verdict (IUT on GO, Holm on NO-GO) and the sweep's
    are the same on random evidence."""
    monkeypatch.setattr(sweep_summary, "plot", lambda rows, path: path.write_bytes(b""))  # the verdicts, not the figure
    tasks = ["mmlu", "arc_easy", "perplexity", "gsm8k"]
    gate = OmegaConf.structured(GateConfig(name="all", tasks={t: GateTask(tier="critical") for t in tasks}))
    rng = random.Random(51)
    for trial in range(40):
        sweep = tmp_path / str(trial)
        for num, task in enumerate(tasks):
            fake_job(sweep, num, "w8a16", task=task,
                     decided=claims(rng.choice([0.001, 0.02, 0.04, 0.3, 0.9]), rng.choice([0.001, 0.02, 0.3, 0.9])))
        summary = sweep_summary.build(sweep, "holm", None, policy=gate)
        assert summary.releases[0].release.verdict == summary.verdict, trial
        assert [t.verdict for t in summary.releases[0].release.tasks] == [r["sweep_verdict"] for r in summary.rows]


def test_go_correction_defaults_to_none():
    from tests.conftest import compose

    assert compose([]).sweep.go_correction == "none"


def test_words_cover_the_combined_verdicts():
    assert {WORDS[combine(a, b, "regression")] for a in (True, False) for b in (True, False)} == {
        "go", "no-go", "inconclusive"}


def test_the_sweeps_go_holds_alpha_unadjusted_by_simulation():
    """benchmarks/sweep_go_simulation.py at 3000 draws through the sweep's judge: the intersection-union test's
    worst case (every job at its tolerance, perfectly correlated) is exactly alpha, one job at tolerance among
    five identical stays below it; a per-job GO list used to pick is not controlled unless Holm-adjusted."""
    import importlib.util

    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location("sweep_go_simulation", ROOT / "benchmarks" / "sweep_go_simulation.py")
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    se, tol, reps = sim.TOLERANCE / 2.5, sim.TOLERANCE, 3000
    worst = sim.rates([tol] * 6, 1.0, se, reps, "none")
    assert abs(worst["sweep_go"] - 0.05) < 4 * worst["sweep_go_se"]
    one = sim.rates([tol] + [0.0] * 5, 0.5, se, reps, "none", seed=1)
    assert one["sweep_go"] < 0.05 + 3 * one["sweep_go_se"]
    pick = sim.rates([tol] * 6, 0.0, se, reps, "none", seed=2)
    picked = sim.rates([tol] * 6, 0.0, se, reps, "holm", seed=2)
    assert pick["any_false_go"] > 0.2  # 1 - 0.95^6 = 0.265: six chances of a false GO
    assert picked["any_false_go"] < 0.05 + 3 * picked["any_false_go_se"]
