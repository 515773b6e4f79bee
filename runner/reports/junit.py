"""JUnit XML, one test case per job: CI systems (GitLab, Jenkins, GitHub test reporters) show a NO-GO
as a failed test (type ``no-go``) with the verdict block, an INCONCLUSIVE as a failed test too (type
``inconclusive``: nothing was shown, which is not a pass) unless ``stats.verdicts=two_way`` or
``stats.on_inconclusive=pass`` makes it one, and an error as an errored test."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence
from xml.etree import ElementTree as ET

from runner.files.paths import write_atomic
from runner.reports.cases import Case


def junit_xml(cases: Sequence[Case], suite: str) -> str:
    failures = sum(c.failing for c in cases)
    errors = sum(c.verdict in ("failed", "incomplete") for c in cases)
    skipped = sum(c.verdict == "no verdict" for c in cases)
    total_time = sum(c.time_s or 0.0 for c in cases)
    root = ET.Element("testsuites", name="runner", tests=str(len(cases)), failures=str(failures), errors=str(errors))
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=str(failures),
                         errors=str(errors), skipped=str(skipped), time=f"{total_time:.2f}")
    for case in cases:
        test = ET.SubElement(node, "testcase", classname=suite, name=case.name, time=f"{case.time_s or 0.0:.2f}")
        if case.failing:
            ET.SubElement(test, "failure", message=case.message, type=case.verdict).text = case.details
        elif case.verdict in ("failed", "incomplete"):
            ET.SubElement(test, "error", message=case.message, type=case.verdict).text = case.details
        elif case.verdict == "no verdict":
            ET.SubElement(test, "skipped", message=case.message)
        if case.details and case.verdict in ("go", "inconclusive") and not case.failing:
            ET.SubElement(test, "system-out").text = case.details
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path: str | Path, cases: Sequence[Case], suite: str) -> Path:
    target = Path(path).expanduser()
    write_atomic(target, junit_xml(cases, suite), 0o644)
    return target
