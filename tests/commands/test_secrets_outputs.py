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


SECRETS = {"key": "Env-key-Abc123xyz", "password": "Url-pass-Q9w8e7", "body": "Body-key-Zz1122",
           "query": "Query-pw-Mm3344", "fragment": "Frag-tok-Nn5566", "pasted": "sk-pastedKEYabcdefghijklmnop1234"}


def secret_leaks(root: Path, text: str) -> list[str]:
    import base64

    values = [*SECRETS.values(), base64.b64encode(f"alice:{SECRETS['password']}".encode()).decode()]
    found = [f"{path}: {v}" for path in root.rglob("*") if path.is_file() for v in values if v.encode() in path.read_bytes()]
    return found + [f"terminal: {v}" for v in values if v in text]


def test_secrets_of_every_kind_stay_out_of_every_output_even_when_the_server_echoes_them(tmp_path, sqlite_store):
    """A key read from api_key_env, a URL password (sent as Basic auth), a key in the request body, a secret query
    parameter and fragment; a server that answers 400 echoing the request's headers and body. Nothing of them in
    the terminal, failure.json, runner.log, config.yaml, .hydra/*, the cache, or the MLflow run."""
    from tests.helpers.hostile_server import MODEL, HostileServer

    server = HostileServer(mode="echo_headers")
    try:
        host = server.url.split("//", 1)[1]
        url = f"'http://alice:{SECRETS['password']}@{host}/v1?pw={SECRETS['query']}#token={SECRETS['fragment']}'"
        proc = run_cli(["backend=openai", f"backend.base_url={url}", f"backend.served_model={MODEL}",
                        "backend.api_key_env=RUNNER_TEST_SECRET_KEY", f"+backend.extra_body.api_key={SECRETS['body']}",
                        "backend.max_retries=0", "task=gsm8k", "task.dataset.source=local",
                        f"task.dataset.local_path={Path(__file__).parents[1] / 'data' / 'gsm8k_local'}",
                        "task.num_samples=2", "reference.mode=skip", "task.max_input_len=512", "task.max_output_len=16",
                        f"tracking.tracking_uri={sqlite_store(tmp_path / 'mlflow.db')}", f"cache.path={tmp_path / 'gen.sqlite'}",
                        f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, env={"RUNNER_TEST_SECRET_KEY": SECRETS["key"]})
    finally:
        server.close()
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in text, text[-3000:]
    assert server.posts >= 1 and (tmp_path / "run" / "failure.json").is_file(), text[-3000:]
    assert not secret_leaks(tmp_path, text), secret_leaks(tmp_path, text)


def test_a_key_pasted_into_api_key_env_stays_out_of_hydras_files_and_cfg_job(tmp_path):
    pasted = ["backend=openai", "backend.base_url=http://127.0.0.1:9/v1", f"backend.api_key_env={SECRETS['pasted']}",
              "task=gsm8k", "tracking=none", f"hydra.run.dir={tmp_path / 'run'}"]
    proc = run_cli(pasted, tmp_path)
    assert proc.returncode == 1 and "api_key_env" in proc.stderr, proc.stderr[-2000:]
    shown = run_cli([*pasted, "--cfg", "job"], tmp_path)
    assert "api_key_env: REDACTED" in shown.stdout, shown.stdout[-2000:]
    assert not secret_leaks(tmp_path, proc.stdout + proc.stderr + shown.stdout), secret_leaks(tmp_path, "")
