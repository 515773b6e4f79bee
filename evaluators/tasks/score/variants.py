"""The variants of one question, rendered with upstream's templates (read from lm-eval at run time).

- prompt: the question under each of the family's 10 ``prompt_robustness`` templates;
- option_order: the ``option_order_robustness`` template, with the correct option swapped pairwise
  into each label position. Faithful: positions A-J for MMLU-Pro (a question with fewer options keeps
  an unchanged copy for every position past its last option) and A-D for AGIEval (E never holds the
  answer). Fixed: one variant per option the question actually has;
- non_greedy: the ``non_greedy_robustness`` template once per seed, sampled at the task's temperature.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Sequence

from evaluators.tasks.score.data import Question
from evaluators.tasks.score.extract import LETTERS, NUMERALS, ROMAN_NUMERALS

KINDS = ("prompt", "option_order", "non_greedy")
FAITHFUL_LABELS = {"mmlu_pro": 10, "agieval": 4}


@dataclass(frozen=True)
class Variant:
    """One request of a question. ``metric`` is the upstream per-variant metric it counts toward."""

    key: str  # prompt_3 | option_B | seed_2
    prompt: str
    gold: str  # gold letter after the swap (MCQ) or the reference answer (MATH)
    options_format: str | None = None
    forced: int | None = None  # option order: the label position the correct option was moved to
    seed: int | None = None


def render(template: dict[str, Any], question: str, options: Sequence[str], category: str) -> str:
    """Upstream's rendering: ``prompt`` with {question}, {options} (each via ``options_format``) and {category}."""
    fmt = template.get("options_format")
    rendered = None
    if fmt:
        rendered = "".join(fmt.format(letter=string.ascii_uppercase[i], option=option, numeral=NUMERALS[i],
                                      roman_numeral=ROMAN_NUMERALS[i], lower_case_letter=string.ascii_lowercase[i])
                           for i, option in enumerate(options))
    return template["prompt"].format(question=question, options=rendered, category=category)


def _category(family: str, q: Question) -> str:
    return q.group if family == "mmlu_pro" else ""  # upstream: only MMLU-Pro rows carry a category


def prompt_variants(family: str, q: Question, templates: dict[str, Any]) -> list[Variant]:
    return [Variant(f"prompt_{i}", render(t, q.question, q.options, _category(family, q)), q.answer, t.get("options_format"))
            for i, t in enumerate(templates["prompt_robustness"])]


def option_order_variants(family: str, q: Question, templates: dict[str, Any], faithful: bool) -> list[Variant]:
    template = templates["option_order_robustness"]
    assert q.answer_index is not None
    gold = q.answer_index
    positions = range(FAITHFUL_LABELS[family]) if faithful else range(len(q.options))
    out = []
    for k in positions:
        options = list(q.options)
        letter = q.answer
        if k < len(options):
            options[k], options[gold] = q.options[gold], q.options[k]
            letter = LETTERS[k]
        out.append(Variant(f"option_{LETTERS[k]}", render(template, q.question, options, _category(family, q)), letter,
                           template.get("options_format"), forced=k))
    return out


def non_greedy_variants(family: str, q: Question, templates: dict[str, Any], seeds: Sequence[int]) -> list[Variant]:
    template = templates["non_greedy_robustness"]
    prompt = render(template, q.question, q.options, _category(family, q))
    return [Variant(f"seed_{s}", prompt, q.answer, template.get("options_format"), seed=int(s)) for s in seeds]
