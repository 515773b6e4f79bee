"""SCORE robustness tasks (Nalbandyan et al., NVIDIA, NAACL 2025): option order, prompt and sampling
robustness on MMLU-Pro, AGIEval and MATH, as lm-evaluation-harness's ``tasks/score`` computes them.

One runner sample is one question; its requests are all of that question's variants, so a seeded
question subset keeps every variant of a sampled question, and the per-sample score (the
question's accuracy over its variants) feeds the core hypothesis test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from omegaconf import MISSING

from runner.contract.task_config import TaskConfig



@dataclass
class ScoreTaskConfig(TaskConfig):
    """SCORE robustness (evaluators/tasks/score/): one sample per question, one request per variant."""
    chance_level: Optional[float] = None  # by the questions' option counts (ScoreEvaluator.chance_level)
    # the source question behind the variants; one sample already holds all of a question's variants (its score is
    # their mean), so each cluster is one sample and the design effect is 1: the clustering is built in
    cluster_key: Optional[str] = "question"

    family: str = "mmlu_pro"  # mmlu_pro | agieval | math
    robustness: str = MISSING  # prompt | option_order | non_greedy
    faithful: bool = True  # false: fix upstream's documented quirks (a protocol deviation, in extra_acc_spec)
    # task.dataset as every task: source auto (local when local_path is set, else the Hub) | hub | local;
    # local_path: a family's folder, or one root holding mmlu_pro/, agieval/<subset>/, math/<subject>/
    subsets: Optional[list[str]] = None  # AGIEval / MATH subsets; None: all seven, as upstream
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])  # non_greedy: one request per seed
    temperature: float = 0.7  # non_greedy sampling temperature (nothing else set, as upstream)
    bootstrap_samples: int = 1000  # question-level bootstrap replicates of the consistency rate
    bootstrap_seed: int = 0
    ci_level: float = 0.95


CONFIG = ScoreTaskConfig
"""The task's schema, registered as ``schema_task_score``."""