"""Screenshots of the MLflow UI after the embedded quantization gate, for the docs (docs/img/mlflow_*.png).

Starts a real ``mlflow server`` on 127.0.0.1 with a fresh sqlite store, runs the committed sweep
``python -m runner experiment=embedded_gate`` against it (or ``--sweep`` overrides of your own),
then opens the UI in headless Chromium (Playwright driving the system's chromium) and saves:

- ``mlflow_runs.png``: the experiment's runs table at the address every job prints (``runs_table_url``: the
  classic view with the saved "Verdicts" view), parent and children, with the verdict, score, reference,
  delta and p-value columns the view selects (no clicks but closing MLflow's assistant panel);
- ``mlflow_parent.png``: the sweep's parent run: its description names the children that regressed and
  holds the summary table; its ``sweep.regressed`` tag;
- ``mlflow_child.png``: the w4a16 perplexity run: description (the verdict block), metrics, tags;
- ``mlflow_flipped.png``: that run's ``flipped_samples.json`` table.

    pip install playwright==1.65.2 && apt-get install chromium    # once (or pip install --target DIR, then PYTHONPATH=DIR)
    python tools/mlflow_screenshots.py [--out docs/img] [--chromium /usr/bin/chromium] [--sweep ...]
    python tools/mlflow_screenshots.py --store /tmp/runner-screens-XXXX    # again, on the runs of an earlier call
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(root: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = open(root / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                             "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
                             "--artifacts-destination", str(root / "artifacts"), "--workers", "1"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    for _ in range(180):
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2):
                return proc, uri
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("mlflow server did not start")


def shoot(uri: str, out: Path, chromium: str, experiment: str) -> list[Path]:
    import mlflow
    from playwright.sync_api import sync_playwright

    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    parent = next(r for r in runs if r.data.tags.get("sweep") == "parent")
    child = next((r for r in runs if r.data.tags.get("quant") == "w4a16" and r.data.tags.get("task") == "perplexity"),
                 runs[-1])
    sys.path.insert(0, str(ROOT))
    from runner.tracking.trackers import runs_table_url

    base = f"{uri}/#/experiments/{exp.experiment_id}"
    ml = "workflowType=machine_learning"
    # the runs table at the address each job prints: it must open on the table with the decision's columns
    shots = [("mlflow_runs.png", runs_table_url(uri, exp.experiment_id), 620, True),
             ("mlflow_parent.png", f"{base}/runs/{parent.info.run_id}?{ml}", 1250, False),
             ("mlflow_child.png", f"{base}/runs/{child.info.run_id}?{ml}", 950, False),
             ("mlflow_flipped.png", f"{base}/runs/{child.info.run_id}/artifacts/flipped_samples.json?{ml}", 900, False)]
    written = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        for name, url, height, table in shots:
            page.set_viewport_size({"width": 1600, "height": height})
            page.goto(url, wait_until="load")
            time.sleep(8)  # the single-page app renders after its requests return (it keeps polling: no idle state)
            close = page.get_by_role("button", name="Close")
            if close.count():
                close.first.click()  # the assistant side panel
            more = page.get_by_text("Show more", exact=True)
            if not table and more.count():
                more.first.click()  # the whole description: the parent's summary table, a child's report
                time.sleep(1)
            page.screenshot(path=str(out / name))
            written.append(out / name)
        browser.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--sweep", nargs="*", default=["experiment=embedded_gate"])
    parser.add_argument("--experiment", default="screenshots", help="the experiment to show (with --store)")
    parser.add_argument("--store", type=Path, help="a directory from an earlier call: its runs are shown, no sweep runs")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    root = args.store or Path(tempfile.mkdtemp(prefix="runner-screens-"))
    print(f"store: {root}")
    server, uri = start_server(root)
    try:
        if args.store is None:
            env = os.environ | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
            cmd = [sys.executable, "-m", "runner", "-m", *args.sweep, f"tracking.tracking_uri={uri}",
                   "tracking.experiment=screenshots", f"hydra.sweep.dir={root / 'sweep'}"]
            status = subprocess.run(cmd, cwd=root, env=env).returncode
            print(f"sweep exit status {status}")
        for path in shoot(uri, args.out, args.chromium, args.experiment):
            print(f"wrote {path}")
    finally:
        os.killpg(server.pid, 15)


if __name__ == "__main__":
    main()
