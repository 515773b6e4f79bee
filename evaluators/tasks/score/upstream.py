"""What is read at run time from the installed lm-evaluation-harness (``lm-eval``), never copied here:
the prompt templates, and for MATH the reference-answer parsing, the boxed-answer extraction, the
answer normalisation and the list of curated answers. Reading them from the package keeps them
byte-exact and under their own licence.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import logging
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from runner.contract.errors import UserError

TESTED_VERSION = "0.4.13"
FAMILY_DIRS = {"mmlu_pro": "mmlu_pro", "agieval": "agi_eval", "math": "math"}
INSTALL_HINT = (f'pip install "lm-eval=={TESTED_VERSION}" (or `pip install -e ".[score]"` in this project); '
                "the SCORE templates and MATH answer parsing are read from that package at run time")


class LmEvalMissing(UserError):
    """lm-evaluation-harness is not installed, or has no SCORE task folder."""


def version() -> str | None:
    try:
        return metadata.version("lm-eval")
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=None)
def score_dir() -> Path:
    """``lm_eval/tasks/score`` of the installed package, located without importing lm_eval."""
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        raise LmEvalMissing("the SCORE tasks need lm-evaluation-harness, which is not installed",
                            where="python package lm_eval", given="not importable", fix=INSTALL_HINT)
    folder = Path(next(iter(spec.submodule_search_locations))) / "tasks" / "score"
    if not folder.is_dir():
        raise LmEvalMissing("the installed lm-evaluation-harness has no SCORE task folder",
                            where=str(folder), given=f"lm-eval {version()}", allowed=f"lm-eval>={TESTED_VERSION}",
                            fix=INSTALL_HINT)
    return folder


@functools.lru_cache(maxsize=None)
def templates(family: str) -> dict[str, Any]:
    """The family's ``prompt_templates.json``: keys prompt_robustness (list of 10), non_greedy_robustness,
    and option_order_robustness (multiple-choice families only)."""
    path = score_dir() / FAMILY_DIRS[family] / "prompt_templates.json"
    if version() != TESTED_VERSION:
        logging.getLogger("runner").warning("SCORE templates from lm-eval %s; this runner was checked against %s",
                                            version(), TESTED_VERSION)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise LmEvalMissing("cannot read the SCORE prompt templates of the installed lm-evaluation-harness",
                            where=str(path), given=f"{type(err).__name__}: {err}", fix=INSTALL_HINT) from None


@functools.lru_cache(maxsize=None)
def math_curated_answers() -> list[dict[str, str]]:
    """Upstream's corrected reference answers for ambiguous MATH problems (``to_be_fixed_questions.json``)."""
    path = score_dir() / "math" / "to_be_fixed_questions.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _math_function(module: str, name: str) -> Callable[..., Any]:
    score_dir()  # a clear message first when the package is missing

    return getattr(importlib.import_module(f"lm_eval.tasks.score.math.{module}"), name)


def math_reference_answer(solution: str, problem: str) -> str:
    """The reference answer exactly as upstream derives it from a MATH solution (last boxed entries,
    normalised, curated answers for ambiguous problems, ``x = 5`` reduced to ``5``)."""
    return _math_function("utils_math", "extract_answer_dataset")(solution, problem, math_curated_answers())


def math_extract_boxed(generation: str) -> str | None:
    """Upstream's extraction: the content of the last ``\\boxed{...}`` (brace-matched), else None."""
    return _math_function("math_grader", "extract_answer")(generation)


def math_normalize(answer: str) -> str:
    """Upstream's answer normalisation (units, ``\\text``, fractions, thousands separators...)."""
    return _math_function("math_grader", "normalize_answer_string")(answer)
