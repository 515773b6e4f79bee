"""Step 3 of a job (runner.job.reference): an entry's reference_note reaches the job's notes (the report)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from runner.contract.spec import AccuracySpec
from runner.job.reference import find_reference
from runner.stats.data.hypothesis import HypothesisParams


def test_the_reference_note_is_listed_with_the_jobs_notes(tmp_path: Path) -> None:
    (tmp_path / "mmlu.yaml").write_text(
        "org/model:\n  - accuracy: 61.5\n    threshold_override: 60.0\n    reference_note: re-measured after a tokenizer fix\n",
        encoding="utf-8")
    job = SimpleNamespace(
        mode="check", ref_dir=tmp_path, notes=[], said=[], reference=None, reference_rows=None, asked_num_samples=None,
        config=SimpleNamespace(reference=SimpleNamespace(overwrite=False, against="spec"),
                               stats=SimpleNamespace(method="unpaired")),
        task=SimpleNamespace(name="mmlu", metric="accuracy"), model=SimpleNamespace(hf_id="org/model"),
        defaults=HypothesisParams(alpha=0.05, beta=0.2, sigma=50.0, num_samples=4096))
    reference, params = find_reference(job, AccuracySpec())
    assert (reference.value, reference.threshold, params.num_samples) == (61.5, 60.0, 4096)
    assert job.notes == ["reference note (mmlu.yaml, entry 0): re-measured after a tokenizer fix"]
