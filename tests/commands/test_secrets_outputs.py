"""No password of the command line in any file a job writes or sends: a real sweep on the scripted fake
backend with a real MLflow server, three URLs with credentials in one command (two overrides of one key,
and a third key), every file under the job's directories, the reports, the generation cache, and the
MLflow run's name, params, tags and artifacts checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli

PASSWORDS = ("Pw1-first-f00", "Pw2-second-b4r", "Pw3-sweep-n4me")


def leaks(root: Path) -> list[str]:
    """Each file under ``root`` (binary ones included: the sqlite cache) holding one of the passwords."""
    return [f"{path}: {p}" for path in root.rglob("*") if path.is_file()
            for p in PASSWORDS if p.encode() in path.read_bytes()]


@pytest.mark.e2e
def test_several_urls_with_credentials_leave_no_password_in_any_output(tmp_path, mlflow_server):
    import mlflow

    first, second, name = (f"http://alice:{PASSWORDS[0]}@h1:8000/v1", f"https://bob:{PASSWORDS[1]}@h2/v1",
                           f"postgresql://carol:{PASSWORDS[2]}@db:5432/x")
    proc = run_cli(["-m", "backend=fake", "task=mmlu_0shot", "reference.mode=skip", f"backend.default_answer={first}",
                    f"backend.default_answer={second}", f"sweep.name={name}", f"tracking.tracking_uri={mlflow_server}",
                    "tracking.experiment=secrets-everywhere", f"report.junit={tmp_path / 'reports' / 'junit.xml'}",
                    f"report.markdown={tmp_path / 'reports' / 'summary.md'}", f"cache.path={tmp_path / 'gen.sqlite'}",
                    f"hydra.sweep.dir={tmp_path / 'sweep'}"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    dirname = next((tmp_path / "sweep").glob("0-*/.hydra/hydra.yaml")).read_text()
    # override_dirname, where a sweep's values are escaped: two URLs of one comma-joined list
    assert r"backend.default_answer=https\://REDACTED@h2/v1," in dirname
    assert r"sweep.name=postgresql\://REDACTED@db\:5432/x," in dirname
    assert (tmp_path / "sweep" / "multirun.yaml").is_file()
    assert not leaks(tmp_path), leaks(tmp_path)
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if any(p in line for p in PASSWORDS)]
    assert not said, said

    client = mlflow.MlflowClient(tracking_uri=mlflow_server)
    experiment = client.get_experiment_by_name("secrets-everywhere").experiment_id
    runs = client.search_runs([experiment])
    assert len(runs) == 2  # the sweep's parent and its job
    for run in runs:
        shown = str(run.info.run_name) + str(run.data.params) + str(run.data.tags)
        assert not any(p in shown for p in PASSWORDS), shown
        artifacts = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "mlflow" / run.info.run_id)))
        assert not leaks(artifacts), leaks(artifacts)
    assert any("REDACTED" in r.info.run_name for r in runs)
