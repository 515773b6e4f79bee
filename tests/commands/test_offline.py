"""Offline means offline: with ``HF_HUB_OFFLINE`` unset and a Hub endpoint that refuses connections, no command
waits on the Hugging Face libraries' retries; the first failing lookup ends with the clear message."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT

DEAD_HUB = "http://127.0.0.1:9"  # the discard port: nothing listens there, a connection is refused at once
HUB_TASK = """task: hub_probe
dataset_path: Rowan/hellaswag
output_type: multiple_choice
validation_split: validation
doc_to_text: "{{ctx}}"
doc_to_target: "{{label}}"
doc_to_choice: "{{endings}}"
metric_list:
  - metric: acc
"""


def offline_run(module: str, args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    env |= {"PYTHONPATH": str(ROOT), "HF_ENDPOINT": DEAD_HUB}
    for proxy in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        env.pop(proxy, None)
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=300)
    return result, time.monotonic() - start


def test_the_planner_plans_a_hub_task_without_retrying_the_hub(tmp_path):
    """task=perplexity tries the benchmark's own dataset (SlimPajama on the Hub) first: five retries, about 25 s,
    before this fix; now one refused probe and the packaged copy's plan."""
    result, elapsed = offline_run("runner.plan", ["task=perplexity"], tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Retry" not in result.stderr + result.stdout
    assert "the packaged copy" in result.stdout and "theta" in result.stdout
    assert elapsed < 20, elapsed  # the libraries' back-off alone sleeps 1 + 2 + 4 + 8 + 8 s


def test_an_lm_eval_hub_task_ends_with_the_clear_message_at_the_first_lookup(tmp_path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "hub_probe.yaml").write_text(HUB_TASK)
    result, elapsed = offline_run("runner", ["task=lm_eval", "task.lm_eval_task=hub_probe",
                                             f"task.include_path={tmp_path / 'tasks'}", "dry_run=true",
                                             f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    text = result.stdout + result.stderr
    assert "Retry" not in text and "Traceback" not in text
    assert "lm-eval could not load the task's dataset (the Hugging Face Hub does not answer: http://127.0.0.1:9" in text
    assert "check the network, a proxy or HF_ENDPOINT" in text
    assert elapsed < 40, elapsed
