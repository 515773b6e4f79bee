"""Multiple-choice answer extraction, option-identity mapping and the consistency rate.

Faithful mode reproduces upstream's rules, quirks included, so its numbers match the published
leaderboard; fixed mode (``task.faithful=false``) repairs the documented quirks:
- extraction: upstream splits on ``"the best answer is "`` (with its trailing space), so
  ``"The best answer is: E"`` yields ``THE`` and ``"...is\\nE"`` yields the first word of the whole
  reply; fixed mode takes the first alphanumeric run after the last marker, whatever separates them;
- option identity: upstream maps the answer back with two independent ifs, so answering the
  ORIGINAL gold letter (which, after the swap, holds another option) counts as picking the correct
  content; fixed mode maps every letter to the original option it displayed.
"""

from __future__ import annotations

import re
from itertools import combinations
from typing import Callable, Hashable, Sequence

MARKER = "the best answer is"
LETTERS = "ABCDEFGHIJ"
NUMERALS = tuple(str(i) for i in range(1, 11))
ROMAN_NUMERALS = ("I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X")
_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]")
_FIRST_ALNUM = re.compile(r"[a-zA-Z0-9]+")


def extract_choice(generation: str, faithful: bool = True) -> str:
    """The answer string of an MCQ reply, compared with the gold letter by equality.

    Without the marker the whole reply (upper-cased) is the answer, in both modes: a bare ``B`` counts.
    """
    lowered = generation.lower()
    at = lowered.rfind(MARKER)
    if at < 0:
        return generation.upper()
    if faithful:
        tail = lowered.split(MARKER + " ")[-1]
        word = tail.split("\n")[0].split(" ")[0]
        return _NOT_ALNUM.sub("", word).strip().upper()
    found = _FIRST_ALNUM.search(lowered, at + len(MARKER))
    return found.group(0).upper() if found else ""


def translate_to_label(answer: str, options_format: str | None, labels: Sequence[str]) -> str:
    """Upstream's second step: upper-case, and map numerals or roman numerals back to letters when the
    template lists options that way (none of the shipped templates do)."""
    answer = answer.upper()
    if not options_format or "numeral" not in options_format:
        return answer
    table = ROMAN_NUMERALS if "roman" in options_format else NUMERALS
    return labels[table.index(answer)] if answer in table else answer


def option_identity(answer: str, forced: int, original_gold: int, labels: Sequence[str], faithful: bool = True) -> str:
    """The answer of an option-order variant expressed in the ORIGINAL option order.

    The variant swapped the correct option (originally at ``original_gold``) with the option at
    ``forced``. Faithful: upstream's two independent ifs (letter of the original gold -> letter at
    ``forced`` -> back to the original gold letter). Fixed: letter at ``forced`` -> original gold,
    letter at ``original_gold`` -> the option that was at ``forced``, any other letter unchanged;
    replies that are not a letter stay as they are.
    """
    if faithful:
        if answer == labels[original_gold]:
            answer = labels[forced]
        if answer == labels[forced]:
            answer = labels[original_gold]
        return answer
    if answer not in LETTERS:
        return answer
    shown = LETTERS.index(answer)
    if shown == forced:
        return LETTERS[original_gold]
    if shown == original_gold:
        return LETTERS[forced]
    return answer


def pair_agreement(answers: Sequence[Hashable], same: Callable[[object, object], bool] | None = None) -> tuple[int, int]:
    """(agreeing pairs, pairs) among one question's answers: the two sums of the consistency rate."""
    agree = 0
    pairs = 0
    for a, b in combinations(answers, 2):
        pairs += 1
        agree += int(same(a, b) if same is not None else a == b)
    return agree, pairs


def consistency_rate(counts: Sequence[tuple[int, int]]) -> float:
    """CR = sum_k agreeing pairs_k / sum_k C(|Y_k|, 2), as a fraction; 0 when no question has two answers."""
    total = sum(p for _, p in counts)
    return sum(a for a, _ in counts) / total if total else 0.0
