"""``backend=openai`` through the command line, against a real OpenAI-compatible server.

The server is ``transformers serve`` (transformers[serving]) on the embedded SmolLM2-135M, float32 on
the CPU, started once for the test run (tests/conftest.py: ``served_model``). A fault-injecting proxy
(tests/helpers/endpoint_proxy.py) sits in front of it to count requests, refuse them (503) or drop
them (a server gone away). Checked here: the same predictions as ``backend=hf`` on the same questions,
a verdict against the recorded reference, retries, a run resumed from the generation cache after the
server went away (exactly n samples), refusals before any request, the API key kept out of every
file and of MLflow, and the managed mode starting and stopping its server.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from tests.helpers.endpoint_proxy import FaultProxy
from tests.conftest import ROOT, run_cli, run_in_process

pytestmark = pytest.mark.e2e
# MMLU on the committed 7-question fixture (2 subjects, 2-shot); n rounds up to whole per-subject quotas
MMLU = ["task=mmlu", "task.dataset.source=local", f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'mmlu_cais'}",
        "task.num_fewshot=2"]
ALL_7, TWO = "task.num_samples=228", "task.num_samples=57"  # 4 a subject (all 7), 1 a subject
SECRET = "sk-runner-test-9f3c1e-never-written"


@pytest.fixture()
def proxy(served_model):
    front = FaultProxy(served_model)
    yield front
    front.close()


def endpoint(proxy: FaultProxy, *extra: str) -> list[str]:
    return ["backend=openai", f"backend.base_url={proxy.url}/v1", "backend.served_spec.dtype=float32",
            "backend.max_retries=0", *extra]


def samples(out: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return {row["sample_id"]: row["prediction"] for row in rows}


def ok(result) -> None:
    """Finished with a verdict that shows no regression (GO, or INCONCLUSIVE at these small n), or no verdict."""
    assert result.returncode in (0, 4), result.stdout[-3000:] + result.stderr[-3000:]


def test_served_answers_equal_hf_s_pass_its_recorded_reference_and_the_key_is_never_written(proxy, tmp_path,
                                                                                               monkeypatch, sqlite_store):
    """Completions get our rendered prompts: greedy answers equal backend=hf's on the same questions, and the
    served MMLU run, checked against the reference backend=hf recorded on them, gets a verdict that passes. The
    MLflow store is a copy of an empty one (tables made): the key could leak into the runs the job writes, not
    into MLflow's own schema migrations."""
    mlflow_db, refs = tmp_path / "mlflow.db", tmp_path / "refs"
    store_uri = sqlite_store(mlflow_db)
    key = {"RUNNER_TEST_API_KEY": SECRET}
    agreement = {}
    # gsm8k answers are cut at 24 tokens (not 256): the same greedy prefix on both sides, at a fraction of the time
    gsm8k = ["task=gsm8k", "task.num_samples=1", "task.max_output_len=24"]
    # one request at a time: `transformers serve` on the CPU answers concurrent generations several times
    # slower than the same ones in turn (measured: 2 GSM8K answers in 22 s at 4 in flight, 7 s at 1)
    served_args = endpoint(proxy, "backend.api_key_env=RUNNER_TEST_API_KEY", "backend.max_concurrency=1")
    for task, n, args in (("mmlu", 7, [*MMLU, ALL_7]), ("gsm8k", 1, gsm8k)):
        served, local = tmp_path / f"{task}-served", tmp_path / f"{task}-hf"
        common = [*args, "cache.enabled=false"]
        # backend=hf in this process: its predictions, and for MMLU the reference the served run is checked against
        recorded = ["reference.mode=record", f"reference.dir={refs}"] if task == "mmlu" else ["reference.mode=skip"]
        ok(run_in_process(["backend=hf", "backend.dtype=float32", *common, *recorded, "tracking=none",
                           f"output_dir={local}"], tmp_path))
        if task == "mmlu":  # the whole command line once, MLflow on: where a key could leak
            ok(run_cli([*served_args, *common, f"reference.dir={refs}", "tracking=mlflow",
                        f"tracking.tracking_uri={store_uri}", f"output_dir={served}"], tmp_path, env=key))
            # hf recorded dtype=float32 (not the checkpoint's bfloat16): the served spec declares the same
            report = json.loads((served / "report.json").read_text())
            assert report["decision"]["passed"] is True
            assert report["backend"]["spec_declared"] is True
            assert any("declared in the config, not read back" in note for note in report["notes"])
        else:  # the same backend in this process: no second interpreter and MLflow store to start
            monkeypatch.setenv("RUNNER_TEST_API_KEY", SECRET)
            ok(run_in_process([*served_args, *common, "reference.mode=skip", "tracking=none", f"output_dir={served}"],
                              tmp_path))
        a, b = samples(served), samples(local)
        assert a.keys() == b.keys() and len(a) == n
        agreement[task] = sum(a[k] == b[k] for k in a)
    print(f"served vs in-process predictions agree: {agreement}")
    assert agreement == {"mmlu": 7, "gsm8k": 1}
    assert proxy.authorizations == {f"Bearer {SECRET}"}  # the key was sent ...
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert mlflow_db in written and any(p.name == "config.yaml" for p in written)
    for path in written:  # ... and is in no file: outputs, logs, references, MLflow's store and artifacts
        assert SECRET.encode() not in path.read_bytes(), path


