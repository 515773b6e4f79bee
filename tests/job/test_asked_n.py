"""An n the user sets is honoured against a reference recorded with more (issue 31): with per-sample scores the
run draws a seeded subset of the reference's own samples and pairs on it; without them the unpaired test uses the
n evaluated; a run that sets no n inherits the reference's n."""

from __future__ import annotations

import json

from runner.contract.evaluator import Sample
from runner.job.flow import run
from runner.job.samples import seeded_subset
from runner.reports.text import asked_n_note, sample_count_notes
from runner.stats.data.hypothesis import HypothesisParams
from tests.conftest import ROOT, compose

GSM8K = ["backend=fake", "backend.default_answer='The answer is 5'", "task=gsm8k", "task.dataset.source=local",
         f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "tracking=none", "cache=off"]


def _ids(out_dir) -> list[str]:
    return [json.loads(line)["sample_id"] for line in open(out_dir / "samples.jsonl")]


def test_an_explicit_n_is_a_paired_subset_of_the_references_samples_and_no_n_inherits(tmp_path):
    common = [*GSM8K, f"reference.dir={tmp_path / 'refs'}"]
    recorded = run(compose([*common, "task.num_samples=6", "reference.mode=record", f"output_dir={tmp_path / 'rec'}"]))
    reference_ids = set(_ids(tmp_path / "rec"))
    assert recorded.exit_status == 0 and len(reference_ids) == 6
    # no fixture answer is 5: the score is GSM8K's floor (chance 0), which is said when it is recorded
    assert recorded.score == 0.0 and "warning: the recorded reference accuracy=0.0000 is at or below the task's " \
        "chance level (0)" in (tmp_path / "rec" / "report.txt").read_text()

    asked = run(compose([*common, "task.num_samples=3", f"output_dir={tmp_path / 'asked'}"]))
    ids = _ids(tmp_path / "asked")
    assert len(ids) == 3 and set(ids) <= reference_ids  # three of the reference's six, not three drawn afresh
    assert asked.decision is not None and asked.decision.rule == "paired" and asked.decision.n == 3
    report = (tmp_path / "asked" / "report.txt").read_text()
    assert "task.num_samples=3: the reference was recorded with num_samples=6" in report
    assert "seeded subset of 3 of its 6 samples and pairs on them" in report
    again = run(compose([*common, "task.num_samples=3", f"output_dir={tmp_path / 'again'}"]))
    assert _ids(tmp_path / "again") == ids and again.decision.rule == "paired"  # seeded: the same three

    unpaired = run(compose([*common, "task.num_samples=3", "stats.method=unpaired", f"output_dir={tmp_path / 'unp'}"]))
    assert len(_ids(tmp_path / "unp")) == 3 and unpaired.decision.n == 3
    # theta = (z_0.95 + z_0.8) * sigma * sqrt(2 / n) = (1.644854 + 0.841621) * 50 * sqrt(2/3) = 101.51 at n=3
    assert "uses the n evaluated, which detects drops of theta=101.51 points (theta=71.78 at n=6)" in \
        (tmp_path / "unp" / "report.txt").read_text()

    inherited = run(compose([*common, f"output_dir={tmp_path / 'inherit'}"]))
    assert set(_ids(tmp_path / "inherit")) == reference_ids  # no n set: the entry's 6, not the task's 1319
    assert "fixes num_samples=6 (the task's default 1319 is not used)" in \
        (tmp_path / "inherit" / "report.txt").read_text()


def test_the_seeded_subset_keeps_the_pools_order_and_takes_all_when_short():
    pool = [Sample(f"s{i}", f"p{i}", "t") for i in range(10)]
    picked = seeded_subset(pool, 4, seed=0)
    assert len(picked) == 4 and [s.id for s in picked] == sorted((s.id for s in picked), key=lambda i: int(i[1:]))
    assert seeded_subset(pool, 4, seed=0) == picked and seeded_subset(pool, 4, seed=1) != picked
    assert seeded_subset(pool, 12, seed=0) == pool


def test_the_notes_say_where_the_n_comes_from():
    params = HypothesisParams(0.05, 0.2, 50.0, 64)
    assert asked_n_note(params, 512, 513) == ("task.num_samples=64: the reference was recorded with num_samples=512; "
                                              "this run evaluates a seeded subset of 64 of its 513 samples and pairs on them")
    # (1.644854 + 0.841621) * 50 * sqrt(2/64) = 21.98; sqrt(2/512) instead: 7.77
    assert "theta=21.98 points (theta=7.77 at n=512)" in asked_n_note(params, 512, None)
    assert sample_count_notes(4096, True, 512, 513, True)[0].startswith("the reference entry fixes num_samples=512")
    assert sample_count_notes(4096, False, 64, 64, True) == []  # an n the user set is not "overridden"
