"""Shared fixtures: offline Hugging Face, Hydra's compose API, a real MLflow server, the embedded model."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def _session_dir(prefix: str) -> Path:
    """A temporary directory for this process's tests, removed when the process ends; only by the process that
    made it (a forked child inherits the exit hook, not the directory)."""
    import shutil

    path, maker = Path(tempfile.mkdtemp(prefix=prefix)), os.getpid()
    atexit.register(lambda: os.getpid() == maker and shutil.rmtree(path, ignore_errors=True))
    return path


# A model other than the embedded one records into your own references directory by default: in tests, a
# directory of the session's, never the checkout's my-references/ (runner.references.store.user_reference_dir).
os.environ["RUNNER_REFERENCES_DIR"] = str(_session_dir("runner-test-my-references-"))


def pytest_configure(config):
    """Parallel workers share the cores: each worker (and the jobs and servers it starts) gets its share of
    compute threads. Left to itself, torch starts one OpenMP thread per core in every worker, and threads
    that spin-wait for a core another worker holds made the quantization tests 8x slower inside the suite
    than alone. Set here, in the controller, before xdist starts the workers (they inherit the variable;
    by then xdist has turned ``-n auto`` into a number); a value the user exported is kept. The cores are
    those this process may run on (its affinity), so workers x threads never exceed them."""
    workers = getattr(config.option, "numprocesses", None)
    if "OMP_NUM_THREADS" not in os.environ and isinstance(workers, int) and workers > 1:
        from runner.backends.threads import usable_cores

        os.environ["OMP_NUM_THREADS"] = str(max(1, len(usable_cores()) // workers))


ROOT = Path(__file__).resolve().parent.parent
# One generation cache per test session, so no test passes on answers cached by an earlier session.
SESSION_GENERATION_CACHE = _session_dir("runner-test-generations-") / "generations.sqlite"


# The files that take longest, longest first (a full run's per-test times from --junitxml, summed per file). With
# ``--dist loadfile`` a file runs on one worker and the workers take files in collection order, so the long ones go
# first and the many short ones fill in behind them (pyproject.toml turns off xdist's own reordering by test count,
# which put these few-test files last). Matched by file name, wherever the file sits under tests/.
SLOWEST_FILES = ("test_openai_endpoint.py", "test_sweep.py", "test_reliability.py", "test_slurm.py", "test_compare.py",
                 "test_hf_quant.py", "test_secrets_outputs.py", "test_calibration.py", "test_humaneval.py",
                 "test_perplexity.py", "test_hf_backend.py", "test_e2e.py", "test_backend_contract.py", "test_extend.py")


def pytest_collection_modifyitems(config, items):
    """Long files first: the slowest ones by name, then the other files with end-to-end tests, then the
    rest; tests keep their order within a file (the sort is stable and per file)."""
    def weight(item) -> tuple[int, int]:
        name = item.path.name
        if name in SLOWEST_FILES:
            return (0, SLOWEST_FILES.index(name))
        return (1, 0) if e2e_files.get(item.path, False) else (2, 0)

    e2e_files: dict[Path, bool] = {}
    for item in items:
        e2e_files[item.path] = e2e_files.get(item.path, False) or item.get_closest_marker("e2e") is not None
    items.sort(key=weight)


def needs(*distributions: str, reason: str) -> pytest.MarkDecorator:
    """Skip a test module where one of these top-level packages is not installed, without importing any: a
    module-level ``importorskip`` imports the package in every xdist worker at collection (ModelOpt's import pulls
    in torch's compiler stack: seconds of CPU in a worker that may run none of the module's tests)."""
    from importlib.util import find_spec

    missing = [name for name in distributions if find_spec(name) is None]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not installed: {reason}")


def _hermetic(args: list[str]) -> list[str]:
    """Add the session's generation-cache path unless the test chose one.

    Hydra's command line takes its overrides as one contiguous group, so the new override goes right
    after the last one given (``backend=x --cfg job`` must not become ``... --cfg job cache.path=...``)."""
    if any(a.lstrip("+~").startswith("cache.path") for a in args):
        return args
    extra = f"cache.path={SESSION_GENERATION_CACHE}"
    last = max((i for i, a in enumerate(args) if "=" in a and not a.startswith("-")), default=len(args) - 1)
    return [*args[:last + 1], extra, *args[last + 1:]]


def compose(overrides: list[str] | None = None, config_name: str = "config", return_hydra_config: bool = False):
    """The job config exactly as ``python -m runner <overrides>`` would compose it
    (``config_name="quantize"``: as ``python -m runner.quantize <overrides>`` would; ``return_hydra_config``: with
    the ``hydra`` node that ``--cfg hydra`` prints)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from runner.config.store import register_schemas

    register_schemas()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="conf", version_base="1.3"):
        overrides = list(overrides or [])
        return hydra_compose(config_name=config_name,
                             overrides=_hermetic(overrides) if config_name == "config" else overrides,
                             return_hydra_config=return_hydra_config)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_server(name: str, argv: list[str], env: dict[str, str], root: Path, ready_s: float) -> tuple[int, str]:
    """``argv`` (a server taking ``{port}``) in a process group of its own, logging to ``root/server.log``:
    (pid, its URL on 127.0.0.1) once ``/health`` answers 200 within ``ready_s``."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with open(root / "server.log", "w") as log:
        proc = subprocess.Popen([a.replace("{port}", str(port)) for a in argv], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=env)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + ready_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited early:\n{(root / 'server.log').read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                if response.status == 200:
                    return proc.pid, uri
        except OSError:
            time.sleep(0.2)
    os.killpg(proc.pid, 9)
    raise RuntimeError(f"{name} did not answer within {ready_s:g} s")


def _start_mlflow_server(root: Path, store: str) -> tuple[int, str]:
    """``mlflow server`` on 127.0.0.1 with the store ``store`` and its artifacts under ``root``: (pid, uri) once it
    answers."""
    cmd = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", "{port}",
           "--backend-store-uri", store,
           "--artifacts-destination", str(root / "artifacts"), "--workers", "1"]
    # the runner tracks runs only: the server's job runner (a pool of huey consumers, each a process that
    # imports mlflow) would take a core for a minute at every start and do nothing for these tests
    return _start_server("mlflow server", cmd, {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}, root, 90)


def _stop_server(pid: int) -> None:
    """SIGTERM to a shared server's process group, SIGKILL after 20 s. The worker that started it reaps it; for
    another worker a zombie (state Z in /proc) counts as gone, since ``kill(pid, 0)`` still reaches one."""
    try:
        os.killpg(pid, 15)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
        except ChildProcessError:  # not this worker's child
            try:
                if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
                    return
            except (FileNotFoundError, IndexError):
                return
        time.sleep(0.1)
    try:
        os.killpg(pid, 9)
    except ProcessLookupError:
        pass


def shared_dir(tmp_path_factory, name: str) -> Path:
    """``name`` under the base temporary directory of the whole test run: the xdist workers share it."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    shared.mkdir(exist_ok=True)
    return shared


