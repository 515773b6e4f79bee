"""Passkey retrieval: TensorRT-LLM's synthetic long-context gate, the same rows in the same order.

Upstream (NVIDIA/TensorRT-LLM, ``CliFlowAccuracyTestHarness.eval_long_context`` in
tests/integration/defs/accuracy/accuracy_core.py) runs
``examples/infinitebench/construct_synthetic_dataset.py --test_case=build_passkey --test_level=L``
(level 3 for 64k, 4 for 128k), which writes ``passkey.jsonl``, then
``examples/eval_long_context.py --task=passkey --stop_idx=n``, which evaluates its first n rows
(n 20). This module builds those rows itself, nothing is downloaded:

- RNG: ``random.seed(seed)`` (upstream's ``--random_seed``, default 0, never passed by the tests;
  the runner's ``seed`` is 0 by default), then per row ``passkey_digits`` calls of
  ``random.randint(0, 9)``: a 5-digit key that may start with 0.
- Row order: for each depth ``j`` in ``range(0, num_noise + 1, noise_step)``, 5 rows (5 keys). The
  context is the filler line ``j`` times, the passkey line, the filler line ``num_noise - j``
  times. So upstream's first 20 rows put the passkey after 0, 1, 2 and 3 steps of filler: in the
  first ~5% of the text (64k: 0/45/90/135 of 2610 lines). Kept: that is what its reference measured.
- Levels (``num_noise``, ``noise_step``), upstream's table by test level 0-5: 8k (326, 6),
  16k (652, 12), 32k (1305, 22), 64k (2610, 45), 128k (5220, 90), 256k (10440, 180). This runner's
  own CPU levels: 1k (38, 1) and 4k (160, 3), sized so SmolLM2's tokenizer (25 tokens per filler
  line, like Llama's) keeps the prompt within the level. Any other length: (length - 128) // 25
  lines and a step of lines / 58, at least 1 each.
- Prompt: InfiniteBench's passkey template as upstream's ``create_prompt`` fills it: a one-line
  header, the context, the question, and ``The pass key is`` for the model to complete. No chat
  template (upstream wraps the prompt only for Qwen/InternLM architectures, with a fixed template
  of its own, not reproduced; its passkey references are Llama models). The tokenizer adds its
  special tokens (BOS); a prompt over ``max_input_len`` loses its first tokens, as upstream's
  left-truncating tokenizer does.
- Generation: greedy, 6 new tokens (``DATA_NAME_TO_MAX_NEW_TOKENS["passkey"]`` in
  examples/infinitebench/eval_utils.py), no stop string. accuracy_core's MAX_OUTPUT_LEN 50 only
  sizes upstream's engine.
- Score (``get_score_one_passkey``): 100 when the first run of ASCII digits in the output equals
  the key, else 0; ``accuracy`` is the mean.

Options that leave upstream's protocol get an ``extra_acc_spec`` part: ``depth`` (uniform, start,
end or a fraction in place of the schedule), ``num_noise``/``noise_step`` other than the level's,
``passkey_digits``, ``max_output_len``, the chat template and a system prompt.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from evaluators.base import Evaluator
from evaluators.deviations import chat_deviation
from evaluators.metrics import mean
from evaluators.responses import only_text
from runner.contract.errors import ConfigError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.requests import Request, Response, GenerationRequest
from runner.contract.task_config import TaskConfig

# InfiniteBench's passkey format (examples/infinitebench/construct_synthetic_dataset.py and
# eval_utils.create_prompt in TensorRT-LLM): short protocol strings, byte for byte.
HEADER = ("There is an important info hidden inside a lot of irrelevant text. "
          "Find it and memorize it. I will quiz you about the important information.\n\n")
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"
NEEDLE = "The pass key is {key}. Remember it. {key} is the pass key.\n"
QUESTION = "What is the pass key?"
ANSWER_CUE = "The pass key is"
REPEATS = 5  # keys per depth (upstream's repeat_time)

# length -> (num_noise, noise_step). 8k-256k: upstream's test levels 0-5; 1k and 4k: this runner's.
UPSTREAM_LEVELS = {8192: (326, 6), 16384: (652, 12), 32768: (1305, 22), 65536: (2610, 45),
                   131072: (5220, 90), 262144: (10440, 180)}
LEVELS = {1024: (38, 1), 4096: (160, 3)} | UPSTREAM_LEVELS
TOKENS_PER_NOISE = 25  # the filler line in Llama's and SmolLM2's tokenizers (upstream's comment says 25 too)
FIXED_TOKENS = 128  # room for the header, passkey line and question when deriving other lengths

DEPTHS = ("upstream", "uniform", "start", "end")
UPSTREAM_DIGITS = 5
UPSTREAM_MAX_OUTPUT = 6
MIN_LENGTH = 128
_LEVEL = re.compile(r"_(\d+)k$")
_DIGITS = re.compile(r"[0-9]+")


@dataclass
class PasskeyTaskConfig(TaskConfig):
    chance_level: Optional[float] = 0.0  # a 5-digit key is not guessed
    sigma: float = 0.0  # the exact rule: a model that retrieved every key must still retrieve every key
    length: int = 4096  # the level in tokens: picks num_noise/noise_step (see evaluators/tasks/passkey.py)
    num_noise: Optional[int] = None  # filler lines per prompt; None: the level's (upstream's table)
    noise_step: Optional[int] = None  # filler lines between successive depths; None: the level's
    passkey_digits: int = 5
    depth: str = "upstream"  # upstream (its depth schedule) | uniform (seeded) | start | end | a fraction 0..1


CONFIG = PasskeyTaskConfig
"""The task's schema, registered as ``schema_task_passkey``."""


