"""Passkey retrieval: a number hidden in a long filler text, asked for at the end.

TensorRT-LLM's long-context gate (levels 64k and 128k: n 20, alpha 0.5, sigma 0, so the
threshold equals the reference). Each sample is generated from the seed, nothing is downloaded:

- a random ``passkey_digits``-digit passkey (no leading zero);
- a prompt of about ``length`` tokens: a short instruction, filler sentences repeated (the
  same for every sample, so only the passkey and its place differ), the passkey sentence at
  the sample's depth, and a closing question that the model completes
  (``... The passkey is``);
- the depth: ``uniform`` draws a fraction in [0, 1] per sample; ``start`` puts the passkey
  right after the instruction, ``end`` right before the question, a number such as ``0.5``
  puts it at that fraction of the filler.

Length: the evaluator does not see the model's tokenizer, so the filler is sized with an
estimate of ``chars_per_token`` (default 4.0). The filler is plain English; SmolLM2's tokenizer
reads 4.59 characters per token on it, so the prompt lands a little below ``length`` tokens
(87-89%) rather than above it; a tokenizer that splits English more finely needs a lower
``chars_per_token``. A prompt that
were still longer than ``max_input_len`` would lose its first tokens in the backend, which is
why ``length`` may not exceed ``max_input_len``.

Score: 100 when the first run of digits in the output equals the passkey, else 0; the
metric ``accuracy`` is their mean.
"""

from __future__ import annotations

import random
import re
from typing import Any, Sequence

from evaluators.base import Request, Response, Sample, ScoredSample
from evaluators.protocol import short_hash
from runner.backends.base import GenerationRequest
from runner.errors import ConfigError

INSTRUCTION = ("A passkey is hidden somewhere in the long text below, among sentences that do not matter. "
               "Read all of it, find the passkey and remember it: you will be asked for it at the end.\n\n")
FILLER = ("The river runs past the old mill. Birds sing in the morning light. "
          "A gentle wind moves through the tall grass. The road winds on toward the hills. ")
NEEDLE = "The passkey is {key}. Keep {key} in mind: it is the passkey. "
QUESTION = "\n\nWhat is the passkey? The passkey is"
DEPTHS = ("uniform", "start", "end")
UPSTREAM_DIGITS = 5
UPSTREAM_MAX_OUTPUT = 50
MIN_LENGTH = 64
_LEVEL = re.compile(r"_(\d+)k$")
_DIGITS = re.compile(r"\d+")


def parse_depth(depth: str) -> float | None:
    """A fixed fraction for ``start``/``end``/a number, None for ``uniform``; ValueError otherwise."""
    if depth == "uniform":
        return None
    if depth == "start":
        return 0.0
    if depth == "end":
        return 1.0
    value = float(depth)
    if not 0.0 <= value <= 1.0:
        raise ValueError(depth)
    return value


def nominal_length(task_name: str) -> int | None:
    """The length a level's name promises (``passkey_retrieval_64k`` -> 65536), None without one."""
    match = _LEVEL.search(task_name)
    return int(match.group(1)) * 1024 if match else None


def build_prompt(key: str, depth: float, length: int, chars_per_token: float) -> tuple[str, int]:
    """The prompt and the index of the filler sentence the passkey precedes."""
    sentences = [s + ". " for s in FILLER.strip().rstrip(".").split(". ")]
    fixed = len(INSTRUCTION) + len(NEEDLE.format(key=key)) + len(QUESTION)
    budget = max(0, int(length * chars_per_token) - fixed)
    filler: list[str] = []
    used = 0
    while True:
        sentence = sentences[len(filler) % len(sentences)]
        if used + len(sentence) > budget:
            break
        filler.append(sentence)
        used += len(sentence)
    at = round(depth * len(filler))
    body = "".join(filler[:at]) + NEEDLE.format(key=key) + "".join(filler[at:])
    return INSTRUCTION + body.rstrip() + QUESTION, at


def first_number(output: str) -> str | None:
    match = _DIGITS.search(output)
    return match.group(0) if match else None


class PasskeyEvaluator:
    """Generates passkey prompts from the seed and scores exact retrieval (0 or 100 per sample)."""

    def __init__(self, config: Any) -> None:
        try:
            self.fixed_depth = parse_depth(str(config.depth))
        except ValueError:
            raise ConfigError("unknown passkey depth", where="task.depth", given=config.depth,
                              allowed="uniform, start, end, or a fraction between 0 and 1") from None
        if not MIN_LENGTH <= config.length <= config.max_input_len:
            raise ConfigError("the passkey prompt length must fit the task's input limit", where="task.length",
                              given=config.length, allowed=f"{MIN_LENGTH}..task.max_input_len ({config.max_input_len})",
                              fix="raise task.max_input_len as well, or choose a shorter length")
        if not 1 <= config.passkey_digits <= 32:
            raise ConfigError("passkey_digits out of range", where="task.passkey_digits", given=config.passkey_digits,
                              allowed="1..32")
        if not 1.0 <= config.chars_per_token <= 16.0:
            raise ConfigError("chars_per_token out of range", where="task.chars_per_token",
                              given=config.chars_per_token, allowed="1..16 (4.0 suits English text)")
        self.config = config
        self.metric = config.metric
        self.higher_is_better = config.higher_is_better
        self.source_used = "generated"

    def extra_acc_spec(self) -> str | None:
        """Settings that make this run differ from the level's protocol (part of the reference key)."""
        c = self.config
        parts = []
        if c.length != nominal_length(c.name):
            parts.append(f"length={c.length}")
        if c.passkey_digits != UPSTREAM_DIGITS:
            parts.append(f"passkey_digits={c.passkey_digits}")
        if str(c.depth) != "uniform":
            parts.append(f"depth={c.depth}")
        if c.max_output_len != UPSTREAM_MAX_OUTPUT:
            parts.append(f"max_output_len={c.max_output_len}")
        if c.apply_chat_template:
            parts.append("chat_template=true")
        if c.system_prompt:
            parts.append("system_prompt=" + short_hash(c.system_prompt))
        return ",".join(parts) or None

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        c = self.config
        out = []
        for i in range(num_samples):
            rng = random.Random(f"passkey:{seed}:{c.length}:{i}")
            key = str(rng.randint(10 ** (c.passkey_digits - 1), 10 ** c.passkey_digits - 1))
            depth = rng.random() if self.fixed_depth is None else self.fixed_depth
            prompt, at = build_prompt(key, depth, c.length, c.chars_per_token)
            out.append(Sample(id=f"{c.length}/{seed}/{i}", prompt=prompt, target=key,
                              meta={"depth": round(depth, 4), "sentence": at,
                                    "estimated_tokens": round(len(prompt) / c.chars_per_token)}))
        return out

    def requests(self, sample: Sample) -> list[Request]:
        return [GenerationRequest(prompt=sample.prompt, max_tokens=self.config.max_output_len)]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        (output,) = responses
        assert isinstance(output, str)
        found = first_number(output)
        correct = found == sample.target
        # The prompt is long and regenerated from the seed: keep only its end in the per-sample record.
        return ScoredSample(sample.id, "..." + sample.prompt[-200:], output, sample.target, 100.0 if correct else 0.0,
                            dict(sample.meta) | {"extracted": found})

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        if not scored:
            return {self.metric: float("nan")}
        return {self.metric: sum(s.score for s in scored) / len(scored)}