def test_an_lm_eval_generation_task_gets_a_paired_verdict_and_a_loglikelihood_task_is_refused(proxy, tmp_path):
    """task=lm_eval on the served model: a generation task recorded in process (backend=hf) and checked through the
    server (the same greedy texts, the paired test); a multiple-choice task is refused before any request."""
    from tests.helpers.lm_eval_tasks import write_tasks

    tasks, refs = write_tasks(tmp_path, gsm8k_rows=2), tmp_path / "refs"
    base = ["task=lm_eval", "task.lm_eval_task=gsm8k_local", f"task.include_path={tasks}",
            "task.gen_kwargs='max_gen_toks=8'", f"reference.dir={refs}", "tracking=none", "cache.enabled=false"]
    ok(run_in_process(["backend=hf", "backend.dtype=float32", *base, "reference.mode=record",
                       f"output_dir={tmp_path / 'record'}"], tmp_path))
    ok(run_in_process([*endpoint(proxy, "backend.max_concurrency=1"), *base, f"output_dir={tmp_path / 'check'}"],
                      tmp_path))
    report = json.loads((tmp_path / "check" / "report.json").read_text())
    assert report["decision"]["rule"] == "paired" and report["decision"]["passed"] is True
    assert samples(tmp_path / "check") == samples(tmp_path / "record") and proxy.forwarded == 2
    refused = run_in_process([*endpoint(proxy), *base[:1], "task.lm_eval_task=arc_local", *base[2:],
                              f"output_dir={tmp_path / 'mc'}"], tmp_path)
    assert refused.returncode == 1 and "lm-eval task arc_local is multiple_choice" in refused.stderr
    assert proxy.forwarded == 2


def test_retries_ride_out_an_overloaded_server_and_the_last_error_says_where(proxy, tmp_path):
    base = [*MMLU, TWO, "reference.mode=skip", "tracking=none", "cache.enabled=false",
            "backend.max_concurrency=1"]
    proxy.fail_next = 3
    ok(run_in_process([*endpoint(proxy), *base, "backend.max_retries=3", f"output_dir={tmp_path / 'a'}"], tmp_path))
    assert proxy.injected == 3 and proxy.forwarded == 2
    proxy.reset()
    proxy.fail_next = 10**6
    failed = run_in_process([*endpoint(proxy), *base, "backend.max_retries=1", "backend.on_failure=stop",
                             f"output_dir={tmp_path / 'b'}"], tmp_path)
    assert failed.returncode == 1
    assert proxy.injected == 2  # one try and one retry, then the message
    err = failed.stderr
    assert "the model server refused a request" in err and "HTTP 503" in err and "overloaded: injected" in err
    assert f"{proxy.url}/v1/completions" in err and "Traceback" not in err


def test_a_run_cut_off_by_the_server_resumes_from_the_cache_with_exactly_n_samples(proxy, tmp_path):
    cache = tmp_path / "generations.sqlite"
    args = [*endpoint(proxy), *MMLU, ALL_7, "reference.mode=skip", "tracking=none",
            f"cache.path={cache}", "cache.chunk_size=2", "backend.max_concurrency=1"]
    proxy.forward_limit = 3  # the server goes away during the second chunk, after answering its first request
    cut = run_in_process([*args, f"output_dir={tmp_path / 'cut'}"], tmp_path)
    assert cut.returncode == 1 and "the model server cannot be reached" in cut.stderr, cut.stderr[-2000:]
    proxy.reset()  # the server is back
    ok(run_in_process([*args, f"output_dir={tmp_path / 'resumed'}"], tmp_path))
    report = json.loads((tmp_path / "resumed" / "report.json").read_text())
    # all three answers the server gave are kept, the half-answered chunk's included: only four are asked again
    assert report["generation_cache"]["hits"] == 3 and report["generation_cache"]["misses"] == 4
    assert proxy.forwarded == 4 and len(samples(tmp_path / "resumed")) == 7


