"""GSM8K 5-shot chat multi-turn: TensorRT-LLM's ``GSM8KInferenceMax`` accuracy task (renamed
``gsm8k_inferencex`` upstream later), the InferenceMAX/InferenceX protocol for chat and thinking models.

What upstream runs (read at NVIDIA/TensorRT-LLM ``tests/integration/defs/accuracy/accuracy_core.py`` and
``tensorrt_llm/evaluate/lm_eval_tasks/gsm8k_inferencemax/gsm8k_inferencemax.yaml`` at commit
5da7e711f3ff4531a6083345ef78941ca8837c6e; ``gsm8k_inferencex.yaml`` at 4fd977ccc85b8ff175718339b6e93b80f4fc017f
is the same task renamed): lm-eval with ``apply_chat_template=True`` and ``fewshot_as_multiturn=True``,
``random_seed=0``, all 1319 test questions.

- Questions, order and few-shot draws: as :mod:`evaluators.tasks.gsm8k` (the same lm-eval sampler,
  5 examples from ``train``).
- Prompt: a chat. Each example is a user turn, its question filled into ``doc_to_text``
  (``Question: {question}`` + an instruction to end with ``#### [number]`` + ``Answer:``), then an
  assistant turn holding the example's whole worked solution; the question asked is the last user
  turn. The model's chat template renders it with the generation prompt. With
  ``fewshot_as_multiturn=false`` lm-eval collapses the same texts into one user turn (the
  completion prompt of the plain task, with this task's question wording).
- Generation: greedy, at most 12288 new tokens, stopped at ``</s>`` or ``<|im_end|>`` (no
  ``Question:`` stop: a chat model ends its turn).
- Scoring: lm-eval's filters with this task's ``group_select``: strict takes the LAST match of
  ``#### (\\-?[0-9\\.\\,]+)`` (the plain task takes the first), flexible the last number; the same
  ``exact_match`` normalisation. Upstream gates on ``exact_match,strict-match`` alone
  (``scores_filter``), so a sample scores 100 when the strict extraction matches, else 0; the
  flexible rate is logged beside it.

Every setting that moves a run away from that protocol enters ``extra_acc_spec``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from evaluators.checks import check_choice
from evaluators.deviations import generation_deviations, short_hash
from evaluators.responses import only_text
from evaluators.scoring.filters import apply_filters
from evaluators.tasks.gsm8k import (FEWSHOT_DELIMITER, STRICT_PATTERN, TARGET_DELIMITER, GSM8KEvaluator,
                                    GSM8KTaskConfig, Problem, extract_flexible, normalize, regex_filter)
from runner.contract.errors import ConfigError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.requests import GenerationRequest, Request, Response

# gsm8k_inferencemax.yaml: doc_to_text (a short format string), generation_kwargs and filter_list.
UPSTREAM_QUESTION_TEMPLATE = ("Question: {question}\nEnd your response with the answer on the last line, "
                              "formatted as: #### [number]\nAnswer:")
UPSTREAM_MAX_OUTPUT = 12288
UPSTREAM_STOP = ("</s>", "<|im_end|>")
UPSTREAM_STRICT_MATCH = "last"  # group_select: -1
UPSTREAM_SCORE_FILTER = "strict"  # accuracy_core.py: scores_filter="exact_match,strict-match"
STRICT_MATCHES = {"first": 0, "last": -1}
SCORE_FILTERS = ("strict", "flexible", "mean")
PLACEHOLDER = "{question}"


@dataclass
class GSM8KChatTaskConfig(GSM8KTaskConfig):
    stop: list[str] = field(default_factory=lambda: list(UPSTREAM_STOP))
    apply_chat_template: bool = True  # upstream: true (required by fewshot_as_multiturn)
    # examples as alternating user/assistant turns (upstream) | false: one user turn, as lm-eval collapses them
    fewshot_as_multiturn: bool = True
    # each question's text; {question} is replaced by the question (upstream: gsm8k_inferencemax's doc_to_text)
    question_template: str = UPSTREAM_QUESTION_TEMPLATE
    strict_match: str = UPSTREAM_STRICT_MATCH  # which "#### n" the strict filter keeps: first | last (upstream)
    # what a sample scores: strict (upstream: 100 when strict matches) | flexible | mean (50 per filter, the plain task's)
    score_filter: str = UPSTREAM_SCORE_FILTER


CONFIG = GSM8KChatTaskConfig
"""The task's schema, registered as ``schema_task_gsm8k_chat``."""


