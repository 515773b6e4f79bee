"""LongBench v1 (``task=longbench_v1``) as TensorRT-LLM's ``LongBenchV1`` evaluator runs it: lm-eval's
``longbench`` group (its 21 subtasks' prompts, generation settings and metrics, as installed), through the
``task=lm_eval`` path (``evaluators/tasks/harness/``). The config is here; ``local`` writes task files that
run the installed definitions over a local copy of the data and reads the group tree; ``evaluator`` is the
task (upstream's average of the subgroups, the reference key of upstream's entries)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from evaluators.tasks.harness import HarnessTaskConfig


@dataclass
class LongBenchV1TaskConfig(HarnessTaskConfig):
    """task=lm_eval's settings with upstream's defaults, a local copy of the data and the average to take."""

    lm_eval_task: str = "longbench"  # upstream's group; a subgroup or subtask name runs that part (keyed)
    # a local LongBench copy: a directory of <subset>.jsonl files (THUDM/LongBench's data.zip, data/ inside it
    # or not); the installed task definitions run over it (null: lm-eval reads its Hub dataset)
    local_dir: Optional[str] = None
    # categories: upstream's number, the unweighted mean of the subgroups' unweighted means of their subtasks
    # (each document weighted so the plain mean of per-document scores is that average); documents: each
    # document counts once (another protocol, keyed average=documents)
    average: str = "categories"


CONFIG = LongBenchV1TaskConfig
"""The task's schema, registered as ``schema_task_longbench_v1``."""