@pytest.mark.parametrize("extra, message", [
    (["task.scoring=loglikelihood"], "cannot score log-likelihood requests"),
    (["backend.served_model=someone/else"], "does not serve the declared model"),
    (["backend.endpoint=chat"], "the chat endpoint wraps every prompt"),
    (["backend.api_key_env=RUNNER_TEST_UNSET_KEY"], "the API key variable is not set"),
    (["backend.launch.command=x"], "say where the server is, or how to start one"),
])
def test_mistakes_are_refused_before_any_request(proxy, tmp_path, extra, message):
    result = run_in_process([*endpoint(proxy), *MMLU, TWO, "reference.mode=skip", "tracking=none",
                             *extra, f"output_dir={tmp_path / 'out'}"], tmp_path)
    assert result.returncode == 1 and message in result.stderr and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert proxy.forwarded == 0 and proxy.injected == 0


def test_an_interrupted_job_stops_its_managed_server(tmp_path):
    """SIGTERM (a scheduler's cancel) while requests are in flight: exit 143, and no server process is left. The
    server is the preset's real one (``backend=transformers_serve``), its log kept in the job's directory."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    from tests.conftest import _hermetic

    env = dict(os.environ) | {"PYTHONPATH": str(ROOT)}
    # answers cut at 64 tokens: the request in flight at SIGTERM ends sooner; 40 of them still outlast the signal
    args = _hermetic(["backend=transformers_serve", "task=gsm8k", "task.num_samples=40", "task.max_output_len=64",
                      "reference.mode=skip",
                      "tracking=none", "backend.max_concurrency=1", f"output_dir={tmp_path / 'out'}"])
    job = subprocess.Popen([sys.executable, "-m", "runner", *args], cwd=tmp_path, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    server: list[psutil.Process] = []
    deadline = time.monotonic() + 180
    for line in job.stdout:  # wait until the first answers come back
        if "answers:" in line or time.monotonic() > deadline:
            server = psutil.Process(job.pid).children(recursive=True)
            break
    assert server, "the managed server did not start"
    job.send_signal(signal.SIGTERM)
    job.stdout.read()
    assert job.wait(timeout=60) == 143
    _, alive = psutil.wait_procs(server, timeout=10)
    assert not alive, [p.cmdline() for p in alive]
    assert "Application startup complete" in (tmp_path / "out" / "server.log").read_text()  # uvicorn's


def test_a_sweep_worker_starts_one_server_for_its_jobs_on_one_model(tmp_path):
    """Consecutive jobs of one process with the same launch command share the server; another command
    line stops it and starts its own; reuse=false stops it after the job. The servers are our stdlib one
    (tests/helpers/hostile_server.py answering " 4") under two command lines: which server the runner keeps,
    stops and starts is decided by the command line alone, whatever the server (the preset's real
    ``transformers serve`` is started and stopped by test_an_interrupted_job_stops_its_managed_server; a
    second start of it here cost about 8 s of CPU before its first answer)."""
    import sys

    from runner.backends.openai import server as servers
    from runner.job.flow import run
    from tests.conftest import compose
    from tests.helpers.hostile_server import MODEL

    base = ["backend=transformers_serve", *MMLU, TWO, "reference.mode=skip", "tracking=none", "cache=off",
            f"backend.served_model={MODEL}"]
    ours = ROOT / "tests" / "helpers" / "hostile_server.py"

    def details(*extra: str) -> dict:
        out = tmp_path / str(len(list(tmp_path.iterdir())))
        run(compose([*base, *extra, f"output_dir={out}"]))
        return json.loads((out / "report.json").read_text())["backend"]["details"]

    def port(log: str) -> int:  # the address the server said it listens on
        return int(re.search(r"127\.0\.0\.1:(\d+)", Path(log).read_text()).group(1))

    def launch(mode: str) -> str:
        return f"backend.launch.command='{sys.executable} {ours} --port {{port}} --mode {mode}'"

    first = details(launch("ok"))
    assert first["server"] == "started"
    again = details(launch("ok"), "task.num_fewshot=1")
    assert again["server"] == "reused" and again["server_log"] == first["server_log"]
    other = details(launch("ok --child"), "backend.launch.reuse=false")  # another command line: a worker child too
    assert other["server"] == "started" and other["server_log"] != first["server_log"]
    assert servers._kept is None  # nothing left running: the first server was stopped for the new one
    for log in (first["server_log"], other["server_log"]):
        with socket.socket() as sock:  # the first stopped for the new one, the new one after its job
            assert sock.connect_ex(("127.0.0.1", port(log))) != 0
