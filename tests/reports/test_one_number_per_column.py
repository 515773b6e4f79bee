"""One number per column (issue 40): a paired test on part of an entry's samples shows, in every table, the
reference's mean on the samples it used, the run's score on them and their difference, so that
score - reference = delta in each output; the entry's own value keeps its own name. The report leads with the
verdict block, and the unpaired test that did not decide says so."""

from __future__ import annotations

import csv
import json
import re
from xml.etree import ElementTree as ET

import pytest
from omegaconf import OmegaConf

from runner.commands.job import job_label
from runner.job.flow import run
from runner.reports.ci import publish_job, sweep_case
from runner.reports.markdown import markdown
from runner.sweep import summary as sweep_summary
from runner.tracking.naming import readable_tags, tracked_metrics
from tests.conftest import ROOT, compose

GSM8K = ["backend=fake", "task=gsm8k", "task.dataset.source=local",
         f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "tracking=none", "cache=off"]
NUMBER = r"[-+]?\d+\.\d+"


def _adds_up(score: float, reference: float, delta: float, digits: float = 1e-9) -> None:
    assert score - reference == pytest.approx(delta, abs=digits)


def test_every_table_shows_the_deciding_rules_figures_on_the_samples_it_used(tmp_path):
    common = [*GSM8K, f"reference.dir={tmp_path / 'refs'}"]
    # the reference: 8 questions, the first right by lm-eval's flexible filter only (its answer is 1,000), so it
    # scores 50 (the mean of strict 0 and flexible 100) and the entry holds 50/8 = 6.25
    recorded = run(compose([*common, "task.num_samples=8", "reference.mode=record",
                            "backend.default_answer=The answer is 1000", f"output_dir={tmp_path / 'rec'}"]))
    assert recorded.score == 6.25
    reference_scores = {json.loads(line)["sample_id"]: json.loads(line)["score"]
                        for line in open(tmp_path / "rec" / "samples.jsonl")}

    # the check: 4 of those 8 (a seeded subset, paired), every answer wrong (the fake echoes the prompt)
    job = tmp_path / "sweep" / "0-smollm2_135m-none-gsm8k"
    overrides = [*common, "task.num_samples=4", f"report.junit={tmp_path / 'job.xml'}",
                 f"report.markdown={tmp_path / 'job.md'}"]
    cfg = compose([*overrides, f"output_dir={job}"])
    outcome = run(cfg)
    decision = outcome.decision
    ids = [json.loads(line)["sample_id"] for line in open(job / "samples.jsonl")]
    subset_reference = sum(reference_scores[i] for i in ids) / len(ids)  # by hand: the entry's mean on those 4
    assert decision.rule == "paired" and decision.paired.n == 4 and outcome.score == 0.0
    assert subset_reference != 6.25  # 0 or 12.5: never the entry's value

    # report.json: the deciding rule's figures, the entry's value under its own name
    shown = json.loads((job / "report.json").read_text())["decision"]
    assert (shown["n"], shown["score"], shown["reference"]) == (4, 0.0, subset_reference)
    _adds_up(shown["score"], shown["reference"], shown["difference"])
    assert shown["entry_reference"] == 6.25 and shown["threshold"] is None and shown["unpaired_threshold"] is not None
    assert shown["p_value"] == (shown["p_within"] if shown["claim"] == "GO" else shown["p_regression"])

    # MLflow: metrics and the readable tags
    metrics = tracked_metrics(outcome.score, outcome.metrics, 4, 1.0, decision.verdict.params, decision)
    assert (metrics["reference"], metrics["score"], metrics["n"]) == (subset_reference, 0.0, 4.0)
    _adds_up(metrics["score"], metrics["reference"], metrics["delta"])
    assert metrics["entry_reference"] == 6.25 and "threshold" not in metrics
    tags = readable_tags(decision, outcome.score)
    assert tags["delta"] == f"{shown['difference']:+.4g}" and tags["reference"] == f"{subset_reference:.4g}"
    assert tags["score"] == "0"

    # report.txt: the verdict block first, then the deciding test, then the one that did not decide
    report = (job / "report.txt").read_text()
    order = [report.index(s) for s in ("decided by:", "compared:", "verdict:", "Paired test:",
                                       "TensorRT-LLM unpaired test (not deciding: the paired test decided)")]
    assert order == sorted(order)
    assert f"new 0.000 vs reference {subset_reference:.3f} on the 4 paired samples" in report
    assert "the reference entry's value 6.250" in report

    # the job's own JUnit and markdown
    publish_job(job_label(cfg), outcome)
    message = ET.parse(tmp_path / "job.xml").getroot().find(".//testcase/failure").get("message")
    _check_phrase(message, subset_reference)
    _check_markdown_row((tmp_path / "job.md").read_text(), subset_reference)

    # the sweep's tables: console, csv, json, html, markdown, JUnit message
    (job / ".hydra").mkdir()
    OmegaConf.save(cfg, job / ".hydra" / "config.yaml")
    (job / ".hydra" / "overrides.yaml").write_text(OmegaConf.to_yaml(overrides))
    summary = sweep_summary.build(tmp_path / "sweep", "holm", None)
    row = summary.rows[0]
    assert (row["n"], row["score"], row["reference"], row["entry_reference"]) == (4, 0.0, subset_reference, 6.25)
    _adds_up(row["score"], row["reference"], row["difference"])
    line = next(x for x in summary.render().splitlines() if x.startswith("0-smollm2"))
    n, score, ref, delta = line.split()[1:5]
    assert n == "4" and (float(score), float(ref)) == (0.0, subset_reference)
    _adds_up(float(score), float(ref), float(delta), 0.011)
    with open(tmp_path / "sweep" / "summary.csv") as handle:
        table = next(csv.DictReader(handle))
    _adds_up(float(table["score"]), float(table["reference"]), float(table["difference"]))
    assert float(table["reference"]) == subset_reference and float(table["entry_reference"]) == 6.25
    stored = json.loads((tmp_path / "sweep" / "summary.json").read_text())["rows"][0]
    assert (stored["reference"], stored["score"]) == (subset_reference, 0.0)
    html = (tmp_path / "sweep" / "summary.html").read_text()
    cells = re.search(r"<td>4</td><td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td>", html)
    assert cells is not None and float(cells[2]) == subset_reference
    _adds_up(float(cells[1]), float(cells[2]), float(cells[3]), 0.011)
    case = sweep_case(tmp_path / "sweep", row, True)
    _check_phrase(case.message, subset_reference)
    _check_markdown_row(markdown([case], "sweep", "X"), subset_reference)


def _check_phrase(message: str, subset_reference: float) -> None:
    found = re.search(rf"score ({NUMBER}) vs reference ({NUMBER}) on 4 samples \(delta ({NUMBER})\)", message)
    assert found is not None, message
    assert float(found[2]) == subset_reference
    _adds_up(float(found[1]), float(found[2]), float(found[3]), 0.011)


def _check_markdown_row(text: str, subset_reference: float) -> None:
    row = next(x for x in text.splitlines() if x.startswith("| ") and "gsm8k" in x)
    header = next(x for x in text.splitlines() if x.startswith("| job |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    cells = dict(zip(columns, (c.strip() for c in row.strip("|").split("|"))))
    score, reference, delta, n = float(cells["score"]), float(cells["reference"]), float(cells["delta"]), cells["n"]
    assert reference == subset_reference and n == "4"
    _adds_up(score, reference, delta, 0.011)
