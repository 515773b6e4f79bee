"""A server's answer checked before anything scores or caches it.

Why: a 200 answer is not a good answer. A choice without ``text`` read as an empty string scores as a
wrong answer, is cached, and is replayed after the server is fixed; a NaN or positive log-probability
passes into a sum; three choices for one request hide a misrouted server. Each answer body is read
here as plain JSON (not through the client library's lenient models) and checked against the request
it answers: one choice, its text a string, echoed log-probabilities finite and <= 0, one per prompt
token. What fails is an :class:`InvalidAnswer` carrying the server's own words; the client retries it
as the retry policy says and, if it stays invalid, reports it as a backend error, never a score.
"""

from __future__ import annotations

import json
import math
from typing import Any

EXCERPT = 300


class InvalidAnswer(Exception):
    """An answer that cannot be used: what is wrong, and the start of what the server sent."""

    def __init__(self, what: str, body: Any) -> None:
        text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else \
            json.dumps(body, default=str)[:EXCERPT * 2] if not isinstance(body, str) else body
        self.what = what
        self.excerpt = " ".join(text.split())[:EXCERPT]
        super().__init__(f"{what}: {self.excerpt!r}")


def document(body: bytes) -> dict[str, Any]:
    """The answer body as a JSON object (an error object sent with status 200 is refused with its words)."""
    if not body.strip():
        raise InvalidAnswer("the answer body is empty", body)
    try:
        doc = json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError):
        raise InvalidAnswer("the answer is not JSON", body) from None
    if not isinstance(doc, dict):
        raise InvalidAnswer(f"the answer is a JSON {type(doc).__name__}, not an object", body)
    if "error" in doc and "choices" not in doc:
        raise InvalidAnswer("the server answered with an error", body)
    return doc


def _no_constant(name: str) -> float:
    """NaN and Infinity are not JSON; a server that writes them is answering wrongly."""
    raise ValueError(f"non-standard JSON constant {name}")


def only_choice(doc: dict[str, Any]) -> dict[str, Any]:
    """The one choice a request with ``n=1`` gets."""
    choices = doc.get("choices")
    if not isinstance(choices, list):
        raise InvalidAnswer(f"the answer has no list of choices ({_kind(choices)})", doc)
    if len(choices) != 1:
        raise InvalidAnswer(f"the answer has {len(choices)} choices for one request", doc)
    if not isinstance(choices[0], dict):
        raise InvalidAnswer(f"the answer's choice is {_kind(choices[0])}, not an object", doc)
    return choices[0]


def completion_text(doc: dict[str, Any]) -> str:
    """The generated text of a ``/v1/completions`` answer."""
    text = only_choice(doc).get("text")
    if not isinstance(text, str):
        raise InvalidAnswer(f"the answer's choice has no text ({_kind(text)})", doc)
    return text


def stopped_at_limit(doc: dict[str, Any]) -> bool | None:
    """Whether the generation ended at its token limit (the choice's ``finish_reason`` is ``length``); None when the
    server does not say."""
    reason = only_choice(doc).get("finish_reason")
    return reason == "length" if isinstance(reason, str) else None


def chat_text(doc: dict[str, Any]) -> str:
    """The generated text of a ``/v1/chat/completions`` answer."""
    message = only_choice(doc).get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise InvalidAnswer(f"the answer's choice has no message content ({_kind(content)})", doc)
    return content


def echoed_logprobs(doc: dict[str, Any], prompt_len: int, count: int) -> tuple[float, bool] | None:
    """(sum of log-probs, every token the argmax) of the last ``count`` of ``prompt_len`` prompt tokens of
    an echoed completion (``echo=True, logprobs=1, max_tokens=1``). None when the server sent no prompt
    log-probabilities at all (a server without that feature; the caller says how to configure it)."""
    logprobs = only_choice(doc).get("logprobs")
    if logprobs is None:
        return None
    if not isinstance(logprobs, dict):
        raise InvalidAnswer(f"the answer's logprobs is {_kind(logprobs)}, not an object", doc)
    values, tops = logprobs.get("token_logprobs"), logprobs.get("top_logprobs")
    if values is None or (isinstance(values, list) and len(values) < prompt_len):
        return None
    if not isinstance(values, list) or len(values) > prompt_len + 1:
        raise InvalidAnswer(f"the answer has {_size(values)} token log-probabilities for a {prompt_len}-token "
                            "prompt and one new token", doc)
    if tops is not None and not isinstance(tops, list):
        raise InvalidAnswer(f"the answer's top_logprobs is {_kind(tops)}, not a list", doc)
    start = prompt_len - count
    total, greedy = 0.0, True
    for i in range(start, prompt_len):
        value = _logprob(values[i], doc, f"token_logprobs[{i}]")
        total += value
        top = tops[i] if tops is not None and i < len(tops) else None
        if top is None:
            continue
        if not isinstance(top, dict):
            raise InvalidAnswer(f"top_logprobs[{i}] is {_kind(top)}, not an object", doc)
        best = max((_logprob(v, doc, f"top_logprobs[{i}]") for v in top.values()), default=None)
        if best is not None and value < best:
            greedy = False
    return total, greedy


def _logprob(value: Any, doc: dict[str, Any], where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidAnswer(f"{where} is {_kind(value)}, not a number", doc)
    if not math.isfinite(value) or value > 0:
        raise InvalidAnswer(f"{where} is {value}: a log-probability is finite and <= 0", doc)
    return float(value)


def _kind(value: Any) -> str:
    return "missing" if value is None else f"a {type(value).__name__}"


def _size(values: Any) -> str:
    return str(len(values)) if isinstance(values, list) else _kind(values)