def parse_depth(depth: str) -> float | str:
    """``upstream``/``uniform`` as they are, ``start``/``end``/a number as a fraction; ValueError otherwise."""
    if depth in ("upstream", "uniform"):
        return depth
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


def level_layout(length: int) -> tuple[int, int]:
    """(num_noise, noise_step) of a level: the table's, else derived from the length."""
    if length in LEVELS:
        return LEVELS[length]
    num_noise = max(1, (length - FIXED_TOKENS) // TOKENS_PER_NOISE)
    return num_noise, max(1, round(num_noise / 58))


def build_context(key: str, before: int, num_noise: int) -> str:
    """``before`` filler lines, the passkey line, the remaining filler lines."""
    return NOISE * before + NEEDLE.format(key=key) + NOISE * (num_noise - before)


def build_prompt(context: str) -> str:
    return f"{HEADER}{context}\n\n{QUESTION}\n\n{ANSWER_CUE}"


def first_number(output: str) -> str:
    """The first run of ASCII digits, "" without one (InfiniteBench's ``first_int_match``)."""
    match = _DIGITS.search(output)
    return match.group(0) if match else ""


class PasskeyEvaluator(Evaluator):
    """Generates upstream's passkey rows from the seed and scores exact retrieval (0 or 100 per sample)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config, source_used="generated")
        try:
            self.depth = parse_depth(str(config.depth))
        except ValueError:
            raise ConfigError("unknown passkey depth", where="task.depth", given=config.depth,
                              allowed="upstream, uniform, start, end, or a fraction between 0 and 1") from None
        if not MIN_LENGTH <= config.length <= config.max_input_len:
            raise ConfigError("the passkey level must fit the task's input limit", where="task.length",
                              given=config.length, allowed=f"{MIN_LENGTH}..task.max_input_len ({config.max_input_len})",
                              fix="raise task.max_input_len as well, or choose a shorter length")
        if not 1 <= config.passkey_digits <= 32:
            raise ConfigError("passkey_digits out of range", where="task.passkey_digits", given=config.passkey_digits,
                              allowed="1..32")
        self.level_noise, self.level_step = level_layout(config.length)
        self.num_noise = self.level_noise if config.num_noise is None else config.num_noise
        self.noise_step = self.level_step if config.noise_step is None else config.noise_step
        if self.num_noise < 1:
            raise ConfigError("num_noise out of range", where="task.num_noise", given=config.num_noise,
                              allowed="1 or more filler lines, or null for the level's")
        if self.noise_step < 1:
            raise ConfigError("noise_step out of range", where="task.noise_step", given=config.noise_step,
                              allowed="1 or more lines, or null for the level's")

    @property
    def num_rows(self) -> int:
        """How many rows upstream's generator writes for this layout."""
        return len(range(0, self.num_noise + 1, self.noise_step)) * REPEATS

    def extra_acc_spec(self) -> str | None:
        """Settings that make this run differ from the level's protocol (part of the reference key)."""
        c = self.config
        parts = []
        if c.length != nominal_length(c.name):
            parts.append(f"length={c.length}")
        if self.num_noise != self.level_noise:
            parts.append(f"num_noise={self.num_noise}")
        if self.noise_step != self.level_step:
            parts.append(f"noise_step={self.noise_step}")
        if c.passkey_digits != UPSTREAM_DIGITS:
            parts.append(f"passkey_digits={c.passkey_digits}")
        if str(c.depth) != "upstream":
            parts.append(f"depth={c.depth}")
        if c.max_output_len != UPSTREAM_MAX_OUTPUT:
            parts.append(f"max_output_len={c.max_output_len}")
        parts += chat_deviation(c)
        return ",".join(parts) or None

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        """The first ``num_samples`` rows of upstream's passkey.jsonl for this layout and seed."""
        if num_samples > self.num_rows:
            raise ConfigError("more passkey samples than the layout has rows", where="task.num_samples",
                              given=num_samples, allowed=f"1..{self.num_rows} ({self.num_noise} filler lines, "
                              f"a depth every {self.noise_step}, {REPEATS} keys each)",
                              fix="lower task.num_samples or task.noise_step")
        rng = random.Random(seed)  # the same stream as upstream's random.seed(seed) + random.randint
        depth_rng = random.Random(f"passkey-depth:{seed}")  # only for depth=uniform; keeps the key stream intact
        out = []
        for i in range(num_samples):
            before = (i // REPEATS) * self.noise_step
            if self.depth == "uniform":
                before = round(depth_rng.random() * self.num_noise)
            elif isinstance(self.depth, float):
                before = round(self.depth * self.num_noise)
            key = "".join(str(rng.randint(0, 9)) for _ in range(self.config.passkey_digits))
            prompt = build_prompt(build_context(key, before, self.num_noise))
            out.append(Sample(id=f"{self.num_noise}x{self.noise_step}/{i}", prompt=prompt, target=key,
                              meta={"noise_before": before, "depth": round(before / self.num_noise, 4)}))
        return out

    def requests(self, sample: Sample) -> list[Request]:
        return [GenerationRequest(prompt=sample.prompt, max_tokens=self.config.max_output_len)]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        output = only_text(responses)
        found = first_number(output)
        correct = found == sample.target
        # The prompt is long and regenerated from the seed: keep only its end in the per-sample record.
        return ScoredSample(sample.id, "..." + sample.prompt[-200:], output, sample.target, 100.0 if correct else 0.0,
                            dict(sample.meta) | {"extracted": found})

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        if not scored:
            return {self.metric: float("nan")}
        return {self.metric: mean(s.score for s in scored)}
