"""Reports for machines and people: lm-eval-shaped results.json, JUnit XML, markdown (and GitHub's
job summary), and the sweep's styled HTML report."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from xml.etree import ElementTree as ET

from runner.reports.lm_eval import stderr
from runner.reports.ci import publish_sweep
from runner.sweep import summary as sweep_summary
from tests.conftest import ROOT, run_in_process
from tests.sweep.test_sweep import fake_job

GSM8K = ["backend=fake", "task=gsm8k", "task.dataset.source=local",
         f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "task.num_samples=4"]


def test_stderr_is_the_standard_error_of_the_mean():
    # by hand: mean 50, sample variance (4 * 50^2) / 3, divided by n = 4
    assert math.isclose(stderr([0, 100, 100, 0]), math.sqrt(10000 / 3 / 4))
    assert stderr([7.0]) is None


def test_a_job_writes_results_json_junit_and_the_step_summary(tmp_path, monkeypatch):
    """The job's glue in this process (tests.conftest.run_in_process): it writes the reports, not the CLI around it."""
    junit, step, out = tmp_path / "ci" / "junit.xml", tmp_path / "step.md", tmp_path / "job"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    proc = run_in_process([*GSM8K, "tracking=none", "reference.mode=skip", f"report.junit={junit}",
                           f"report.markdown={tmp_path / 'summary.md'}", f"output_dir={out}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    figures = results["results"]["gsm8k"]
    assert set(figures) >= {"alias", "accuracy,none", "accuracy_stderr,none", "exact_match_strict,none"}
    assert results["n-shot"] == {"gsm8k": 5} and results["n-samples"]["gsm8k"] == {"original": 4, "effective": 4}
    assert results["higher_is_better"] == {"gsm8k": {"accuracy": True}}
    assert results["model_name"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and results["config"]["model"] == "fake"

    suite = ET.parse(junit).getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert suite.get("tests") == "1" and len(cases) == 1
    assert (cases[0].get("classname"), cases[0].get("name")) == ("smollm2_135m/none", "gsm8k")  # no timestamp in it
    assert cases[0].find("skipped") is not None  # no verdict asked: neither a pass nor a failure
    report = json.loads((out / "report.json").read_text())
    assert float(cases[0].get("time")) == round(report["eval_time_s"], 2)  # the job's own time, not 0.00
    assert "| smollm2_135m/none/gsm8k |" in step.read_text()
    assert step.read_text() == (tmp_path / "summary.md").read_text() + "\n"


def test_a_failed_job_is_an_errored_test_case(tmp_path):
    junit = tmp_path / "junit.xml"
    proc = run_in_process([*GSM8K, "tracking=none", "reference.mode=skip", "task.max_output_len=0",
                           f"report.junit={junit}", f"output_dir={tmp_path / 'job'}"], tmp_path)
    assert proc.returncode == 1
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and "task.max_output_len" in error.text


def test_a_sweep_is_one_test_case_per_job_with_its_sweep_verdict(tmp_path, monkeypatch):
    fake_job(tmp_path, 0, "none", p=0.5)
    fake_job(tmp_path, 1, "fp8", p=0.001, passed=False)
    fake_job(tmp_path, 2, "int8", error="ModelError: model path does not exist")
    summary = sweep_summary.build(tmp_path, "holm", None)
    step = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    config = SimpleNamespace(report=SimpleNamespace(junit=str(tmp_path / "junit.xml"), markdown=None))
    written = publish_sweep(config, summary)
    assert written == [tmp_path / "junit.xml", step]

    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    assert suite.get("name") == "runner sweep" and tmp_path.name not in suite.get("name")
    by_name = {c.get("classname"): c for c in suite.findall("testcase")}
    assert sorted(by_name) == ["org/m/fp8", "org/m/int8", "org/m/none"]  # model/quant: stable from sweep to sweep
    assert {c.get("name") for c in suite.findall("testcase")} == {"mmlu"}
    assert by_name["org/m/none"].find("failure") is None and by_name["org/m/none"].find("error") is None
    assert by_name["org/m/fp8"].find("failure").get("message").startswith("unpaired")
    assert "model path does not exist" in by_name["org/m/int8"].find("error").get("message")
    text = step.read_text()
    assert "### runner sweep" in text and "❌ no-go" in text and "💥 failed" in text

    page = (tmp_path / "summary.html").read_text()
    assert "class='banner'" in page and ">FAILED</span>" in page and "data:image/png;base64," in page
    assert page.count("class='pill'") == 6 and "#cf222e'>no-go" in page  # each job: its verdict, and the sweep's


def test_inconclusive_is_a_failed_case_unless_mapped_to_a_pass():
    from runner.reports.cases import Case
    from runner.reports.junit import junit_xml
    from runner.stats.data.verdicts import inconclusive_fails

    def case(fails: bool) -> Case:
        return Case("w4a16-mmlu", "inconclusive", "INCONCLUSIVE; about 231 more samples", "verdict block", 21.0,
                    inconclusive_fails=fails)

    assert inconclusive_fails("three_way", "inconclusive") and inconclusive_fails("three_way", "fail")
    assert not inconclusive_fails("three_way", "pass") and not inconclusive_fails("two_way", "inconclusive")
    failing = ET.fromstring(junit_xml([case(True)], "s")).find("testsuite")
    assert failing.get("failures") == "1" and failing.find("testcase/failure").get("type") == "inconclusive"
    passing = ET.fromstring(junit_xml([case(False)], "s")).find("testsuite")
    assert passing.get("failures") == "0" and passing.find("testcase/failure") is None
    assert passing.find("testcase/system-out").text == "verdict block"
