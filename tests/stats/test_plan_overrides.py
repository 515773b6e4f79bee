"""``python -m runner.plan`` speaks the runner's language: Hydra overrides select the same entry the
runner would be judged against, extra_acc_spec included."""

from __future__ import annotations

import json
import subprocess

from runner.stats.numerics.ztest import compute_threshold
from tests.conftest import ROOT
from tests.helpers.in_process import call_main


def plan(*args: str) -> subprocess.CompletedProcess:
    """``python -m runner.plan ARGS`` by its entry point in this process, offline as every test is (the command
    line itself: tests/stats/test_plan.py)."""
    from runner.commands.plan import main

    return call_main(main, args, ROOT)


def test_overrides_find_upstreams_entry_and_its_threshold():
    res = plan("task=mmlu", "model=llama31_8b", "quant=fp8_kv", "task.dataset.source=hub", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    # references/mmlu.yaml: Llama-3.1-8B-Instruct, quant_algo FP8 + kv_cache_quant_algo FP8: 67.87 (upstream's entry)
    assert out["reference"] == 67.87 and out["num_samples"] == 4096
    assert out["threshold"] == compute_threshold(67.87, 4096, 50.0, 0.05, True)


def test_the_reference_key_carries_the_tasks_protocol_parts():
    # the README's command: no source named, so the planner asks about the benchmark's own dataset (upstream's entry)
    res = plan("task=mmlu", "model=llama31_8b", "quant=fp8")
    assert res.returncode == 0, res.stderr
    assert "reference    67.930" in res.stdout and "dataset      the benchmark's own (cais/mmlu" in res.stdout
    # 67.93 + z(0.05) * sqrt(2 * 50^2 / 4096) = 67.93 - 1.644854 * 1.104854 = 66.113
    assert "threshold    66.113" in res.stdout
    # the packaged copy is a different protocol (dataset=packaged in the key): upstream's entry does not apply
    res = plan("task=mmlu", "model=llama31_8b", "quant=fp8_kv", "task.dataset.source=packaged")
    assert res.returncode == 1 and "extra_acc_spec=dataset=packaged" in res.stderr and "Traceback" not in res.stderr
    # an n the run sets is the n planned, as the run honours it: sqrt(2 * 50^2 / 512) = 3.125 -> 67.93 - 5.140
    res = plan("task=mmlu", "model=llama31_8b", "quant=fp8", "task.num_samples=512", "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["num_samples"] == 512
    assert abs(json.loads(res.stdout)["threshold"] - 62.790) < 1e-3
    # the embedded model's own 0-shot log-likelihood entry (references/mmlu.yaml) is found with its key
    res = plan("task=mmlu_0shot", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["reference"] == 21.0526


def test_bad_overrides_are_messages():
    res = plan("task=nosuch")
    assert res.returncode == 1 and "do not compose" in res.stderr and "Traceback" not in res.stderr
    res = plan("task=mmlu", "--task", "mmlu", "--model", "x/y")
    assert res.returncode == 2 and "not both" in res.stderr


def test_the_job_at_hand_offline_against_its_baseline():
    # the newcomer's command: the Hub corpus is out of reach (offline), so the packaged corpus's entry is planned,
    # and reference.against=baseline plans against the unquantized entry, as the run would be judged
    res = plan("task=perplexity", "quant=w4a16", "reference.against=baseline", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    # references/perplexity.yaml entry 0, SmolLM2-135M unquantized on the packaged corpus: 15.4213 over 40 documents
    assert (out["reference"], out["num_samples"], out["alpha"], out["sigma"]) == (15.4213, 40, 0.01, 4.48)
    res = plan("task=perplexity", "quant=w4a16", "reference.against=baseline")
    assert "the unquantized entry" in res.stdout and "quant_algo=W4A16" not in res.stdout