@contextlib.contextmanager
def locked(directory: Path):
    """An exclusive lock on ``directory/lock`` across processes (the xdist workers), held inside the block."""
    import fcntl

    with open(directory / "lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def shared_server(tmp_path_factory, name: str, start: Callable[[Path], tuple[int, str]]) -> Iterator[str]:
    """One server for all the xdist workers of a test run (one start instead of one per worker): the first
    worker that needs it starts it (``start(root)`` returns its process group's pid and its URL), each user is
    counted in a state file under a lock, and the last one to finish stops it. Yields the URL."""
    shared = shared_dir(tmp_path_factory, name)
    state_file = shared / "state.json"
    with locked(shared):
        state = json.loads(state_file.read_text()) if state_file.is_file() else None
        if state is None:
            pid, uri = start(shared / f"server-{time.monotonic_ns()}")
            state = {"pid": pid, "uri": uri, "users": 0}
        state["users"] += 1
        state_file.write_text(json.dumps(state))
    try:
        yield state["uri"]
    finally:
        with locked(shared):
            state = json.loads(state_file.read_text())
            state["users"] -= 1
            if state["users"] == 0:
                _stop_server(state["pid"])
                state_file.unlink()
            else:
                state_file.write_text(json.dumps(state))


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory, sqlite_store):
    """A real ``mlflow server`` on 127.0.0.1 with its own sqlite store (tables made: :func:`sqlite_store`) and
    artifact root, shared by the xdist workers of one test run (:func:`shared_server`). Test files keep to
    experiments of their own names, so they share a store as they would in turn."""

    def start(root: Path) -> tuple[int, str]:
        return _start_mlflow_server(root, sqlite_store(root / "mlflow.db"))

    with shared_server(tmp_path_factory, "mlflow-shared", start) as uri:
        yield uri


