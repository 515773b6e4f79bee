"""Any lm-evaluation-harness task (``task=lm_eval``): lm-eval's task definitions, our backends, caching,
references and statistics. The config is here; ``loading`` finds and trusts the task files, ``translate``
maps lm-eval's requests to ours and back, ``model`` is an lm-eval model over our answerer, ``evaluator``
is the task itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, List, Optional

from runner.contract.task_config import TaskConfig


@dataclass
class HarnessTaskConfig(TaskConfig):
    """An lm-evaluation-harness task or group, run by the runner (evaluators/tasks/harness/)."""

    METRICS_FROM_DEFINITION: ClassVar[bool] = True  # lm-eval's metric_list, checked when the task loads
    # a task or group name known to lm-eval's TaskManager (installed tasks, or the YAMLs under include_path)
    lm_eval_task: str = ""  # required: empty (not ???) so that the run directory, which names the task, resolves
    include_path: Optional[str] = None  # a directory of local task YAMLs, searched before the installed tasks
    # task files may run Python (a tag resolving to !function) only when this is true (as model.trust_remote_code);
    # never inherited by runner.extend from a run directory
    trust_include_code: bool = False
    # directories outside include_path whose files a task file may include (include: ../x.yaml, /abs/x.yaml)
    include_allow: List[str] = field(default_factory=list)
    yaml_max_kb: int = 1024  # each task file read for the run (under include_path, or included), in KiB
    yaml_max_nodes: int = 100_000  # each task file's nodes with its aliases expanded (a billion-laughs file is refused)
    num_fewshot: Optional[int] = None  # null: the task's own num_fewshot (0 when it has none)
    fewshot_seed: int = 1234  # lm-eval's --fewshot_random_seed default
    # "auto": the task's first metric; its direction always comes from lm-eval's higher_is_better
    metric: str = "auto"
    filter: str = "auto"  # which of the task's filter pipelines scores (e.g. strict-match); auto: the first
    # lm-eval's per-sample values times this; null: 100 for lm-eval's fractions (acc, exact_match...) so they read in
    # percent like our references, else 1 (perplexities, BLEU)
    scale: Optional[float] = None
    fewshot_as_multiturn: bool = False  # with apply_chat_template: few-shot examples as separate chat turns
    # lm-eval's --gen_kwargs syntax ("max_gen_toks=64,temperature=0"), merged over the task's generation_kwargs
    gen_kwargs: Optional[str] = None
    # meta field naming each sample's subtask: a group's subtasks are its clusters (stats.cluster=auto)
    cluster_key: Optional[str] = "subtask"
    chance_level: Optional[float] = None  # multiple choice: 100 / options, else none
    max_input_len: int = 4096
    # loglikelihood_rolling: every token of a text is scored, in lm-eval's disjoint rolling windows of at most this
    # many tokens (lm-eval's max_length); null: task.max_input_len. It changes the scores: part of the reference key
    rolling_window: Optional[int] = None
    max_output_len: int = 256  # lm-eval's default max_gen_toks; a task's own max_gen_toks wins up to this
    max_batch_size: int = 32


CONFIG = HarnessTaskConfig
"""The task's schema, registered as ``schema_task_harness``."""
