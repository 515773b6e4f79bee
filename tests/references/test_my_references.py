"""Your references in your directory: a model other than the embedded one records into your own references
directory by default (``my-references/``, or ``$RUNNER_REFERENCES_DIR``), never into the project's tracked
``references/`` unless ``reference.dir`` asks; later runs of that model find it there; the demo's model keeps the
project's entries; ``my-references/`` is ignored by git."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from runner.references.store import default_reference_dir, reference_dir, user_reference_dir
from tests.conftest import ROOT, run_in_process

FAKE = ["backend=fake", "tracking=none", "model=llama31_8b", "task=arc_easy", "task.num_samples=12"]


def _project_files() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((ROOT / "references").rglob("*")) if p.is_file()}


def test_recording_another_model_writes_your_directory_and_leaves_the_projects_untouched(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    monkeypatch.setenv("RUNNER_REFERENCES_DIR", str(mine))
    before = _project_files()
    recorded = run_in_process([*FAKE, "reference.mode=record", f"output_dir={tmp_path / 'rec'}"], tmp_path)
    assert recorded.returncode == 0, recorded.stdout[-2000:] + recorded.stderr[-2000:]
    assert _project_files() == before
    assert "meta-llama/Llama-3.1-8B-Instruct" in (mine / "arc_easy.yaml").read_text()
    said = recorded.stdout + recorded.stderr
    assert f"{mine} is your references directory" in said and "to share it" in said
    # the next run of that model finds it there by itself (paired: the entry kept its per-sample scores)
    checked = run_in_process([*FAKE, "reference.against=baseline", f"output_dir={tmp_path / 'chk'}"], tmp_path)
    assert checked.returncode in (0, 4), checked.stdout[-2000:] + checked.stderr[-2000:]  # GO or, at n=12, undecided
    assert json.loads((tmp_path / "chk" / "report.json").read_text())["reference_entry"]["dir"] == str(mine)
    assert "decided by:  McNemar exact" in checked.stdout


def test_which_directory_each_job_uses(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_REFERENCES_DIR", str(tmp_path))
    project = default_reference_dir()
    assert user_reference_dir() == tmp_path
    assert reference_dir("elsewhere", "mmlu", "org/m", True, False) == Path("elsewhere")  # reference.dir wins
    assert reference_dir(None, "mmlu", "HuggingFaceTB/SmolLM2-135M-Instruct", True, True) == project  # the demo's
    assert reference_dir(None, "mmlu", "org/m", True, False) == tmp_path  # recording your own model
    assert reference_dir(None, "mmlu", "meta-llama/Llama-3.1-8B-Instruct", False, False) == project  # upstream's
    (tmp_path / "mmlu.yaml").write_text("meta-llama/Llama-3.1-8B-Instruct:\n- accuracy: 60.0\n")
    assert reference_dir(None, "mmlu", "meta-llama/Llama-3.1-8B-Instruct", False, False) == tmp_path  # yours now
    monkeypatch.delenv("RUNNER_REFERENCES_DIR")
    assert user_reference_dir() == ROOT / "my-references"


def test_my_references_is_ignored_by_git_in_a_checkout():
    ignored = subprocess.run(["git", "check-ignore", "-q", "my-references/arc_easy.yaml"], cwd=ROOT)
    assert ignored.returncode == 0
