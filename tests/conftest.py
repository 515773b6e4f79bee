"""Shared fixtures: offline Hugging Face, Hydra's compose API, a real MLflow server, the embedded model."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
# One generation cache per test session, so no test passes on answers cached by an earlier session.
SESSION_GENERATION_CACHE = Path(tempfile.mkdtemp(prefix="runner-test-generations-")) / "generations.sqlite"


def _hermetic(args: list[str]) -> list[str]:
    """Add the session's generation-cache path unless the test chose one.

    Hydra's command line takes its overrides as one contiguous group, so the new override goes right
    after the last one given (``backend=x --cfg job`` must not become ``... --cfg job cache.path=...``)."""
    if any(a.lstrip("+~").startswith("cache.path") for a in args):
        return args
    extra = f"cache.path={SESSION_GENERATION_CACHE}"
    last = max((i for i, a in enumerate(args) if "=" in a and not a.startswith("-")), default=len(args) - 1)
    return [*args[:last + 1], extra, *args[last + 1:]]


def compose(overrides: list[str] | None = None, config_name: str = "config"):
    """The job config exactly as ``python -m runner <overrides>`` would compose it
    (``config_name="quantize"``: as ``python -m runner.quantize <overrides>`` would)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from runner.config.store import register_schemas

    register_schemas()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="conf", version_base="1.3"):
        overrides = list(overrides or [])
        return hydra_compose(config_name=config_name,
                             overrides=_hermetic(overrides) if config_name == "config" else overrides)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """A real ``mlflow server`` on 127.0.0.1 with its own sqlite store and artifact root."""
    root = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    cmd = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
           "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
           "--artifacts-destination", str(root / "artifacts"), "--workers", "1"]
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited early:\n{(root / 'server.log').read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError("mlflow server did not answer within 90 s")
    yield uri
    os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
    log.close()


def run_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600):
    """``python -m runner ARGS`` as a user runs it; returns the CompletedProcess."""
    full_env = dict(os.environ) | {"PYTHONPATH": str(ROOT)} | (env or {})
    return subprocess.run([sys.executable, "-m", "runner", *_hermetic(list(args))], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
