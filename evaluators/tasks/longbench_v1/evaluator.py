"""``task=longbench_v1``: lm-eval's ``longbench`` group judged as TensorRT-LLM's accuracy suite judges it.

Read at NVIDIA/TensorRT-LLM: ``tensorrt_llm/evaluate/lm_eval.py`` (class ``LongBenchV1``: lm-eval's group
``longbench``, the chat template on, sampling left to each subtask's ``generation_kwargs``; its number is the
unweighted mean of the subgroups' ``score``, times 100) and the ``LongBenchV1`` accuracy task of
``tests/integration/defs/accuracy/accuracy_core.py`` (alpha 0.05, beta 0.2, sigma 50, n 4750 = every
document, prompts truncated to 128000 tokens; ``MAX_OUTPUT_LEN`` 1024 is replaced by each subtask's
``max_gen_toks``).

- Everything ``task=lm_eval`` does (lm-eval builds and scores each document) with the installed definitions.
- The metric ``score`` is upstream's number: every group of lm-eval's tree averages its children unweighted, so
  a subtask's documents carry ``share / (its documents / all documents)`` of weight, where ``share`` is its part
  of those nested means; a document's score is its lm-eval ``score`` times 100 times that weight, and the plain
  mean over all documents is the group's score exactly. A seeded subset (allocated to the subtasks in proportion
  to their sizes) estimates it. ``score_documents`` is the plain mean of the unweighted documents, and lm-eval's
  own aggregates are reported per subtask and per group (``lm_eval/<name>/score``, fractions).
- The reference key is upstream's: ``target_sparsity=X`` (upstream keys every entry by the skip-softmax
  attention sparsity; 0.0 is dense attention, what a backend runs without TensorRT-LLM's
  ``sparse_attention_config``), then only what differs from upstream's protocol.
"""

from __future__ import annotations

import json
import tempfile
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from evaluators.checks import check_choice
from evaluators.deviations import chat_deviation, short_hash
from evaluators.metrics import mean
from evaluators.tasks.harness.evaluator import HarnessEvaluator
from evaluators.tasks.harness.loading import config_hash
from evaluators.tasks.longbench_v1.local import (check_extras, definitions, groups_under, rapidfuzz_as_fuzzywuzzy, shares,
                                                 write_local_tasks)
from runner.contract.errors import ConfigError, DataError
from runner.contract.evaluator import Sample, ScoredSample

UPSTREAM_TASK = "longbench"
UPSTREAM_MAX_INPUT = 128000  # accuracy_core's LongBenchV1.MAX_INPUT_LEN, sent as truncate_prompt_tokens
AVERAGES = ("categories", "documents")
DENSE = 0.0


