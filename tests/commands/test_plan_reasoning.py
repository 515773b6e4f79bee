"""``runner.plan`` with reasoning models and sampled runs: the task's sampling and chat-template arguments
compose into the reference key upstream's tables use, and a backend that cannot honour them is refused
before any request. Reference values are read by hand from the shipped tables (upstream's)."""

from __future__ import annotations

import pytest

from runner.commands.plan_job import planned_job
from runner.contract.errors import ConfigError, ReferenceError_

SAMPLED = ["task.sampling.temperature=0.8", "task.sampling.top_p=0.95", "task.sampling.seed=0"]


def test_a_sampled_run_finds_upstreams_sampled_entry():
    # references/mmlu.yaml (upstream): Llama-3.1-8B-Instruct, quant_algo FP8, extra_acc_spec temperature=0.8,top_p=0.95
    plan = planned_job(["model=llama31_8b", "quant=fp8", "task=mmlu", *SAMPLED])
    assert plan.spec.extra_acc_spec == "temperature=0.8,top_p=0.95" and plan.reference.value == 64.62
    greedy = planned_job(["model=llama31_8b", "quant=fp8", "task=mmlu"])
    assert greedy.spec.extra_acc_spec is None and greedy.reference.value == 67.93


def test_a_reasoning_model_with_its_template_defaults_keeps_upstreams_key():
    # references/gsm8k.yaml (upstream): Qwen3/Qwen3-8B, unquantized, 87.1114 (measured without chat kwargs)
    plan = planned_job(["model=qwen3_8b", "task=gsm8k", "task.dataset.source=hub"])
    assert plan.model == "Qwen3/Qwen3-8B" and plan.reference.value == 87.1114
    with pytest.raises(ReferenceError_) as err:  # thinking switched off is another protocol: its own key
        planned_job(["model=qwen3_8b", "task=gsm8k", "task.dataset.source=hub", "task.apply_chat_template=true",
                     "+task.chat_template_kwargs.enable_thinking=false"])
    assert "chat_template=true,enable_thinking=False" in str(err.value)


def test_a_backend_that_cannot_pass_template_arguments_is_refused_before_any_request(tmp_path):
    from runner.job.flow import run
    from tests.conftest import compose

    cfg = compose(["backend=fake", "task=gsm8k", "task.num_samples=2", "task.apply_chat_template=true",
                   "+task.chat_template_kwargs.enable_thinking=false", "tracking=none", "reference.mode=skip",
                   f"output_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="cannot pass keyword arguments to a chat template") as err:
        run(cfg)
    assert "backend=fake" in str(err.value) and not (tmp_path / "samples.jsonl").exists()
