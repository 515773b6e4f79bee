"""LongBench v2 as TensorRT-LLM's ``LongBenchV2`` evaluator runs it: four-choice questions over a long
text, answered in free form and scored on the letter the answer names.

Read at NVIDIA/TensorRT-LLM ``tensorrt_llm/evaluate/longbench_v2.py`` (commit
d79c295316bc3d1be2cba525fc4ad759614186ac) and the ``LongBenchV2`` accuracy task of
``tests/integration/defs/accuracy/accuracy_core.py`` (commit 5da7e711f3ff4531a6083345ef78941ca8837c6e):
``length="medium"``, ``max_input_length=120000``, ``apply_chat_template=True``, n = 215 (every medium item).

- Rows: the ``train`` split (the dataset's only one) in source order, kept when they match the
  ``length``, ``difficulty`` and ``domain`` filters (None: no filter), then ``start_idx`` onwards,
  the first n of those. No shuffle and no seed: upstream's ``random_seed`` is unused here.
- Prompt: upstream's ``0shot`` template (``0shot_no_context`` with ``no_context``), its
  placeholders replaced one after another in upstream's order (``$DOC$`` with the stripped context,
  then ``$Q$``, ``$C_A$``..``$C_D$``, each stripped), as one user turn through the chat template.
- Answer: the output stripped, everything up to the last ``</think>`` dropped, ``*`` removed; the
  letter of ``The correct answer is (X)``, else of ``The correct answer is X``, else the first
  standalone A-D anywhere; none is wrong. A sample scores 100 when the letter is the answer, else 0.
- Metric: ``accuracy`` (percent correct), with upstream's breakdowns ``<difficulty>_accuracy``,
  ``<length>_accuracy`` and ``<domain>_accuracy``.

Not built: upstream's chain-of-thought mode (a second generation from the first one's output) and
its RAG mode (retrieved chunks), and its middle truncation (the first and last halves of the token
budget): prompts over ``max_input_len`` are cut by the backend like every task's.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from evaluators.base import Evaluator
from evaluators.checks import check_choice
from evaluators.deviations import chat_deviation, limit_and_data_deviations, short_hash
from evaluators.metrics import mean
from evaluators.responses import only_text
from runner.contract.errors import ConfigError, DataError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.requests import GenerationRequest, Request, Response
from runner.contract.task_config import DatasetConfig, TaskConfig

LETTERS = ("A", "B", "C", "D")
DIFFICULTIES = ("easy", "hard")
LENGTHS = ("short", "medium", "long")
COLUMNS = ("_id", "domain", "difficulty", "length", "question", "context", "answer",
           "choice_A", "choice_B", "choice_C", "choice_D")
# The accuracy suite's settings: its max_input_length 120000, cut to max_len 128000 - max_output_length 32000.
UPSTREAM = {"max_input_len": 96000, "max_output_len": 32000, "hub_config": None, "split": "train"}
UPSTREAM_LENGTH = "medium"

# Upstream's default templates (short format strings: the answer format is what the extraction reads).
_CHOICES = "What is the correct answer to this question: $Q$\nChoices:\n(A) $C_A$\n(B) $C_B$\n(C) $C_C$\n(D) $C_D$\n\n"
_FORMAT = 'Format your response as follows: "The correct answer is (insert answer here)".'
TEMPLATE = ("Please read the following text and answer the question below.\n\n<text>\n$DOC$\n</text>\n\n"
            + _CHOICES + _FORMAT)
TEMPLATE_NO_CONTEXT = _CHOICES + "What is the single, most likely answer choice? " + _FORMAT
# In upstream's order: the context first, so a "$Q$" inside it is replaced too (kept: upstream's prompts).
PLACEHOLDERS = (("$DOC$", "context"), ("$Q$", "question"), ("$C_A$", "choice_A"), ("$C_B$", "choice_B"),
                ("$C_C$", "choice_C"), ("$C_D$", "choice_D"))
ANSWER_PATTERNS = tuple(re.compile(p) for p in (r"The correct answer is \(([A-D])\)", r"The correct answer is ([A-D])",
                                                r"\b([A-D])\b"))
THINK_END = "</think>"


@dataclass
class LongBenchV2TaskConfig(TaskConfig):
    chance_level: Optional[float] = 25.0  # four options
    apply_chat_template: bool = True  # upstream: true
    length: Optional[str] = UPSTREAM_LENGTH  # short | medium (upstream) | long | null: every length
    difficulty: Optional[str] = None  # easy | hard | null (upstream: no filter)
    domain: Optional[str] = None  # one domain of the dataset, e.g. "Single-Document QA"; null (upstream): all
    start_idx: int = 0  # the first filtered row evaluated (upstream: 0)
    no_context: bool = False  # ask without the text (upstream's no-context check of memorisation)
    dataset: DatasetConfig = field(default_factory=lambda: DatasetConfig(hub_id="zai-org/LongBench-v2", split="train"))


CONFIG = LongBenchV2TaskConfig
"""The task's schema, registered as ``schema_task_longbench_v2``."""


