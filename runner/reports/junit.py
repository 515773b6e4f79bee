"""JUnit XML, one test case per job: CI systems (GitLab, Jenkins, GitHub test reporters) show a NO-GO
as a failed test (type ``no-go``) with the verdict block, an INCONCLUSIVE as a failed test too (type
``inconclusive``: nothing was shown, which is not a pass) unless ``stats.verdicts=two_way`` or
``stats.on_inconclusive=pass`` makes it one, and an error as an errored test. Every name and message is
written with its control characters escaped and its URL secrets redacted."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence
from xml.etree import ElementTree as ET

from runner.contract.printable import printable
from runner.contract.secrets import redact_text
from runner.files.paths import write_atomic
from runner.reports.cases import Case


def junit_xml(cases: Sequence[Case], suite: str) -> str:
    return junit_suites([(suite, cases)])


def junit_suites(suites: Sequence[tuple[str, Sequence[Case]]]) -> str:
    """One ``testsuite`` per (name, cases): a sweep's jobs, or each release of a sweep under a release policy
    (its tasks, with their tier as a property)."""
    counts = {"tests": 0, "failures": 0, "errors": 0}
    root = ET.Element("testsuites", name="runner")
    for suite, cases in suites:
        failures = sum(c.failing for c in cases)
        errors = sum(c.errored for c in cases)
        skipped = sum(c.verdict == "no verdict" and c.blocking is None for c in cases)
        total_time = sum(c.time_s or 0.0 for c in cases)
        node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=str(failures),
                             errors=str(errors), skipped=str(skipped), time=f"{total_time:.2f}")
        for key, value in (("tests", len(cases)), ("failures", failures), ("errors", errors)):
            counts[key] += value
        for case in cases:
            _testcase(node, suite, case)
    for key, value in counts.items():
        root.set(key, str(value))
    for element in root.iter():  # well-formed XML whatever the ids and messages hold, and no URL secret
        element.attrib = {k: printable(redact_text(v)) for k, v in element.attrib.items()}
        if element.text:
            element.text = printable(redact_text(element.text))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _testcase(node: ET.Element, suite: str, case: Case) -> None:
    test = ET.SubElement(node, "testcase", classname=case.classname or suite, name=case.name,
                         time=f"{case.time_s or 0.0:.2f}")
    if case.tier is not None:
        properties = ET.SubElement(test, "properties")
        ET.SubElement(properties, "property", name="tier", value=case.tier)
        ET.SubElement(properties, "property", name="verdict", value=case.verdict)
    elif case.job_verdict is not None:  # a sweep's job: both verdicts, named
        properties = ET.SubElement(test, "properties")
        ET.SubElement(properties, "property", name="job_verdict", value=case.job_verdict)
        ET.SubElement(properties, "property", name="sweep_verdict", value=case.verdict)
    if case.failing:
        ET.SubElement(test, "failure", message=case.message, type=case.verdict).text = case.details
    elif case.errored:
        ET.SubElement(test, "error", message=case.message, type=case.verdict).text = case.details
    elif case.verdict == "no verdict" and case.blocking is None:
        ET.SubElement(test, "skipped", message=case.message)
    elif case.blocking is False:  # a release's task that does not block it: passed, with what it showed
        ET.SubElement(test, "system-out").text = f"{case.message}\n{case.details}".strip()
    if case.details and case.verdict in ("go", "inconclusive") and not case.failing and case.blocking is None:
        ET.SubElement(test, "system-out").text = case.details


def write_junit(path: str | Path, cases: Sequence[Case], suite: str) -> Path:
    return write_junit_suites(path, [(suite, cases)])


def write_junit_suites(path: str | Path, suites: Sequence[tuple[str, Sequence[Case]]]) -> Path:
    target = Path(path).expanduser()
    write_atomic(target, junit_suites(suites), 0o644)
    return target
