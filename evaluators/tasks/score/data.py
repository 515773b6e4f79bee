"""Rows of the three SCORE dataset families, from the Hub or a local copy, as :class:`Question` records.

Row preparation follows upstream: AGIEval's question is ``query`` cut at " Answer Choices:" without
a leading "Q: ", its options are ``choices`` without their label prefix, the answer is ``gold[0]`` and
the question id is the row index within the subset; MATH's reference answer is derived from the
solution by upstream's own function (read from lm-eval at run time), its id is the row index within
the subject. MMLU-Pro rows are used as they are (``question_id``, ``category``, ``options``,
``answer_index``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluators.tasks.score.upstream import math_reference_answer
from runner.contract.errors import ConfigError, DataError
from runner.files.datasets import DEFAULT_MAX_FILE_MB, LOCAL_FORMATS, load_hub, load_local

FAMILIES = ("mmlu_pro", "agieval", "math")
MMLU_PRO_HUB = "TIGER-Lab/MMLU-Pro"
AGIEVAL_SUBSETS = ("aqua_rat", "logiqa_en", "lsat_ar", "lsat_lr", "lsat_rc", "sat_en", "sat_math")
MATH_HUB = "EleutherAI/hendrycks_math"
MATH_SUBSETS = ("algebra", "counting_and_probability", "geometry", "intermediate_algebra", "number_theory",
                "prealgebra", "precalculus")
SPLIT = "test"
_PREFIXES = (re.compile(r"^\([A-E]\)"), re.compile(r"^[A-E] "), re.compile(r"^[A-E]\? "))


@dataclass(frozen=True)
class Question:
    """One question; ``group`` is the MMLU-Pro category or the AGIEval/MATH subset."""

    id: str  # the runner's sample id: stable across runs, seeds and variants
    group: str
    question: str
    options: tuple[str, ...]  # empty for MATH
    answer_index: int | None  # MCQ gold position
    answer: str  # MCQ gold letter, or MATH reference answer
    question_id: int  # upstream's question id (MMLU-Pro's column; row index for AGIEval and MATH)


def default_subsets(family: str) -> tuple[str, ...]:
    return {"agieval": AGIEVAL_SUBSETS, "math": MATH_SUBSETS}.get(family, ())


def hub_id(family: str, subset: str | None) -> str:
    if family == "mmlu_pro":
        return MMLU_PRO_HUB
    if family == "agieval":
        return "hails/agieval-" + str(subset).replace("_", "-")
    return MATH_HUB


def load_questions(family: str, source: str, local_path: str | None, subsets: tuple[str, ...],
                   max_mb: float = DEFAULT_MAX_FILE_MB) -> tuple[list[Question], str]:
    """Every question of the family (the chosen subsets), and a description of where they came from."""
    if source == "auto":
        source = "local" if local_path else "hub"
    if source == "local" and not local_path:
        raise ConfigError("task.dataset.source=local needs a path", where="task.dataset.local_path", given=None,
                          fix="set task.dataset.local_path=/path/to/the/data (see the README's SCORE section)")
    if source == "local" and (Path(str(local_path)).expanduser() / family).is_dir():
        local_path = str(Path(str(local_path)).expanduser() / family)  # one root for the whole suite
    if family == "mmlu_pro":
        rows = _rows(family, source, local_path, None, max_mb)
        return _mmlu_pro(rows), _where(family, source, local_path)
    out: list[Question] = []
    for subset in subsets:
        rows = _rows(family, source, local_path, subset, max_mb)
        out += (_agieval if family == "agieval" else _math)(rows, subset)
    return out, _where(family, source, local_path)


def _where(family: str, source: str, local_path: str | None) -> str:
    if source == "local":
        return f"local:{local_path}"
    return "hub:" + {"mmlu_pro": MMLU_PRO_HUB, "agieval": "hails/agieval-*", "math": MATH_HUB}[family]


def _alternatives(family: str) -> str:
    return ("prepare a local copy on a connected host and point task.dataset.local_path at it "
            f"(task.source=local); the README's SCORE section shows how for {family}")


def _rows(family: str, source: str, local_path: str | None, subset: str | None, max_mb: float) -> Any:
    if source == "hub":
        config = subset if family == "math" else "default"
        return load_hub(hub_id(family, subset), config, SPLIT, f"task.family={family}", _alternatives(family))
    root = Path(str(local_path)).expanduser()
    folder = root
    if subset is not None:
        candidates = [root / subset, root / hub_id(family, subset).split("/")[-1]]
        folder = next((c for c in candidates if c.exists()), None)  # type: ignore[assignment]
        if folder is None:
            raise DataError(f"the local copy has no '{subset}' subset", where="task.dataset.local_path", given=str(root),
                            allowed=f"a sub-directory (or file) named {subset}/ with {SPLIT}*.jsonl|json|parquet|csv",
                            fix=f"add it, or choose the subsets present with task.subsets=[...] (a deviation from the full {family} set)")
    return _read_local(folder, f"task.dataset.local_path ({subset or family})", max_mb)


def _read_local(folder: Path, where: str, max_mb: float) -> Any:
    """A data file, a directory with ``test*`` files, or a Hub snapshot (files one level deeper)."""
    if folder.is_dir() and not any(folder.glob(f"{SPLIT}*")):
        nested = sorted(p.parent for suffix in LOCAL_FORMATS for p in folder.rglob(f"{SPLIT}*{suffix}"))
        if nested:
            folder = nested[0]
    return load_local(str(folder), SPLIT, None, where, max_mb)


def _check(cond: bool, where: str, what: str, value: Any) -> None:
    if not cond:
        raise DataError(f"malformed row: {what}", where=where, given=repr(value)[:200],
                        fix="fix or drop the row in the source data")


def _need(rows: Any, columns: set[str], where: str) -> None:
    missing = columns - set(rows.column_names)
    if missing:
        raise DataError("the dataset lacks required columns", where=where, given=sorted(rows.column_names),
                        allowed=", ".join(sorted(columns)))


def _mmlu_pro(rows: Any) -> list[Question]:
    _need(rows, {"question_id", "question", "options", "answer_index", "category"}, "MMLU-Pro")
    out = []
    for i, row in enumerate(rows):
        options = tuple(str(o) for o in row["options"])
        gold = row["answer_index"]
        _check(isinstance(gold, int) and not isinstance(gold, bool) and 0 <= gold < len(options) <= 10, f"MMLU-Pro row {i}", "answer_index", gold)
        out.append(Question(f"{row['category']}/{row['question_id']}", str(row["category"]), str(row["question"]),
                            options, gold, "ABCDEFGHIJ"[gold], int(row["question_id"])))
    return out


def _strip_label(option: str) -> str:
    for i, pattern in enumerate(_PREFIXES):
        if pattern.match(option):
            return option[2:] if i == 1 else option[3:]
    return option


def _agieval(rows: Any, subset: str) -> list[Question]:
    _need(rows, {"query", "choices", "gold"}, f"AGIEval {subset}")
    out = []
    for idx, row in enumerate(rows):
        question = row["query"].split(" Answer Choices:")[0]
        if question.startswith("Q: "):
            question = question[3:]
        gold = row["gold"][0] if isinstance(row["gold"], list) else row["gold"]
        options = tuple(_strip_label(str(o)) for o in row["choices"])
        _check(isinstance(gold, int) and not isinstance(gold, bool) and 0 <= gold < len(options) <= 5, f"AGIEval {subset} row {idx}", "gold", row["gold"])
        out.append(Question(f"{subset}/{idx}", subset, question, options, gold, "ABCDE"[gold], idx))
    return out


def _math(rows: Any, subset: str) -> list[Question]:

    _need(rows, {"problem", "solution"}, f"MATH {subset}")
    out = []
    for idx, row in enumerate(rows):
        try:
            answer = math_reference_answer(row["solution"], row["problem"])
        except ValueError:
            raise DataError("a MATH solution holds no \\boxed{...} answer", where=f"MATH {subset} row {idx}",
                            given=row["solution"][-200:], fix="fix or drop the row") from None
        out.append(Question(f"{subset}/{idx}", subset, row["problem"], (), None, answer, idx))
    return out

