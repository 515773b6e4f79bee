"""Your own checkpoint: its identity (reference key, run name) comes from the checkpoint, never
from the default model's config; a named model pointed at another architecture is refused."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from runner.contract.errors import ConfigError
from runner.backends.identity import check_architecture, checkpoint_id
from tests.conftest import ROOT, compose, run_cli, run_in_process

LLAMA_8B = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 128256}


def _checkpoint(root, name: str, **config) -> str:
    path = root / name
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


def test_the_default_model_takes_its_identity_from_the_checkpoint(tmp_path):
    declared = _checkpoint(tmp_path, "ckpt-a", _name_or_path="my-org/My-Model-7B", model_type="llama")
    anonymous = _checkpoint(tmp_path, "Qwen-finetune", model_type="qwen2")
    cases = [([], "HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2_135m"),
             ([f"model.path={declared}"], "my-org/My-Model-7B", "my-model-7b"),
             ([f"model.path={anonymous}"], "Qwen-finetune", "qwen-finetune"),
             (["model.path=some-org/Served-Model"], "some-org/Served-Model", "served-model"),
             ([f"model.path={anonymous}", "model.hf_id=org/given"], "org/given", "qwen-finetune")]
    for overrides, hf_id, name in cases:
        model = OmegaConf.to_object(compose([*overrides, "output_dir=/tmp/x"]).model)
        assert (model.hf_id, model.name) == (hf_id, name), overrides
        # the composed job names the user's checkpoint only: the embedded asset is not read, so it is not shown
        assert model.embedded == (None if overrides else "smollm2_135m_gguf"), overrides


def test_a_local_path_in_name_or_path_is_not_an_identity(tmp_path):
    path = _checkpoint(tmp_path, "exported", _name_or_path=str(tmp_path))
    assert checkpoint_id(path, "fallback") == "exported"


def test_a_named_model_refuses_a_checkpoint_of_another_architecture(tmp_path):
    qwen = _checkpoint(tmp_path, "q", model_type="qwen2", hidden_size=3584, num_hidden_layers=28, vocab_size=152064)
    llama = _checkpoint(tmp_path, "l", **LLAMA_8B, torch_dtype="bfloat16")
    wrapped = _checkpoint(tmp_path, "w", model_type="llava", text_config=LLAMA_8B)
    named = OmegaConf.to_object(compose(["model=llama31_8b", f"model.path={llama}", "output_dir=/tmp/x"]).model)
    check_architecture(named)  # a Llama-3.1-8B checkpoint (e.g. quantized) keeps the configured identity
    check_architecture(OmegaConf.to_object(compose(["model=llama31_8b", f"model.path={wrapped}", "output_dir=/tmp/x"]).model))
    with pytest.raises(ConfigError, match="another model than model=llama31_8b"):
        check_architecture(OmegaConf.to_object(compose(["model=llama31_8b", f"model.path={qwen}", "output_dir=/tmp/x"]).model))


def test_recording_a_reference_for_your_own_checkpoint_never_touches_the_default_models(tmp_path):
    refs = tmp_path / "refs"
    ckpt = _checkpoint(tmp_path, "ckpt", _name_or_path="my-org/my-model")
    gsm8k = ["backend=fake", "task=gsm8k", "task.dataset.source=local",
             f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "task.num_samples=2"]
    proc = run_cli([*gsm8k, f"model.path={ckpt}", "tracking=none", "reference.mode=record", f"reference.dir={refs}"],
                   tmp_path, env={"HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    from ruamel.yaml import YAML

    recorded = YAML(typ="safe").load((refs / "gsm8k.yaml").read_text())
    assert list(recorded) == ["my-org/my-model"]
    assert "gsm8k | my-org/my-model" in proc.stdout and "SmolLM2" not in proc.stdout
    assert list(tmp_path.glob("outputs/*/*-my-model-none-gsm8k"))

    # the job refuses it (not Hydra's command line): its glue in this process
    wrong = run_in_process([*gsm8k, "model=llama31_8b",
                            f"model.path={_checkpoint(tmp_path, 'q', **(LLAMA_8B | {'hidden_size': 1}))}",
                            "tracking=none", "reference.mode=skip", f"output_dir={tmp_path / 'wrong'}"], tmp_path)
    assert wrong.returncode == 1 and "where:   model.path" in wrong.stderr and "Traceback" not in wrong.stderr
