"""A sweep under a release policy: the summary's rows read by tier into one release verdict per configuration,
its exit status, its JUnit suite, markdown and parent-run tags; and one sweep end to end on the scripted fake
backend with a real MLflow server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from omegaconf import OmegaConf

from runner.reports.ci import publish_sweep
from runner.sweep import summary as sweep_summary
from runner.sweep.policy import GateConfig, GateTask
from tests.conftest import run_cli
from tests.sweep.test_sweep import RecordingClient, children, decision, fake_job


def policy(k: int = 0, unlisted: str = "error") -> GateConfig:
    return GateConfig(name="rel", max_supporting_failures=k, unlisted=unlisted, tasks={
        "mmlu": GateTask(tier="critical"), "perplexity": GateTask(tier="supporting"), "arc_easy": GateTask(tier="advisory")})


def build(sweep: Path, gate: GateConfig, **kwargs) -> sweep_summary.Summary:
    return sweep_summary.build(sweep, "holm", None, policy=OmegaConf.structured(gate), **kwargs)


def test_a_supporting_no_go_blocks_the_release_and_the_reports_say_which_task(tmp_path, monkeypatch):
    fake_job(tmp_path, 0, "fp8", task="mmlu", p=0.6)  # GO (its tolerance claim is shown)
    fake_job(tmp_path, 1, "fp8", task="perplexity", decided=decision(0.001, False, alpha=0.01))  # NO-GO
    fake_job(tmp_path, 2, "fp8", task="arc_easy", error="DataError: no copy of ARC-Easy")  # advisory: reported only
    summary = build(tmp_path, policy())
    assert summary.verdict == "FAILED"  # the sweep's own view: a job failed...
    assert summary.exit_status == 3  # ...but the release decides: the supporting NO-GO (K = 0) blocks it
    text = summary.render()
    assert "release rel verdict: NO-GO -> exit 3" in text
    assert "reason: 1 supporting task is NO-GO (perplexity), more than the 0 the policy allows" in text
    assert "the release verdict below decides the exit status" in text
    assert "<b>release rel</b>" in (tmp_path / "summary.html").read_text()
    saved = json.loads((tmp_path / "summary.json").read_text())["release"][0]
    assert (saved["verdict"], saved["exit_status"]) == ("NO-GO", 3)
    assert [(t["name"], t["tier"], t["verdict"], t["blocking"]) for t in saved["tasks"]] == [
        ("mmlu", "critical", "go", False), ("perplexity", "supporting", "no-go", True),
        ("arc_easy", "advisory", "failed", False)]

    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "step.md"))
    config = OmegaConf.create({"report": {"junit": str(tmp_path / "j.xml"), "markdown": None}})
    publish_sweep(config, summary)
    suites = ET.parse(tmp_path / "j.xml").getroot().findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures"), s.get("errors")) for s in suites] == [
        ("release rel", "3", "1", "0")]
    cases = {c.get("name"): c for c in suites[0].findall("testcase")}
    assert list(cases) == ["[critical] mmlu", "[supporting] perplexity", "[advisory] arc_easy"]
    assert cases["[supporting] perplexity"].find("failure").get("type") == "no-go"
    assert cases["[advisory] arc_easy"].find("error") is None  # a failed advisory job does not error the release
    assert cases["[critical] mmlu"].find("properties/property[@name='tier']").get("value") == "critical"
    step = (tmp_path / "step.md").read_text()
    assert "### release rel: NO-GO" in step and "| [supporting] perplexity | supporting | ❌ no-go | yes |" in step

    client = RecordingClient()
    summary.log_to(client, "parent")
    assert client.tags["release.verdict"] == "NO-GO" and client.tags["verdict"] == "no-go"
    assert client.tags["release.task.perplexity"] == "supporting: no-go" and client.tags["release.policy"] == "rel"
    assert client.metrics["release_exit_status"] == 3 and client.metrics["release_verdict"] == 1


def test_failed_critical_missing_and_unlisted_tasks_fail_the_release(tmp_path):
    fake_job(tmp_path / "a", 0, "fp8", task="mmlu", error="ModelError: no checkpoint")
    fake_job(tmp_path / "a", 1, "fp8", task="perplexity", p=0.6)
    failed = build(tmp_path / "a", policy())
    assert failed.exit_status == 1 and failed.releases[0].release.reason.startswith("critical task mmlu failed")

    fake_job(tmp_path / "b", 0, "fp8", task="perplexity", p=0.6)  # the critical task never ran
    missing = build(tmp_path / "b", policy())
    assert missing.exit_status == 1
    assert missing.releases[0].release.reason == "critical task mmlu failed: did not run in this sweep"

    fake_job(tmp_path / "c", 0, "fp8", task="mmlu", p=0.6)
    fake_job(tmp_path / "c", 1, "fp8", task="perplexity", p=0.6)
    fake_job(tmp_path / "c", 2, "fp8", task="gsm8k", p=0.6)
    assert build(tmp_path / "c", policy()).exit_status == 1  # gsm8k is not in the policy
    advisory = build(tmp_path / "c", policy(unlisted="advisory"))
    assert advisory.exit_status == 0 and advisory.releases[0].release.tasks[2].note == "not in the policy: reported only"
    stopped = build(tmp_path / "c", policy(unlisted="advisory"), stopped="TerminatedWorkerError: killed")
    assert stopped.exit_status == 1 and "the sweep stopped early" in stopped.releases[0].release.reason


def test_one_release_per_configuration_and_the_worst_decides(tmp_path):
    for num, (quant, task, p) in enumerate([("fp8", "mmlu", 0.6), ("fp8", "perplexity", 0.6),
                                            ("w4a16", "mmlu", 0.0001), ("w4a16", "perplexity", 0.6)]):
        fake_job(tmp_path, num, quant, task=task, p=p, passed=p > 0.05)
    for num, overrides in enumerate([["quant=fp8", "task=mmlu"], ["quant=fp8", "task=perplexity"],
                                     ["quant=w4a16", "task=mmlu"], ["quant=w4a16", "task=perplexity"]]):
        job = next(tmp_path.glob(f"{num}-*"))
        (job / ".hydra" / "overrides.yaml").write_text(OmegaConf.to_yaml(overrides))
    summary = build(tmp_path, policy())
    assert [(r.title, r.release.verdict) for r in summary.releases] == [("release rel [quant=fp8]", "GO"),
                                                                          ("release rel [quant=w4a16]", "NO-GO")]
    assert summary.exit_status == 3


@pytest.mark.e2e
def test_a_release_sweep_on_the_fake_backend(tmp_path, mlflow_server):
    # The fake backend answers MMLU 0-shot with 21.05% (12 of 57) and perplexity 1.0078 (37 documents).
    # Against a reference of 90% MMLU is NO-GO at any correction (unpaired: drop 69 against a threshold of
    # 90 - 1.645 x 9.37 = 74.6); perplexity equals its reference: INCONCLUSIVE, which does not block a
    # supporting task. The critical NO-GO decides: exit 3.
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "mmlu.yaml").write_text("HuggingFaceTB/SmolLM2-135M-Instruct:\n"
                                    "  - extra_acc_spec: scoring=loglikelihood,num_fewshot=0,dataset=packaged\n"
                                    "    accuracy: 90.0\n")
    (refs / "perplexity.yaml").write_text("HuggingFaceTB/SmolLM2-135M-Instruct:\n"
                                          "  - extra_acc_spec: corpus=pydoc_topics-32e8236b,min_tokens=256,max_input_len=512\n"
                                          "    perplexity: 1.0078\n")
    proc = run_cli(["-m", "backend=fake", "gate=embedded_release", "task=mmlu_0shot,perplexity", f"reference.dir={refs}",
                    f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=release-gate",
                    f"report.junit={tmp_path / 'release.xml'}", f"hydra.sweep.dir={tmp_path / 'sweep'}"], tmp_path)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "release embedded_release verdict: NO-GO -> exit 3" in proc.stdout
    assert "reason: critical task mmlu is NO-GO" in proc.stdout
    suite = ET.parse(tmp_path / "release.xml").getroot().find("testsuite")
    assert suite.get("name") == "release embedded_release" and suite.get("failures") == "1"
    assert [c.get("name") for c in suite.findall("testcase")] == ["[critical] mmlu", "[supporting] perplexity"]
    client, parent, kids = children(mlflow_server, "release-gate")
    assert parent.data.tags["release.verdict"] == "NO-GO" and parent.data.tags["release.task.mmlu"] == "critical: no-go"
    assert parent.data.metrics["release_exit_status"] == 3
    # each job logged the policy's entry for its task with its params: the tolerance it was judged with
    params = {k.data.params["task.name"]: k.data.params for k in kids}
    assert params["mmlu"]["stats.tolerance"] == "10.0" and params["perplexity"]["stats.tolerance_unit"] == "percent"
    assert params["mmlu"]["gate.tasks.mmlu.tier"] == "critical"


@pytest.mark.parametrize(("signum", "status"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_that_stops_a_gated_sweep_is_named_with_the_status_the_process_exits_with(tmp_path, signum, status):
    from runner.contract.errors import Terminated
    from runner.sweep.callback import describe_stop, signal_status, stop_message

    fake_job(tmp_path, 0, "fp8", task="mmlu", p=0.6)
    stop = Terminated(f"stopped by {signum}", status)
    summary = build(tmp_path, policy(unlisted="advisory"), stopped=describe_stop(stop), stop_status=signal_status(stop))
    text = summary.render()
    assert summary.exit_status == status and f"-> exit {status}" in text and not re.search(r"exit 1\b", text)
    assert f"sweep stopped early: stopped by {signum}" in text and "Ctrl-C" not in text
    assert summary.releases[0].exit_status == status
    assert json.loads((tmp_path / "summary.json").read_text())["release"][0]["exit_status"] == status
    config = OmegaConf.create({"hydra": {"launcher": {"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"}}})
    assert f"stopped by {signum}" in stop_message(stop, config)
    assert signal_status(KeyboardInterrupt()) == 130 and signal_status(RuntimeError("x")) is None
