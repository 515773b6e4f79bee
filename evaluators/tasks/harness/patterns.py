"""A task's own regular expressions over the model's answers, bounded in time.

lm-eval runs a task's ``filter_list`` patterns (``regex_pattern`` of the ``regex`` and ``multi_choice_regex``
filters, their ``regexes_to_ignore``) and a metric's ``regexes_to_ignore`` (``exact_match``) with Python's
``re``. A pattern with nested repetition such as ``(a+)+$`` backtracks exponentially on an answer that almost
matches, and no answer is in the runner's hands. Where a task names such patterns, the filters and the
per-document scoring run within :data:`PATTERN_MAX_S` per answer (:func:`runner.contract.deadline.within`
interrupts ``re`` as it backtracks); past it, a message names the task, the filter or metric and the patterns.
The answers are in the generation cache by then, so a rerun asks the model nothing again.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from runner.contract.deadline import Overran, within
from runner.contract.errors import ConfigError

PATTERN_MAX_S = 10.0
"""Per answer: a pattern that takes longer over an answer of a few kilobytes backtracks without end."""
PATTERN_KEYS = ("regex_pattern", "regexes_to_ignore")


def filter_patterns(config: Any) -> dict[str, list[str]]:
    """The patterns each filter of the task's ``filter_list`` names, by the filter's name."""
    out: dict[str, list[str]] = {}
    for entry in config.filter_list or []:
        if isinstance(entry, dict):
            steps = entry.get("filter") or []
            out[str(entry.get("name"))] = [p for step in steps if isinstance(step, dict) for p in _named(step)]
    return out


def metric_patterns(config: Any) -> list[str]:
    """The patterns the task's ``metric_list`` hands its metrics (``regexes_to_ignore``)."""
    return [p for entry in config.metric_list or [] if isinstance(entry, dict) for p in _named(entry)]


def _named(mapping: dict[str, Any]) -> list[str]:
    out = []
    for key in PATTERN_KEYS:
        value = mapping.get(key)
        if isinstance(value, list):
            out += [str(v) for v in value]
        elif value is not None:
            out.append(str(value))
    return out


@contextmanager
def bounded(task: str, part: str, patterns: list[str], answers: int) -> Iterator[None]:
    """Run the body (a filter over ``answers`` answers, or one document's scoring) within :data:`PATTERN_MAX_S`
    per answer when ``patterns`` is not empty; past it, a message naming ``task``, ``part`` and the patterns."""
    if not patterns:
        yield
        return
    limit = PATTERN_MAX_S * max(answers, 1)
    try:
        with within(limit):
            yield
    except Overran as err:
        raise ConfigError("a regular expression of the task ran too long over the model's answers",
                          where=f"lm-eval task {task}: {part}", given=f"{', '.join(repr(p) for p in patterns)} ({err} "
                                                                    f"over {answers} answer(s))",
                          allowed=f"at most {PATTERN_MAX_S:.0f} s per answer",
                          fix="write the pattern without nested repetition (such as (a+)+ or (a|a)+), which "
                              "backtracks without end on an answer that almost matches; the answers are in the "
                              "generation cache, so a rerun asks the model nothing again") from None