class LongBenchV1Evaluator(HarnessEvaluator):
    """lm-eval's LongBench with upstream's average and reference key."""

    def __init__(self, config: Any) -> None:
        check_choice(config.average, AVERAGES, "average", "task.average", " (upstream: categories)")
        check_extras()
        self.local = config.local_dir is not None
        if self.local:
            if config.include_path is not None:
                raise ConfigError("give the LongBench copy or task files, not both", where="task.local_dir",
                                  given=f"task.local_dir={config.local_dir}, task.include_path={config.include_path}",
                                  fix="task.local_dir runs the installed definitions over the copy; "
                                      "task.include_path runs your own task files (keyed by their hash)")
            scratch = tempfile.TemporaryDirectory(prefix="runner-longbench-")
            weakref.finalize(self, scratch.cleanup)
            config.include_path = str(write_local_tasks(config.local_dir, config.lm_eval_task, Path(scratch.name)))
        self.own_files = config.include_path is not None and not self.local
        try:
            with rapidfuzz_as_fuzzywuzzy():  # the metrics module binds its `fuzz` when lm-eval loads it
                super().__init__(config)
        except DataError as err:
            if self.local or self.own_files:
                raise
            raise DataError(err.what, where=err.where, given=err.given,
                            fix="offline, point task.local_dir at a local LongBench copy (a directory of <subset>.jsonl "
                                "files, e.g. THUDM/LongBench's data.zip); online, unset HF_HUB_OFFLINE") from None
        finally:
            if self.local:  # the written files are this object's: a config built again writes its own
                config.include_path = None
        if self.local:
            self.source_used = "lm-eval tasks (installed) over task.local_dir"
        defs = definitions()
        tree = dict(shares(defs, config.lm_eval_task)) if not self.own_files else {}
        self.shares = {s.name: tree.get(s.name, 1.0 / len(self.subtasks)) for s in self.subtasks}
        self.groups = {g: defs.groups[g] for g in groups_under(defs, config.lm_eval_task)} if not self.own_files else {}
        self.target_sparsity = DENSE
        self.sparse_other: str | None = None
        self._weights: dict[str, float] = {}

    # ------------------------------------------------------------------ reference key
    def bind_backend(self, info: Any) -> None:
        """The skip-softmax sparsity the backend runs, read from the LLM arguments it was given
        (``backend.extra_llm_api_options``' ``sparse_attention_config``, TensorRT-LLM's
        ``SkipSoftmaxAttentionConfig``): one numeric ``target_sparsity`` is upstream's key; any other sparse
        attention (a threshold, per-phase targets, another algorithm) is keyed by a hash of its config."""
        self.target_sparsity, self.sparse_other = DENSE, None
        options = json.loads((getattr(info, "details", None) or {}).get("extra_llm_api_options") or "{}")
        sparse = options.get("sparse_attention_config")
        if not sparse:
            return
        sparsity = sparse.get("target_sparsity") if isinstance(sparse, dict) else None
        if (isinstance(sparsity, (int, float)) and sparse.get("algorithm", "skip_softmax") == "skip_softmax"
                and sparse.get("threshold_scale_factor") is None):  # a threshold takes precedence over the target
            self.target_sparsity = float(sparsity)
        else:
            self.sparse_other = short_hash(json.dumps(sparse, sort_keys=True, default=str))

    def extra_acc_spec(self) -> str | None:
        """``target_sparsity=X``, then what differs from upstream's protocol, in a fixed order."""
        c = self.config
        parts = [f"target_sparsity={self.target_sparsity!r}"]
        if self.sparse_other:
            parts = [f"sparse_attention={self.sparse_other}"]
        if c.lm_eval_task != UPSTREAM_TASK:
            parts.append(f"lm_eval_task={c.lm_eval_task}")
        if self.own_files:
            parts.append(f"task_hash={config_hash(self.subtasks)}")
        if c.average != "categories":
            parts.append(f"average={c.average}")
        if self.metric != "score":
            parts.append(f"metric={self.metric}")
        if c.num_fewshot:  # upstream's subtasks are 0-shot; examples come with their sampler's seed
            parts += [f"num_fewshot={c.num_fewshot}", f"fewshot_seed={c.fewshot_seed}"]
        if self.filter != "none":
            parts.append(f"filter={self.filter}")
        if c.gen_kwargs:
            parts.append("gen_kwargs=" + short_hash(c.gen_kwargs))
        if c.max_input_len != UPSTREAM_MAX_INPUT:
            parts.append(f"max_input_len={c.max_input_len}")
        parts += chat_deviation(c, upstream_chat=True)
        if c.fewshot_as_multiturn:
            parts.append("fewshot_as_multiturn=true")
        return ",".join(parts)

    # ------------------------------------------------------------------ upstream's average
    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        out = super().samples(num_samples, seed)
        total = sum(len(self.docs(s)) for s in self.subtasks)
        self._weights = {s.name: (self.shares[s.name] * total / len(self.docs(s))
                                  if self.config.average == "categories" else 1.0) for s in self.subtasks}
        return out

    def _scored(self, sample: Sample) -> ScoredSample:
        scored = super()._scored(sample)
        weight = self._weights.get(sample.meta["subtask"], 1.0)
        meta = scored.meta | {"weight": weight, "unweighted": scored.score}
        return replace(scored, score=scored.score * weight, meta=meta)

    def score_bounds(self) -> tuple[float, float] | None:
        """lm-eval's per-document LongBench score is within [0, 1] (F1, ROUGE, similarity, counts), times the scale
        and the subtask's weight."""
        return (0.0, self.scale * max(self._weights.values(), default=1.0))

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """The metric, the plain per-document mean, and lm-eval's aggregates per subtask and per group."""
        out = super().aggregate(scored)
        if not scored:
            return out
        out[f"{self.metric}_documents"] = mean(s.meta.get("unweighted", s.score) for s in scored)
        if len(self.subtasks) > 1:
            for group in self.groups:
                value = self._group_value(group, out)
                if value is not None:
                    out[f"lm_eval/{group}/{self.metric}"] = value
        return out

    def _group_value(self, name: str, out: dict[str, float]) -> float | None:
        """lm-eval's unweighted mean of the children present (None when none is)."""
        key = f"lm_eval/{name}/{self.metric}"
        if name not in self.groups:
            return out.get(key)
        values = [v for v in (self._group_value(child, out) for child in self.groups[name]) if v is not None]
        return sum(values) / len(values) if values else None