class GSM8KChatEvaluator(GSM8KEvaluator):
    """GSM8K as chat turns, scored on the last ``#### n`` (per sample 0 or 100 by default)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        check_choice(config.strict_match, tuple(STRICT_MATCHES), "strict-match pick", "task.strict_match",
                     " (upstream: last)")
        check_choice(config.score_filter, SCORE_FILTERS, "score filter", "task.score_filter", " (upstream: strict)")
        if config.question_template.count(PLACEHOLDER) != 1:
            raise ConfigError("the question template must contain {question} exactly once",
                              where="task.question_template", given=config.question_template,
                              fix="write the question's text with one {question} where the question goes")
        if config.fewshot_as_multiturn and not config.apply_chat_template:
            raise ConfigError("few-shot examples as chat turns need the chat template", where="task.fewshot_as_multiturn",
                              given="fewshot_as_multiturn=true with apply_chat_template=false",
                              fix="set task.apply_chat_template=true (upstream), or task.fewshot_as_multiturn=false")

    def extra_acc_spec(self) -> str | None:
        """Settings that make this run's protocol differ from upstream's chat multi-turn GSM8K."""
        c = self.config
        parts = self.shot_deviations()
        if not c.fewshot_as_multiturn:
            parts.append("fewshot_as_multiturn=false")
        if c.question_template != UPSTREAM_QUESTION_TEMPLATE:
            parts.append("question_template=" + short_hash(c.question_template))
        if c.strict_match != UPSTREAM_STRICT_MATCH:
            parts.append(f"strict_match={c.strict_match}")
        if c.score_filter != UPSTREAM_SCORE_FILTER:
            parts.append(f"score_filter={c.score_filter}")
        parts += generation_deviations(c, UPSTREAM_MAX_OUTPUT, UPSTREAM_STOP, upstream_chat=True)
        return ",".join(parts) or None

    def question(self, p: Problem) -> str:
        return self.config.question_template.replace(PLACEHOLDER, p.question)

    def turns(self, problem: Problem, shots: Sequence[Problem]) -> list[tuple[str, str]]:
        """The chat: a user turn and an assistant turn (the worked solution) per example, then the question."""
        out: list[tuple[str, str]] = []
        for s in shots:
            out += [("user", self.question(s)), ("assistant", s.solution)]
        return out + [("user", self.question(problem))]

    def render(self, problem: Problem, shots: Sequence[Problem]) -> tuple[str, dict[str, Any]]:
        """Multi-turn: the chat as ``[role]`` blocks for reading (its turns in meta, the request sends them);
        single-turn: lm-eval's collapsed text, sent as the one user turn."""
        if self.config.fewshot_as_multiturn:
            turns = self.turns(problem, shots)
            shown = "\n\n".join(f"[{role}]\n{content}" for role, content in turns)
            return shown, {"messages": [list(t) for t in turns]}
        solved = "".join(self.question(s) + TARGET_DELIMITER + s.solution + FEWSHOT_DELIMITER for s in shots)
        return solved + self.question(problem), {}

    def requests(self, sample: Sample) -> list[Request]:
        c = self.config
        messages = sample.meta.get("messages")
        if messages is None:
            return [GenerationRequest(prompt=sample.prompt, max_tokens=c.max_output_len, stop=tuple(c.stop))]
        turns = tuple((role, content) for role, content in messages)
        return [GenerationRequest(prompt=turns[-1][1], max_tokens=c.max_output_len, stop=tuple(c.stop), messages=turns)]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        output = only_text(responses)
        pick = STRICT_MATCHES[self.config.strict_match]
        found = apply_filters(output, lambda text: regex_filter(text, STRICT_PATTERN, pick), extract_flexible,
                              lambda answer: normalize(answer) == sample.target)
        strict, flexible = 100.0 * found["strict_match"], 100.0 * found["flexible_match"]
        value = {"strict": strict, "flexible": flexible, "mean": (strict + flexible) / 2}[self.config.score_filter]
        meta = {k: v for k, v in sample.meta.items() if k != "messages"} | found
        return ScoredSample(sample.id, sample.prompt, output, sample.target, value, meta)