@pytest.fixture(scope="session")
def sqlite_store(tmp_path_factory) -> Callable[[Path], str]:
    """``sqlite_store(path)``: the URI of a new MLflow sqlite store at ``path`` whose tables MLflow has already made
    (a copy of one empty store built once for the whole test run). Making the tables runs MLflow's 50-odd schema
    migrations, about 10 s for each new store on a 2-core host; for tests about what a job logs, not about creating
    a store (tests/commands/test_reliability.py starts four jobs on a store that does not exist yet)."""
    import shutil

    import mlflow

    shared = shared_dir(tmp_path_factory, "mlflow-empty-store")
    template = shared / "mlflow.db"
    with locked(shared):
        if not (shared / "done").is_file():
            template.unlink(missing_ok=True)
            mlflow.MlflowClient(tracking_uri=f"sqlite:///{template}").search_experiments()
            (shared / "done").touch()

    def store(path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, path)
        return f"sqlite:///{path}"

    return store


@pytest.fixture(scope="session")
def two_layer_checkpoint(tmp_path_factory) -> Path:
    """The embedded model cut to its first 2 layers (trained weights, its dtype and tokenizer:
    tests/helpers/micro_model.py), built once for the whole test run: for tests about what the runner does with a
    model (quantization, recording and checking, logging), not about the embedded model's own numbers."""
    from tests.helpers.micro_model import truncated_checkpoint

    shared = shared_dir(tmp_path_factory, "smollm2-2-layers")
    with locked(shared):
        if not (shared / "done").is_file():
            truncated_checkpoint(shared / "checkpoint", 2)
            (shared / "done").touch()
    return shared / "checkpoint"


def embedded_checkpoint() -> str:
    """The embedded SmolLM2-135M's checkpoint directory (converted once, then cached)."""
    from runner.files.assets import EMBEDDED_MODELS

    return str(EMBEDDED_MODELS["smollm2_135m_gguf"]())


def _start_served_model(root: Path) -> tuple[int, str]:
    """``transformers serve`` on the embedded model, float32 on the CPU, on 127.0.0.1: (pid, root URL) once its
    health check answers. A plain process group (not the backend's ManagedServer, whose exit hook would stop
    it with the worker that started it while another worker still uses it)."""
    from runner.backends.openai.server import render_command
    from runner.backends.threads import cpu_server_env

    # the placeholder {port} is kept for _start_server; render_command finds this virtualenv's console script
    argv = render_command("transformers serve {checkpoint} --host 127.0.0.1 --port {port} --device cpu --dtype float32",
                          {"checkpoint": embedded_checkpoint(), "port": "{port}"})
    return _start_server("transformers serve", argv, os.environ | cpu_server_env({}), root, 180)


@pytest.fixture(scope="session")
def served_model(tmp_path_factory) -> Iterator[str]:
    """The root URL of one ``transformers serve`` on the embedded model, float32 on the CPU, shared
    by the xdist workers of one test run (:func:`shared_server`): the OpenAI backend's tests against a real
    server (tests/backends/test_openai_endpoint.py, the backend contract) pay for one start, not one each.
    Tests that need a server of their own (its start, reuse and stop) start it through the backend."""
    with shared_server(tmp_path_factory, "served-model", _start_served_model) as uri:
        yield uri


@pytest.fixture(scope="session")
def lm_eval_float32_oracle(tmp_path_factory):
    """lm-eval's own CLI in float32 on the embedded model over the local tasks of tests/helpers/lm_eval_tasks.py
    (:func:`~tests.helpers.lm_eval_tasks.float32_oracle`), run once for the whole test run: the first worker
    that needs it runs it under a lock, another waits for it there. A function to call when the run is needed
    (a test may start its own runs first); it returns the directory with tasks/, data/ and the CLI's cli/."""
    from tests.helpers.lm_eval_tasks import float32_oracle

    root = shared_dir(tmp_path_factory, "lm-eval-float32")

    def oracle() -> Path:
        with locked(root):
            if not (root / "done").is_file():
                float32_oracle(root)
                (root / "done").touch()
        return root

    return oracle


def run_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600):
    """``python -m runner ARGS`` as a user runs it; returns the CompletedProcess."""
    full_env = dict(os.environ) | {"PYTHONPATH": str(ROOT)} | (env or {})
    return subprocess.run([sys.executable, "-m", "runner", *_hermetic(list(args))], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def run_in_process(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m runner ARGS`` in this process: the job composed with Hydra's compose API and run by the
    command line's own glue (:func:`runner.commands.job.run_job`: exit status, messages printed without a
    traceback, CI reports). For tests about a job's results and messages, not about the process (its
    signals, Hydra's own logging, a fresh interpreter): no new interpreter, and a model loaded by an
    earlier in-process job is reused. Returns a CompletedProcess like :func:`run_cli`."""
    from runner.commands.job import run_job
    from tests.helpers.in_process import call_main

    cfg = compose(list(args))
    return call_main(lambda _: run_job(cfg), args, cwd)
