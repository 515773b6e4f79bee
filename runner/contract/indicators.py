"""Per-sample indicators of an answer that is not like-for-like: the prompt was cut to the context, the generation
stopped at its token limit, the answer was empty or the task could not read one from it, or the backend failed
(an infrastructure failure: an error instead of an answer). A run that shows them more often than its reference
compares truncations, not models (:func:`runner.stats.dispatch.indicator_check`).

A backend says what it knows of each generated text by answering a :class:`Generated` (a ``str`` that carries
its :class:`GenerationFacts`); a plain ``str`` says nothing (None: unknown). The job joins a sample's facts with its
evaluator's reading into ``ScoredSample.meta[INDICATORS]``, which samples.jsonl and the reference's rows keep.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

INDICATORS = "indicators"
"""The meta field of a sample's indicators: ``{name: True | False | None}`` (None: not known)."""

INPUT_CUT, HIT_LIMIT, UNPARSED, FAILED = "input_cut", "hit_limit", "unparsed", "failed"
NAMES = (INPUT_CUT, HIT_LIMIT, UNPARSED, FAILED)
DESCRIPTIONS = {INPUT_CUT: "prompt cut to the context", HIT_LIMIT: "generation stopped at its token limit",
                UNPARSED: "answer empty or unparseable", FAILED: "backend failed (no answer)"}


@dataclass(frozen=True)
class GenerationFacts:
    """What a backend knows of one generated text: None where it cannot tell."""

    input_cut: bool | None = None  # the prompt was longer than the input budget and was cut
    hit_limit: bool | None = None  # generation ended because it reached max_tokens (finish_reason "length")
    failed: bool = False  # an error instead of an answer (the text is empty); never cached


class Generated(str):
    """A generated text with its :class:`GenerationFacts`; everywhere else it is the text itself."""

    facts: GenerationFacts

    def __new__(cls, text: str, facts: GenerationFacts) -> "Generated":
        made = super().__new__(cls, text)
        made.facts = facts
        return made

    def __reduce__(self) -> tuple[Any, ...]:
        return Generated, (str(self), self.facts)

    def with_text(self, text: str) -> "Generated":
        """The same facts on another text (the answer once a reasoning block is cut from it)."""
        return Generated(text, self.facts)


def facts_of(response: object) -> GenerationFacts | None:
    """The facts a generated response carries (None: a plain text, or not a generation)."""
    return response.facts if isinstance(response, Generated) else None


def plain(response: object) -> object:
    """The response as the task scores it: a generated text as a plain ``str`` (a scorer, and lm-eval's own
    ``process_results``, which casts a target to ``type(answer)``, must never see the facts), anything else as is."""
    return str(response) if isinstance(response, Generated) else response


def same_facts(response: str, text: str) -> str:
    """``text`` (``response`` cut at a stop string, its reasoning block dropped) with the facts ``response`` carried."""
    return response.with_text(text) if isinstance(response, Generated) else text


def facts_to_dict(facts: GenerationFacts) -> dict[str, Any]:
    return asdict(facts)


def facts_from_dict(data: Mapping[str, Any]) -> GenerationFacts:
    """The stored form back; anything but a boolean or null in a field raises ValueError."""
    values = {}
    for name in (INPUT_CUT, HIT_LIMIT, FAILED):
        value = data.get(name)
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"generation facts field {name} is {value!r}, not a boolean")
        values[name] = value
    return GenerationFacts(values[INPUT_CUT], values[HIT_LIMIT], bool(values[FAILED]))


def _any(values: Iterable[bool | None]) -> bool | None:
    """True when one is True; False when all are False; else unknown."""
    seen = list(values)
    if any(v is True for v in seen):
        return True
    return False if seen and all(v is False for v in seen) else None


def sample_indicators(responses: Iterable[object], unparsed: bool | None) -> dict[str, bool | None] | None:
    """A sample's indicators from its responses and its evaluator's reading of the answer (``unparsed``); None for a
    sample without generated text (a log-likelihood task: nothing is cut, limited or parsed)."""
    texts = [r for r in responses if isinstance(r, str)]
    if not texts:
        return None
    facts = [facts_of(t) for t in texts]
    failed = any(f is not None and f.failed for f in facts)  # a failure is always said: a plain text is an answer
    empty = all(not t.strip() for t in texts)
    return {INPUT_CUT: _any(f.input_cut if f is not None else None for f in facts),
            HIT_LIMIT: _any(f.hit_limit if f is not None else None for f in facts),
            UNPARSED: True if empty or unparsed else (False if unparsed is False else None),
            FAILED: failed}


def read(meta_value: object) -> dict[str, bool | None] | None:
    """Indicators as stored (meta or a reference row): a mapping of known names to booleans or null; None when
    absent; ValueError when malformed."""
    if meta_value is None:
        return None
    if not isinstance(meta_value, Mapping):
        raise ValueError(f"indicators are {type(meta_value).__name__}, not a mapping")
    out: dict[str, bool | None] = {}
    for name in NAMES:
        value = meta_value.get(name)
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"indicator {name} is {value!r}, not a boolean or null")
        out[name] = value
    return out
