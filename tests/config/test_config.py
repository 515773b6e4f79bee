"""Every config option composes through Hydra's compose API and builds its objects cheaply."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from runner.contract.build import build
from runner.contract.errors import ConfigError
from tests.conftest import ROOT, compose

GROUPS = ["model", "quant", "task", "backend", "tracking"]


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (ROOT / "conf" / group).glob("*.yaml"))


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_option_composes(group, option):
    # task=lm_eval needs the lm-eval task's name and is named after it (lm_eval_<task>)
    required = ["task.lm_eval_task=hellaswag"] if (group, option) == ("task", "lm_eval") else []
    cfg = compose([f"{group}={option}", "output_dir=/tmp/x", *required])
    # SCORE tasks name themselves after the task and its dataset (score_prompt -> score_prompt_mmlu_pro);
    # a preset of a task carries the task's name (perplexity_slimpajama -> perplexity, one reference file)
    assert cfg[group].name == option or (option.startswith("score_") and cfg[group].name.startswith(option + "_")) \
        or (group == "task" and option.startswith(cfg[group].name + "_")) or (required and cfg.task.name == "lm_eval_hellaswag")
    OmegaConf.to_object(cfg[group] if group != "task" else cfg.task)  # schema-valid


def test_defaults_are_the_documented_ones():
    cfg = compose(["output_dir=/tmp/x"])
    assert (cfg.model.name, cfg.quant.name, cfg.task.name, cfg.backend.name, cfg.tracking.name) == (
        "smollm2_135m", "none", "mmlu", "hf", "mlflow")
    assert cfg.model.hf_id == "HuggingFaceTB/SmolLM2-135M-Instruct"
    # TensorRT-LLM's MMLU parameters
    t = cfg.task
    assert (t.alpha, t.beta, t.sigma, t.num_samples, t.max_input_len, t.max_output_len) == (0.05, 0.2, 50.0, 4096, 4094, 2)


@pytest.mark.parametrize("name,hf_id", [
    ("llama31_8b", "meta-llama/Llama-3.1-8B-Instruct"), ("llama32_1b", "meta-llama/Llama-3.2-1B"),
    ("qwen25_7b", "Qwen/Qwen2.5-7B-Instruct"), ("mistral7b_v03", "mistralai/Mistral-7B-Instruct-v0.3"),
])
def test_model_reference_keys(name, hf_id):
    assert compose([f"model={name}", "output_dir=/tmp/x"]).model.hf_id == hf_id


def test_typed_overrides():
    cfg = compose(["task.num_samples=256", "seed=1", "backend.dtype=float32", "output_dir=/tmp/x"])
    assert cfg.task.num_samples == 256 and cfg.seed == 1 and cfg.backend.dtype == "float32"


@pytest.mark.parametrize("override,fragment", [
    ("task.num_samples=abc", "task.num_samples"),
    ("model.no_such_key=1", "no_such_key"),
    ("task.higher_is_better=maybe", "task.higher_is_better"),
])
def test_wrong_types_and_keys_are_rejected(override, fragment):
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException) as info:
        compose([override])
    assert fragment in str(info.value) or fragment in str(info.value.__cause__)


def test_objects_build_without_heavy_imports():
    code = (
        "import sys; from tests.conftest import compose; from runner.contract.build import build;"
        "from runner.contract.backend import TaskLimits;"
        "cfg = compose(['output_dir=/tmp/x']);"
        "from omegaconf import OmegaConf;"
        "build(OmegaConf.to_object(cfg.backend), 'backend', model=OmegaConf.to_object(cfg.model), quant=OmegaConf.to_object(cfg.quant), limits=TaskLimits(10, 2));"
        "build(OmegaConf.to_object(cfg.task), 'task'); build(OmegaConf.to_object(cfg.tracking), 'tracking');"
        "heavy = [m for m in ('torch', 'transformers', 'mlflow', 'datasets') if m in sys.modules];"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout


def test_only_project_targets_are_built():
    cfg = compose(["output_dir=/tmp/x"])
    cfg.tracking._target_ = "os.system"
    with pytest.raises(ConfigError, match="only classes of this project"):
        build(OmegaConf.to_object(cfg.tracking), 'tracking')


def test_cfg_job_and_help_print():
    job = subprocess.run([sys.executable, "-m", "runner", "--cfg", "job", "--package", "model", "--resolve"], cwd=ROOT,
                         capture_output=True,
                         text=True)
    assert job.returncode == 0 and "hf_id: HuggingFaceTB/SmolLM2-135M-Instruct" in job.stdout
    helped = subprocess.run([sys.executable, "-m", "runner", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert helped.returncode == 0
    for group in GROUPS:
        assert f"{group}:" in helped.stdout
    assert "smollm2_135m" in helped.stdout and "Exit status" in helped.stdout
