"""MATH answer equivalence with ``math-verify`` (Hugging Face), which runs on Hydra's antlr 4.9 pin.

Upstream's grader demands antlr4-python3-runtime 4.11 exactly and cannot be installed next to Hydra.
This grader keeps upstream's first step (equal after upstream's own normalisation, case-insensitive)
and replaces its numeric and symbolic steps with math-verify's parsing and verification. ``None``
(no boxed answer) never equals anything, as upstream.
"""

from __future__ import annotations

import functools
from typing import Any

from evaluators.tasks.score.upstream import math_normalize
from runner.contract.errors import UserError

INSTALL_HINT = 'pip install "math-verify[antlr4_9_3]==0.9.0" (or `pip install -e ".[score]"`)'


@functools.lru_cache(maxsize=1)
def _math_verify() -> Any:
    try:
        import math_verify
    except ImportError:
        raise UserError("MATH grading needs math-verify, which is not installed", where="task.family=math",
                        given="math_verify not importable", fix=INSTALL_HINT) from None
    return math_verify


@functools.lru_cache(maxsize=65536)
def _parsed(answer: str) -> tuple[Any, ...]:
    mv = _math_verify()
    config = [mv.LatexExtractionConfig(), mv.ExprExtractionConfig()]
    return tuple(mv.parse(f"${answer}$", extraction_config=config))


@functools.lru_cache(maxsize=65536)
def _normalized(answer: str) -> str:

    try:
        return math_normalize(answer).strip().lower()
    except Exception:  # upstream's normaliser raises on some malformed LaTeX; fall back to the raw text
        return answer.strip().lower()


def math_equivalent(a: str | None, b: str | None) -> bool:
    """Whether two MATH answers (boxed contents or reference answers) denote the same value."""
    if a is None or b is None:
        return False
    if _normalized(a) == _normalized(b):
        return True
    pa, pb = _parsed(a), _parsed(b)
    if not pa or not pb:
        return False
    return bool(_math_verify().verify(list(pa), list(pb)))
