"""Where a text can be tokenized in two parts with the ids of the whole: before a space that follows a
non-space character, for tokenizers whose splitting rule is known to cut there.

Why: a 5-shot prompt repeats its subject's few-shot block, and a log-likelihood request's
context + continuation repeats the context; tokenizing the shared part once and the rest apart is
several times less work. It must give exactly the ids of the whole text, so it is used only where that
is proven, and the proof depends on how the tokenizer splits text before its BPE model runs.

The proof, for a fast tokenizer (Hugging Face ``tokenizers``) with no normalizer (or NFC), a BPE model
without dropout, special tokens added in front only, no added token with ``rstrip``/``single_word`` or
containing a space after a non-space, and a pre-tokenizer that splits with the GPT-2 pattern
(``ByteLevel(use_regex=True)``) or a Llama-3/Qwen2 pattern (:data:`KNOWN_PATTERNS`, then
``ByteLevel(use_regex=False)``), neither adding a prefix space: the BPE model encodes each pre-token
on its own, so the ids of a text are those of its pre-tokens in order. Let ``b`` be a position with
``text[b] == " "`` and ``text[b-1]`` not whitespace. No alternative of these patterns matches a
non-space character followed by a space: letter, digit and contraction runs hold no whitespace; a
punctuation run may start with one space and (Llama-3/Qwen2) end in ``\\r``/``\\n`` only; the
whitespace runs hold no non-space. So a pre-token ends at ``b`` in the whole text. The pre-tokens
before ``b`` are the same in ``text[:b]``: each was decided from characters before ``b`` plus at most
the one at ``b``, where a space and the end of the text stop every run alike (the one lookahead,
``\\s+(?!\\S)``, belongs to whitespace runs, which end before ``b - 1``). The pre-tokens from ``b`` on
are those of ``text[b:]``: matching starts afresh at ``b`` and nothing looks behind. Added tokens are
cut out before pre-tokenizing and, by the conditions above, none spans or absorbs the space at ``b``.
NFC composes a character with the combining marks after it, and no composition involves a space.
``tests/backends/test_token_cuts.py`` checks the claim on random texts for both pattern families.
"""

from __future__ import annotations

import json
import weakref
from typing import Any

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
KNOWN_PATTERNS = (LLAMA3_PATTERN, QWEN2_PATTERN)
"""Split patterns (as ``tokenizer.json`` spells them) under which the proof above holds."""

MIN_HEAD = 64  # characters; a shorter shared head is not worth a cut (two more texts to encode)


def cuts_before_spaces(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` gives a text's ids as those of ``text[:b]`` (with its special tokens) followed by
    those of ``text[b:]`` (without), at every ``b`` where a space follows a non-space character."""
    found = _PROVEN.get(tokenizer)
    if found is None:
        found = _PROVEN[tokenizer] = _provable(tokenizer)
    return found


_PROVEN: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()  # per tokenizer object, once


def _provable(tokenizer: Any) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or getattr(tokenizer, "split_special_tokens", False):
        return False
    spec = json.loads(backend.to_str())
    model = spec.get("model") or {}
    if model.get("type") != "BPE" or model.get("dropout"):
        return False
    normalizer = spec.get("normalizer")
    if normalizer is not None and normalizer.get("type") != "NFC":
        return False
    if not _known_split(spec.get("pre_tokenizer")):
        return False
    for added in spec.get("added_tokens") or []:
        content = added.get("content", "")
        if added.get("rstrip") or added.get("single_word") or any(
                content[i] == " " and not content[i - 1].isspace() for i in range(1, len(content))):
            return False
    head = list(tokenizer("", add_special_tokens=True)["input_ids"])
    probe = "Answer: B. (x) 12, y"
    return list(tokenizer(probe, add_special_tokens=True)["input_ids"]) == \
        head + list(tokenizer(probe, add_special_tokens=False)["input_ids"])


def _known_split(pre: Any) -> bool:
    if not isinstance(pre, dict):
        return False
    if pre.get("type") == "ByteLevel":
        return bool(pre.get("use_regex", True)) and not pre.get("add_prefix_space", False)
    if pre.get("type") != "Sequence":
        return False
    steps = pre.get("pretokenizers") or []
    if len(steps) != 2:
        return False
    split, byte_level = steps
    return (split.get("type") == "Split" and (split.get("pattern") or {}).get("Regex") in KNOWN_PATTERNS
            and split.get("behavior") == "Isolated" and not split.get("invert", False)
            and byte_level.get("type") == "ByteLevel" and not byte_level.get("use_regex", True)
            and not byte_level.get("add_prefix_space", False))


def last_cut(text: str, limit: int) -> int:
    """The largest ``b <= limit`` (and at least :data:`MIN_HEAD`) with a space at ``b`` after a non-space; 0 if none."""
    b = text.rfind(" ", 0, min(limit, len(text) - 1) + 1)
    while b >= MIN_HEAD:
        if not text[b - 1].isspace():
            return b
        b = text.rfind(" ", 0, b)
    return 0


def shared_cuts(texts: list[str]) -> dict[str, int]:
    """For each distinct text, where to cut it: the last cut inside the longest head it shares with another text
    (0: not cut). Texts sharing a few-shot block, or a context with its continuations, get the same head."""
    order = sorted(set(texts))
    common = [0] * len(order)
    for i in range(1, len(order)):
        n = _common_prefix(order[i - 1], order[i])
        common[i - 1] = max(common[i - 1], n)
        common[i] = max(common[i], n)
    return {text: last_cut(text, n) if n >= MIN_HEAD else 0 for text, n in zip(order, common)}


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo
