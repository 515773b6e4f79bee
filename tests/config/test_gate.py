"""``gate=<policy>``: the shipped policies, a job's entry written into its config (hence logged), and the
mistakes a policy can hold, each refused with where, what was given and what is allowed."""

from __future__ import annotations

import re

import pytest
from omegaconf import OmegaConf

from runner.config.gate import apply_policy
from runner.contract.errors import ConfigError
from runner.job.flow import typed
from runner.tracking.provenance import flatten
from tests.conftest import ROOT, compose, run_cli


def job(*overrides: str, tmp: str = "/tmp/runner-gate-test"):
    return compose(["gate=embedded_release", f"output_dir={tmp}", *overrides])


def task_names() -> set[str]:
    """``name:`` of every conf/task file that sets one literally."""
    names = set()
    for path in (ROOT / "conf" / "task").glob("*.yaml"):
        match = re.search(r"^name: ([\w]+)$", path.read_text(), re.M)
        if match:
            names.add(match[1])
    return names


@pytest.mark.parametrize("policy", ["embedded_release", "llama31_8b_fp8"])
def test_the_shipped_policies_are_valid_and_name_only_tasks_that_exist(policy):
    cfg = compose([f"gate={policy}", "output_dir=/tmp/x"])
    from runner.sweep.policy import check_policy

    check_policy(cfg.gate)
    assert cfg.gate.name == policy and set(cfg.gate.tasks) <= task_names()


def test_no_gate_changes_nothing():
    cfg = compose(["output_dir=/tmp/x"])
    before = OmegaConf.to_container(cfg)
    apply_policy(cfg)
    assert cfg.gate is None and OmegaConf.to_container(cfg) == before


def test_the_tasks_entry_decides_the_job_and_is_logged_with_it():
    mmlu = typed(job("task=mmlu_0shot", "gate.tasks.mmlu.alpha=0.01", "gate.tasks.mmlu.beta=0.1"))
    assert (mmlu.stats.tolerance, mmlu.stats.tolerance_unit, mmlu.task.alpha, mmlu.task.beta) == (10, "points", 0.01, 0.1)
    cfg = job("task=perplexity")
    typed(cfg)
    params = flatten(OmegaConf.to_container(cfg, resolve=True))  # what the job logs as its MLflow params
    assert params["stats.tolerance"] == 5 and params["stats.tolerance_unit"] == "percent"
    assert params["gate.name"] == "embedded_release" and params["gate.tasks.perplexity.tier"] == "supporting"
    assert params["task.alpha"] == 0.01  # the task's own: the policy names none


@pytest.mark.parametrize("overrides, where, given", [
    (["gate.tasks.mmlu.tier=essential"], "gate.tasks.mmlu.tier", "essential"),
    (["gate.tasks.mmlu.tolerance_unit=percentage"], "gate.tasks.mmlu.tolerance_unit", "percentage"),
    (["gate.tasks.mmlu.tolerance=-1"], "gate.tasks.mmlu.tolerance", "-1.0"),
    (["gate.tasks.perplexity.alpha=0.7"], "gate.tasks.perplexity.alpha", "0.7"),
    (["gate.max_supporting_failures=-1"], "gate.max_supporting_failures", "-1"),
    (["gate.unlisted=ignore"], "gate.unlisted", "ignore"),
    (["gate.tasks.mmlu.tier=advisory"], "gate.tasks", "mmlu: advisory, perplexity: supporting"),
])
def test_a_bad_policy_is_refused_with_where_and_what(overrides, where, given):
    with pytest.raises(ConfigError) as err:
        typed(job("task=mmlu_0shot", *overrides))
    assert f"gate (embedded_release): {where}" in err.value.where and str(err.value.given) == given
    assert err.value.allowed or err.value.fix


def test_a_task_outside_the_policy_is_refused_unless_unlisted_tasks_are_advisory():
    with pytest.raises(ConfigError, match="task arc_easy is not in the release policy embedded_release") as err:
        typed(job("task=arc_easy"))
    assert err.value.allowed == "mmlu, perplexity" and "gate.unlisted=advisory" in err.value.fix
    advisory = typed(job("task=arc_easy", "gate.unlisted=advisory"))
    assert advisory.stats.tolerance is None  # judged with its own settings


def test_two_tolerances_for_one_task_are_refused():
    with pytest.raises(ConfigError, match="two tolerances") as err:
        typed(job("task=mmlu_0shot", "stats.tolerance=2"))
    assert err.value.given == "policy 10 points, stats.tolerance 2 points"
    assert typed(job("task=mmlu_0shot", "stats.tolerance=10")).stats.tolerance == 10  # the same one: fine


def test_a_misspelt_policy_key_fails_composition_and_a_bad_tier_stops_the_sweep_before_any_job(tmp_path):
    with pytest.raises(ConfigError, match="unknown key under a typed config group") as err:
        typed(job("task=mmlu_0shot", "+gate.tasks.mmlu.tolerence=3"))
    assert err.value.where == "gate.tasks.mmlu.tolerence" and "tolerance_unit" in err.value.allowed
    proc = run_cli(["-m", "backend=fake", "tracking=none", "gate=embedded_release", "gate.tasks.mmlu.tier=essential",
                    "task=mmlu_0shot,perplexity", f"hydra.sweep.dir={tmp_path / 'sweep'}"], tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "error: unknown tier" in proc.stderr and "gate.tasks.mmlu.tier" in proc.stderr
    assert "allowed: critical, supporting, advisory" in proc.stderr
    assert not list((tmp_path / "sweep").glob("*/report.json"))
