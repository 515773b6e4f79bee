"""What a task asks a backend and what comes back: strings in, results out, in request order."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, Union


@dataclass(frozen=True)
class GenerationRequest:
    """Complete ``prompt``. Greedy when temperature is None or 0; sampled runs need a seed."""

    prompt: str
    max_tokens: int
    stop: tuple[str, ...] = ()
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    # A chat as (role, content) pairs, rendered with the chat template instead of ``prompt``
    # (tasks whose rows are conversations, e.g. json_mode_eval). None: ``prompt`` is the user turn.
    messages: tuple[tuple[str, str], ...] | None = None
    # JSON Schema (JSON text) the output must follow; backends with guided decoding enabled
    # (TaskLimits.guided_decoding) constrain generation to it, others ignore it.
    json_schema: str | None = None
    # When the prompt exceeds max_input_len: "left" drops its first tokens (the default), "right"
    # drops its last ones (TensorRT-LLM's truncate_prompt_tokens). ``suffix`` is appended after
    # ``prompt`` and never cut: with "right", the end of ``prompt`` gives way before it.
    truncation: str = "left"
    suffix: str = ""

    @property
    def greedy(self) -> bool:
        return not self.temperature

    def sampling_key(self) -> tuple:
        """Requests with the same key can share one batched call."""
        return (self.max_tokens, self.stop, self.temperature, self.top_p, self.top_k, self.seed)


@dataclass(frozen=True)
class LoglikelihoodRequest:
    """Log-probability of ``continuation`` given ``context``.

    ``rolling_window``: score every token of a whole text (``continuation``, with an empty ``context``) as
    lm-evaluation-harness' ``loglikelihood_rolling`` does: the text tokenized alone, its first token predicted from
    the prefix token (BOS, else EOS), the tokens cut into lm-eval's disjoint rolling windows of at most this many
    tokens, each window scored given the tokens before it in its row, the log-probabilities summed. None: one
    sequence (``context`` + ``continuation``), cut to the task's input length. A different window is a different
    answer, so the generation cache keys it. ``messages``: the context as a chat ((role, content) turns: few-shot
    turns, a system text), rendered with the chat template and its generation prompt before ``continuation``;
    ``context`` is then the last user turn, for display. None: ``context`` is the text (or the one user turn).
    ``top_tokens``: also return, at every scored position, the k most likely tokens and their log-probabilities
    (:mod:`runner.contract.top_tokens`; a fidelity record); None: not asked (backends that cannot, answer without)."""

    context: str
    continuation: str
    rolling_window: int | None = None
    messages: tuple[tuple[str, str], ...] | None = None
    top_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.rolling_window is not None and self.messages is not None:
            raise ValueError("a rolling request scores a whole text: it has no chat context")
        if self.rolling_window is not None and (self.context or isinstance(self.rolling_window, bool)
                                                or not isinstance(self.rolling_window, int) or self.rolling_window < 1):
            raise ValueError(f"a rolling request scores a whole text in windows of >= 1 tokens: context "
                             f"{self.context[:40]!r}, rolling_window {self.rolling_window!r}")
        if self.top_tokens is not None and (isinstance(self.top_tokens, bool) or not isinstance(self.top_tokens, int)
                                            or self.top_tokens < 1):
            raise ValueError(f"top_tokens is a number of tokens >= 1, or None: {self.top_tokens!r}")


@dataclass(frozen=True)
class LoglikelihoodResult:
    logprob: float
    is_greedy: bool  # every continuation token is the argmax at its position
    num_tokens: int
    top_tokens: str | None = None  # the per-position top-k record when the request asked (runner.contract.top_tokens)


Request = Union[GenerationRequest, LoglikelihoodRequest]
Response = Union[str, LoglikelihoodResult]


def response_problem(request: Request, response: object) -> str | None:
    """What is wrong with ``response`` as the answer to ``request`` (None: nothing): the one check every
    backend's answer passes before it is scored or cached, and every cached row when it is read back."""
    if isinstance(request, GenerationRequest):
        return None if isinstance(response, str) else f"a {type(response).__name__} where a generated text belongs"
    if not isinstance(response, LoglikelihoodResult):
        return f"a {type(response).__name__} where a log-likelihood result belongs"
    value = response.logprob
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value > 0:
        return f"log-probability {value!r} (a log-probability is a finite number <= 0)"
    if not isinstance(response.is_greedy, bool):
        return f"is_greedy {response.is_greedy!r} (a boolean)"
    if isinstance(response.num_tokens, bool) or not isinstance(response.num_tokens, int) or response.num_tokens < 0:
        return f"num_tokens {response.num_tokens!r} (a count of tokens)"
    if response.top_tokens is not None and not isinstance(response.top_tokens, str):
        return f"top_tokens {type(response.top_tokens).__name__} (an encoded top-k record, or None)"
    return None


def cut_at_stop(text: str, stops: Sequence[str]) -> str:
    """Cut ``text`` before the first stop string.

    Engines that match stop strings as token sequences can miss one tokenized differently inside
    the output; cutting the text as well gives every backend the same result.
    """
    cut = len(text)
    for stop in stops:
        pos = text.find(stop)
        if pos != -1:
            cut = min(cut, pos)
    return text[:cut]
