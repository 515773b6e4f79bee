"""AIME 2025 as upstream evaluates it: lm-evaluation-harness's ``aime25`` task (0.4.13), the task that
TensorRT-LLM's ``aime26`` (``tensorrt_llm/evaluate/lm_eval_tasks/aime/aime26.yaml``) says it mirrors.

- Rows: ``math-ai/aime25`` (30 problems of AIME 2025 I and II; fields ``problem``, ``answer``, ``id``),
  split ``test``; a local copy (``task.dataset.local_path``: a JSONL file or a snapshot directory) for
  offline runs. There is no packaged copy. A seeded subset when fewer than 30 are asked for.
- Prompt: ``Question: <problem>\\nAnswer:`` (``doc_to_text``), zero-shot, no chat template.
- Generation: greedy (``do_sample: false``, ``temperature: 0.0``), at most 32768 new tokens
  (``max_gen_toks``), stopped at ``Question:``, ``</s>``, ``<|im_end|>`` or ``<|eot_id|>``; one answer per
  problem (``repeats: 1``). Reasoning models are usually run sampled and with their thinking on:
  ``task.sampling`` and ``task.chat_template_kwargs`` set that (they enter the reference key).
- Scoring: lm-eval's ``process_results`` of ``lm_eval/tasks/aime/utils.py``, called as is from the installed
  lm-evaluation-harness so the grade is upstream's to the character: the text between the first and the
  last ``$`` (the whole text with fewer than two), replaced by the content of the last ``\\boxed{...}``
  when there is one, compared with the answer after the Hendrycks MATH string normalisation. 100 per
  problem solved, 0 otherwise; the metric is the mean (``exact_match`` x 100).

Deviations from that protocol enter ``extra_acc_spec``: ``split``, and the generation settings of
:func:`~evaluators.deviations.generation_deviations` (``max_output_len``, ``stop``, the chat settings).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from evaluators.base import Evaluator
from evaluators.deviations import generation_deviations
from evaluators.metrics import mean
from evaluators.responses import only_text
from runner.contract.errors import DataError, UserError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.requests import GenerationRequest, Request, Response
from runner.contract.task_config import TaskConfig

UPSTREAM_MAX_OUTPUT = 32768
UPSTREAM_STOP = ("Question:", "</s>", "<|im_end|>", "<|eot_id|>")
UPSTREAM_SPLIT = "test"
PROMPT = "Question: {problem}\nAnswer:"
INSTALL_HINT = 'pip install "lm-eval==0.4.13" (the grader of lm-eval\'s aime25 task)'


@dataclass
class AIMETaskConfig(TaskConfig):
    metric: str = "exact_match"  # lm-eval's name for the solved rate
    chance_level: Optional[float] = 0.0  # integer answers 0-999, free-form
    stop: list[str] = field(default_factory=lambda: list(UPSTREAM_STOP))


CONFIG = AIMETaskConfig
"""The task's schema, registered as ``schema_task_aime``."""


@functools.lru_cache(maxsize=1)
def upstream_grader() -> Callable[[dict, list[str]], dict[str, int]]:
    """``process_results`` of lm-eval's AIME tasks, loaded from its file (no lm-eval import: its task registry
    is slow to build and not needed for a pure function of two strings)."""
    spec = importlib.util.find_spec("lm_eval")
    path = Path(spec.origin).parent / "tasks" / "aime" / "utils.py" if spec and spec.origin else None
    if path is None or not path.is_file():
        raise UserError("AIME grading uses lm-evaluation-harness's aime grader, which is not installed",
                        where="task=aime25", given="lm_eval.tasks.aime.utils not found", fix=INSTALL_HINT)
    module_spec = importlib.util.spec_from_file_location("runner_lm_eval_aime_utils", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.process_results


def solved(response: str, answer: str) -> bool:
    """Whether ``response`` gives ``answer`` by upstream's rule (module docstring)."""
    return bool(upstream_grader()({"answer": answer}, [response])["exact_match"])


class AIMEEvaluator(Evaluator):
    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self._rows: list[dict[str, Any]] | None = None

    def _load(self) -> list[dict[str, Any]]:
        """The split's rows: a JSONL file read directly (the offline fixture, a hand-made copy), else through
        ``datasets`` (a snapshot directory, or the Hub with ``task.dataset.source=hub``)."""
        if self._rows is None:
            ds = self.config.dataset
            path = Path(ds.local_path).expanduser() if ds.local_path else None
            if ds.source in ("auto", "local") and path is not None and path.is_file() and path.suffix == ".jsonl":
                self.source_used = "local"
                rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            else:
                rows = [dict(r) for r in self.load_rows(packaged="set task.dataset.local_path to a local copy of "
                                                                  "math-ai/aime25 (a JSONL file of problem/answer rows)")]
            for i, row in enumerate(rows):
                if not isinstance(row.get("problem"), str) or row.get("answer") in (None, ""):
                    raise DataError("an AIME row needs a problem and an answer", where=f"task.dataset row {i}",
                                    given=json.dumps(row)[:200])
            self._rows = rows
        return self._rows

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        rows = self._load()
        split = self.config.dataset.split
        out = []
        for i in self.seeded_subset(len(rows), num_samples, seed, "aime25"):
            row = rows[i]
            ident = str(row.get("id", i))
            out.append(Sample(id=f"aime25/{split}/{ident}", prompt=PROMPT.format(problem=row["problem"]),
                              target=str(row["answer"]), meta={"row": i}))
        return out

    def requests(self, sample: Sample) -> list[Request]:
        c = self.config
        return [GenerationRequest(sample.prompt, c.max_output_len, stop=tuple(c.stop))]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        text = only_text(responses)
        return ScoredSample(sample.id, sample.prompt, text, sample.target, 100.0 if solved(text, sample.target) else 0.0,
                            dict(sample.meta))

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        return {self.metric: mean(s.score for s in scored)}

    def extra_acc_spec(self) -> str | None:
        """Settings that make this run's protocol differ from upstream's (part of the reference key)."""
        c = self.config
        parts = [f"split={c.dataset.split}"] if c.dataset.split != UPSTREAM_SPLIT else []
        parts += generation_deviations(c, UPSTREAM_MAX_OUTPUT, UPSTREAM_STOP)
        return ",".join(parts) or None
