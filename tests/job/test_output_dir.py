"""A job sent into a directory of unrelated files says so (issue 39): its files are written beside them, the user's
files are left as they were, and a rerun into its own directory says nothing."""

from __future__ import annotations

import json

from runner.job.flow import run
from tests.conftest import ROOT, compose

GSM8K = ["backend=fake", "backend.default_answer='The answer is 5'", "task=gsm8k", "task.dataset.source=local",
         f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "tracking=none", "cache=off",
         "reference.mode=skip", "task.num_samples=2"]


def test_a_directory_of_unrelated_files_is_said_and_left_alone(tmp_path):
    crowded = tmp_path / "thesis"
    crowded.mkdir()
    (crowded / "chapter1.tex").write_text("mine")
    (crowded / "figures").mkdir()
    run(compose([*GSM8K, f"output_dir={crowded}"]))
    notes = json.loads((crowded / "report.json").read_text())["notes"]
    said = [n for n in notes if "no job wrote" in n]
    assert said and "2 entries" in said[0] and "chapter1.tex, figures" in said[0], notes
    assert (crowded / "chapter1.tex").read_text() == "mine"
    run(compose([*GSM8K, f"output_dir={crowded / 'run'}"]))  # a directory of its own, then the same one again
    run(compose([*GSM8K, f"output_dir={crowded / 'run'}"]))
    assert not [n for n in json.loads((crowded / "run" / "report.json").read_text())["notes"] if "no job wrote" in n]
