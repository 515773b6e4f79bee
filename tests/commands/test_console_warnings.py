"""A warning is printed once, with its level named once: the console of a real ``python -m runner`` (Hydra's
logging) shows a recording's near-chance warning as one log line at WARNING level whose text does not start with
"warning:" again, and the report printed at the end does not repeat it; report.txt keeps it among its notes."""

from __future__ import annotations

from tests.conftest import ROOT, run_cli

GSM8K = ["backend=fake", "backend.default_answer='The answer is 5'", "task=gsm8k", "task.dataset.source=local",
         f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "tracking=none", "cache=off",
         "task.num_samples=6"]
CHANCE = "the reference 0 is not above the task's chance level (0)"


def test_a_recording_warning_is_printed_once_with_one_level_prefix(tmp_path):
    proc = run_cli([*GSM8K, "reference.mode=record", f"reference.dir={tmp_path / 'refs'}",
                    f"output_dir={tmp_path / 'rec'}"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    console = proc.stdout + proc.stderr
    # the near-chance warning (no fixture answer is 5, GSM8K's floor is 0) and the entry's fixed n: each once
    assert console.count(CHANCE) == 1, console
    assert console.count("this entry fixes num_samples=6") == 1, console
    assert f"[WARNING] - {CHANCE}" in console
    lowered = console.lower()
    assert "warning] - warning:" not in lowered and "warning: warning:" not in lowered
    report = (tmp_path / "rec" / "report.txt").read_text()
    assert f"note: warning: {CHANCE}" in report and "note: WARNING: this entry fixes num_samples=6" in report
