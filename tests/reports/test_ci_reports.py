"""The reports CI systems read (issue 31): a sweep's JUnit XML is one suite named after the sweep, each case
named ``task`` in class ``model/quant`` (no timestamp, so Jenkins keeps its history), with its real evaluation
time and the job's verdict block as the failure body; the markdown folds every verdict block and writes small
p-values in scientific notation. The XML is read back the way CI systems read it: with ``junitparser`` when it
is installed, and always against the facts of the JUnit XSD that Jenkins and GitLab accept."""

from __future__ import annotations

import json
from types import SimpleNamespace
from xml.etree import ElementTree as ET

from omegaconf import OmegaConf

from runner.reports.cases import Case, fmt_p
from runner.reports.ci import publish_sweep
from runner.reports.markdown import markdown
from runner.sweep import summary as sweep_summary
from tests.sweep.test_sweep import fake_job

BLOCK = "=" * 72 + "\nmmlu | org/m | quant_algo=FP8\nverdict:     NO-GO (a drop > 0 is shown)\n" + "=" * 72


def _sweep(tmp_path):
    fake_job(tmp_path, 0, "none", p=0.5)
    fake_job(tmp_path, 1, "fp8", p=1.2e-22, passed=False)
    fake_job(tmp_path, 2, "int8", error="ModelError: model path does not exist")
    for num, quant, seconds in ((0, "none", 12.5), (1, "fp8", 31.25)):
        job = tmp_path / f"{num}-smollm2_135m-{quant}-mmlu"
        (job / "report.txt").write_text(BLOCK.replace("FP8", quant.upper()) + "\n")
        report = json.loads((job / "report.json").read_text()) | {"eval_time_s": seconds}
        (job / "report.json").write_text(json.dumps(report))
        config = OmegaConf.load(job / ".hydra" / "config.yaml")
        config.model.name = "smollm2_135m"
        (job / ".hydra" / "config.yaml").write_text(OmegaConf.to_yaml(config))
    config = SimpleNamespace(report=SimpleNamespace(junit=str(tmp_path / "junit.xml"), markdown=str(tmp_path / "s.md")),
                             sweep=SimpleNamespace(name="nightly"))
    publish_sweep(config, sweep_summary.build(tmp_path, "holm", None))
    return tmp_path / "junit.xml", (tmp_path / "s.md").read_text()


def test_the_sweeps_junit_meets_the_schema_and_carries_verdicts_and_times(tmp_path):
    junit, md = _sweep(tmp_path)
    root = ET.parse(junit).getroot()
    # the JUnit XSD (Ant's, as Jenkins and GitLab read it): testsuites > testsuite(name, tests, failures, errors,
    # time) > testcase(name, classname, time as a decimal) > failure/error(message, type; the body is text)
    assert root.tag == "testsuites" and [s.tag for s in root] == ["testsuite"]  # one suite per sweep
    suite = root[0]
    assert suite.get("name") == "runner sweep nightly" and tmp_path.name not in ET.tostring(root, encoding="unicode")
    assert "runner sweep nightly" in md and tmp_path.name not in md.splitlines()[0]  # the markdown heading: sweep.name
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    assert float(suite.get("time")) == 43.75
    cases = {c.get("classname"): c for c in suite}
    assert sorted(cases) == ["org/m/int8", "smollm2_135m/fp8", "smollm2_135m/none"]
    for case in suite:
        assert case.tag == "testcase" and case.get("name") == "mmlu" and float(case.get("time")) >= 0
        assert {child.tag for child in case} <= {"failure", "error", "skipped", "system-out", "system-err", "properties"}
    assert (cases["smollm2_135m/none"].get("time"), cases["smollm2_135m/fp8"].get("time")) == ("12.50", "31.25")
    failure = cases["smollm2_135m/fp8"].find("failure")
    assert failure.get("type") == "no-go" and "p 1.2e-22" in failure.get("message")
    assert "verdict:     NO-GO (a drop > 0 is shown)" in failure.text  # the verdict block is the failure's body
    assert "model path does not exist" in cases["org/m/int8"].find("error").text
    assert "quant_algo=NONE" in cases["smollm2_135m/none"].find("system-out").text  # a pass keeps its block too

    try:
        from junitparser import Error, Failure, JUnitXml
    except ImportError:
        return  # not installed here: the XSD facts above stand for it
    parsed = {(c.classname, c.name): c for suite in JUnitXml.fromfile(str(junit)) for c in suite}
    assert isinstance(parsed[("smollm2_135m/fp8", "mmlu")].result[0], Failure)
    assert isinstance(parsed[("org/m/int8", "mmlu")].result[0], Error)
    assert parsed[("smollm2_135m/fp8", "mmlu")].time == 31.25


def test_the_markdown_folds_each_verdict_block_and_writes_small_p_values_in_scientific_notation(tmp_path):
    _, text = _sweep(tmp_path)
    assert "| smollm2_135m/fp8/mmlu | no-go | ❌ no-go |" in text and "| 1.2e-22 |" in text and "0.0000" not in text
    assert text.count("<details><summary>") == 3 and text.count("</details>") == 3
    assert "verdict:     NO-GO (a drop > 0 is shown)" in text
    # a message is text, not markup, inside the summary line
    page = markdown([Case("mmlu", "no-go", "score <b>1</b> & more", "block", classname="m/q")], "t", "NO-GO")
    assert "<summary>❌ m/q/mmlu: score &lt;b&gt;1&lt;/b&gt; &amp; more</summary>" in page


def test_p_values_keep_four_decimals_until_they_are_small():
    assert [fmt_p(p) for p in (0.5, 0.0123, 0.001, 0.00099, 1.2e-22, 0.0, None)] == \
        ["0.5000", "0.0123", "0.0010", "9.9e-04", "1.2e-22", "0.0000", "-"]
