"""The sample reports in README.md and docs/ match what the code prints (issue 31): each block marked
``<!-- report: ARGS -->`` (written from a real run by tools/doc_reports.py) has the lines, in order, that
``python -m runner ARGS`` prints now. Checked on ``backend=fake`` (seconds, no model): the labels of the lines
are compared, not the figures, which only the real model gives."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from runner.job.flow import run
from tests.conftest import ROOT, compose

_spec = importlib.util.spec_from_file_location("doc_reports", ROOT / "tools" / "doc_reports.py")
doc_reports = sys.modules.setdefault("doc_reports", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(doc_reports)

SAMPLES = [s for page in doc_reports.pages() for s in doc_reports.samples(page)]


_fake_reports: dict[tuple[str, ...], str] = {}


def fake_report(args: tuple[str, ...], out: Path) -> str:
    """``report.txt`` of the marked command on ``backend=fake`` (once per command)."""
    if args not in _fake_reports:
        run(compose([*args, "backend=fake", "tracking=none", f"output_dir={out}"]))
        _fake_reports[args] = (out / "report.txt").read_text(encoding="utf-8")
    return _fake_reports[args]


def test_the_concepts_page_and_the_readme_show_a_real_report():
    assert {s.page.name for s in SAMPLES} >= {"README.md", "concepts.md"}


@pytest.mark.parametrize("sample", SAMPLES, ids=[f"{s.page.name}:{s.first}" for s in SAMPLES])
def test_a_shown_report_has_the_lines_the_code_prints(sample, tmp_path_factory):
    fresh = doc_reports.excerpt(fake_report(sample.args, tmp_path_factory.mktemp("run")), sample.start)
    assert doc_reports.labels(sample.shown()) == doc_reports.labels(fresh), \
        f"{sample.page.name}:{sample.first} differs from the report the code prints: run python tools/doc_reports.py"


def test_labels_keep_what_a_line_says_and_drop_its_figures():
    text = ("mmlu | org/model | bfloat16\naccuracy: 21.05 on 57 samples\n  theta            22.215   smallest\n"
            "  90% CI       [-1, 2]   clustered\ndecided by:  McNemar exact\nnote: anything\n")
    assert doc_reports.labels(text) == ["mmlu", "accuracy", "theta", "N% CI", "decided by"]
    assert doc_reports.excerpt("a\ndecided by: x\nverdict: y\nnote: z\n====", "decided by:") == "decided by: x\nverdict: y"