def format_prompt(row: dict[str, Any], no_context: bool) -> str:
    """Upstream's ``_format_prompt``: the template's placeholders replaced one after another, each value stripped."""
    prompt = TEMPLATE_NO_CONTEXT if no_context else TEMPLATE
    for placeholder, column in PLACEHOLDERS:
        prompt = prompt.replace(placeholder, str(row[column]).strip())
    return prompt


def post_process(output: str) -> str:
    """The answer after the reasoning: the stripped output from its last ``</think>`` on, stripped again."""
    output = output.strip()
    cut = output.rfind(THINK_END)
    return output[cut + len(THINK_END):].strip() if cut >= 0 else output


def extract_answer(answer: str) -> str | None:
    """The letter the answer names (upstream's three patterns, in order, after removing ``*``), or None."""
    answer = answer.replace("*", "")
    for pattern in ANSWER_PATTERNS:
        found = pattern.search(answer)
        if found:
            return found.group(1)
    return None


class LongBenchV2Evaluator(Evaluator):
    """Builds LongBench v2 samples and scores them (per sample 0 or 100; metric = accuracy %)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        if config.length is not None:
            check_choice(config.length, LENGTHS, "LongBench v2 length", "task.length", " or null (upstream: medium)")
        if config.difficulty is not None:
            check_choice(config.difficulty, DIFFICULTIES, "LongBench v2 difficulty", "task.difficulty", " or null")
        if config.start_idx < 0:
            raise ConfigError("start_idx cannot be negative", where="task.start_idx", given=config.start_idx,
                              allowed="0 or more (upstream: 0)")
        if config.max_output_len < 1:
            raise ConfigError("max_output_len must be positive", where="task.max_output_len", given=config.max_output_len)

    def extra_acc_spec(self) -> str | None:
        """Settings that make this run's protocol differ from upstream's (part of the reference key)."""
        c = self.config
        parts = []
        if c.length != UPSTREAM_LENGTH:
            parts.append(f"length={c.length or 'all'}")
        if c.difficulty:
            parts.append(f"difficulty={c.difficulty}")
        if c.domain:
            parts.append("domain=" + short_hash(c.domain))
        if c.start_idx:
            parts.append(f"start_idx={c.start_idx}")
        if c.no_context:
            parts.append("no_context=true")
        parts += limit_and_data_deviations(c, UPSTREAM) + chat_deviation(c, upstream_chat=True)
        return ",".join(parts) or None

    def _rows(self) -> list[dict[str, Any]]:
        """The filtered rows in source order, each with its row number in the source."""
        c = self.config
        table = self.load_rows(packaged="set task.dataset.local_path to a copy of zai-org/LongBench-v2 "
                                        "(a directory with train* files, or one .jsonl/.json file), or use task.dataset.source=hub")
        where = f"task.dataset ({self.source_used})"
        missing = [col for col in COLUMNS if col not in table.column_names]
        if missing:
            raise DataError("the dataset does not have LongBench v2's columns", where=where, given=sorted(table.column_names),
                            allowed=", ".join(COLUMNS))
        rows = []
        for i, row in enumerate(table):
            if row["answer"] not in LETTERS:
                raise DataError("malformed LongBench v2 row: the answer is not a letter A-D", where=f"{where}, row {i}",
                                given=repr(row["answer"])[:80], fix="fix or drop the row in the source data")
            if all(row[key] == want for key, want in (("length", c.length), ("difficulty", c.difficulty),
                                                     ("domain", c.domain)) if want is not None):
                rows.append(dict(row) | {"_row": i})
        if not rows[c.start_idx:]:
            raise DataError("no rows match the task's filters", where=where,
                            given=f"length={c.length}, difficulty={c.difficulty}, domain={c.domain}, "
                                  f"start_idx={c.start_idx} ({len(rows)} rows match the filters)",
                            fix="loosen task.length / task.difficulty / task.domain, or lower task.start_idx")
        return rows[c.start_idx:]

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        """The first ``num_samples`` filtered rows from ``start_idx`` (upstream takes no seeded subset)."""
        out = []
        for row in self._rows()[:num_samples]:
            meta = {key: row[key] for key in ("domain", "difficulty", "length")} | {"row": row["_row"]}
            out.append(Sample(id=str(row["_id"]), prompt=format_prompt(row, self.config.no_context),
                              target=row["answer"], meta=meta))
        return out

    def requests(self, sample: Sample) -> list[Request]:
        return [GenerationRequest(prompt=sample.prompt, max_tokens=self.config.max_output_len)]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        output = only_text(responses)
        extracted = extract_answer(post_process(output))
        meta = dict(sample.meta) | {"extracted": extracted}
        return ScoredSample(sample.id, sample.prompt, output, sample.target, 100.0 * (extracted == sample.target), meta)

    def answer_unparsed(self, scored: ScoredSample) -> bool | None:
        """Upstream's extraction found no choice letter in the answer."""
        return scored.meta.get("extracted") is None

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """``accuracy`` and upstream's breakdowns by difficulty, length and domain, each in percent."""
        if not scored:
            return {self.metric: float("nan")}
        groups: dict[str, list[float]] = defaultdict(list)
        for s in scored:
            for key in ("difficulty", "length", "domain"):
                groups[f"{s.meta[key]}_accuracy"].append(s.score)
        return {self.metric: mean(s.score for s in scored)} | {name: mean(v) for name, v in sorted(groups.items())}
