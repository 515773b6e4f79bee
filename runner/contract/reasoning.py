"""Sampled runs and reasoning models: a task's ``sampling`` and ``chat_template_kwargs`` as requests carry
them, as the reference key names them, and the reasoning block a model writes before its answer.

Why here: every backend and every task meets these settings, and the job, ``runner.plan`` and the
backends must agree on them, so they live in the contract, next to the requests they change.

Reference key (TensorRT-LLM's accuracy suite keys a sampled entry by ``extra_acc_spec``, e.g.
``temperature=0.8,top_p=0.95`` for Llama-3.1-8B-Instruct FP8 in its MMLU and CNN/DailyMail tables):
``temperature=T,top_p=P`` then ``top_k=K`` where set. The seed is not keyed (upstream keys none; it is
logged with the run's config). Chat-template keyword arguments reach the model only through the chat
template, so they are keyed only when the task applies it, as ``enable_thinking=False`` (key=value,
sorted by key); upstream's entries of reasoning models were measured with the template's defaults and
carry no such part, so a run with the defaults keeps their key.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any, Mapping

from runner.contract.errors import ConfigError
from runner.contract.requests import GenerationRequest

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def sampled(sampling: Any) -> bool:
    """Whether ``task.sampling`` asks for sampling (a positive temperature)."""
    return bool(sampling.temperature)


def check_sampling(sampling: Any) -> None:
    """Refuse values no backend can run, before anything loads."""
    where = "task.sampling"
    t, p, k = sampling.temperature, sampling.top_p, sampling.top_k
    if t is not None and not (math.isfinite(t) and t >= 0):
        raise ConfigError("the temperature must be a finite number >= 0", where=f"{where}.temperature", given=t,
                          allowed="0 or null (greedy), or a positive temperature")
    if p is not None and not 0 < p <= 1:
        raise ConfigError("top_p must be within (0, 1]", where=f"{where}.top_p", given=p)
    if k is not None and k < 1:
        raise ConfigError("top_k must be at least 1", where=f"{where}.top_k", given=k)
    if sampled(sampling) and sampling.seed is None:
        raise ConfigError("a sampled run needs a seed (its answers are reproducible only from one)",
                          where=f"{where}.seed", given=None, fix="set task.sampling.seed=0 (any integer)")
    if not sampled(sampling) and (p is not None or k is not None):
        raise ConfigError("top_p and top_k apply only to a sampled run", where=where,
                          given=f"temperature={t}, top_p={p}, top_k={k}",
                          fix="set task.sampling.temperature to a positive value, or leave top_p and top_k null")


def apply_sampling(request: GenerationRequest, sampling: Any) -> GenerationRequest:
    """``request`` with the task's sampling parameters (unchanged when the task samples nothing)."""
    if not sampled(sampling):
        return request
    return replace(request, temperature=float(sampling.temperature), top_p=sampling.top_p,
                   top_k=sampling.top_k, seed=int(sampling.seed))


def template_kwargs(kwargs: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    """The chat-template keyword arguments as a frozen, sorted tuple (what :class:`ChatFormat` holds)."""
    return tuple(sorted((str(k), v) for k, v in dict(kwargs or {}).items()))


def key_parts(task: Any) -> list[str]:
    """The reference-key parts of a task's sampling and chat-template arguments (module docstring)."""
    parts: list[str] = []
    s = task.sampling
    if sampled(s):
        parts.append(f"temperature={s.temperature:g}")
        if s.top_p is not None:
            parts.append(f"top_p={s.top_p:g}")
        if s.top_k is not None:
            parts.append(f"top_k={s.top_k}")
    if task.apply_chat_template:
        for key, value in template_kwargs(task.chat_template_kwargs):
            parts.append(f"{key}={value if isinstance(value, (str, int, float, bool)) else json.dumps(value, sort_keys=True)}")
    if task.strip_thinking:
        parts.append("strip_thinking")
    return parts


def strip_thinking(text: str) -> str:
    """The answer after a reasoning block: the text after the last ``</think>``; with a ``<think>`` never
    closed (the output ran out of tokens), the text before it, so no partial reasoning is scored (the rule of
    TensorRT-LLM's ``tensorrt_llm/evaluate/post_processing.py``)."""
    end = text.rfind(THINK_CLOSE)
    if end != -1:
        return text[end + len(THINK_CLOSE):].strip()
    start = text.find(THINK_OPEN)
    return (text[:start] if start != -1 else text).strip()
