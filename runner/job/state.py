"""What one job carries from step to step: the objects built before the model loads (:class:`Job`),
what was loaded (:class:`Loaded`) and what the job produced (:class:`Outcome`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.config.schemas import RunnerConfig
from runner.contract.backend import Backend, BackendInfo, ChatFormat, TaskLimits
from runner.contract.evaluator import Evaluator
from runner.contract.spec import AccuracySpec
from runner.contract.task_config import ModelConfig, QuantConfig, TaskConfig
from runner.references.samples import SampleRow
from runner.references.store import Reference
from runner.stats.decision import Decision
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.noise import MeasuredNoise
from runner.stats.data.tolerance import Tolerance
from runner.tracking.trackers import Tracker


@dataclass
class Outcome:
    """What a job produced; ``exit_status`` is what the command line exits with."""

    exit_status: int
    score: float
    metrics: dict[str, float]
    spec: AccuracySpec
    output_dir: Path
    decision: Decision | None = None
    run_id: str | None = None
    reference_file: Path | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Job:
    """Everything built from the typed config before the model loads; the later steps fill in the rest."""

    config: RunnerConfig
    task: TaskConfig
    model: ModelConfig
    quant: QuantConfig
    evaluator: Evaluator
    backend: Backend
    tracker: Tracker
    out_dir: Path
    ref_dir: Path
    defaults: HypothesisParams
    limits: TaskLimits
    chat: ChatFormat
    notes: list[str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)  # notes already printed as warnings (runner.job.warn)
    reference: Reference | None = None  # the matched reference entry, once looked up
    reference_rows: dict[str, SampleRow] | None = None  # its per-sample scores, when a paired test can use them
    tolerance: Tolerance | None = None  # the GO claim's, once the reference is known
    asked_num_samples: int | None = None  # task.num_samples when the run set it; None: it inherits the reference's n
    reference_num_samples: int | None = None  # the reference entry's n when it differs from the n asked for
    gates: list[Any] = field(default_factory=list)  # the job's own further gates (a speculative run's acceptance length)
    host: dict[str, str] = field(default_factory=dict)  # where this run is measured (runner.contract.fingerprint)
    noise: MeasuredNoise | None = None  # the reference's measured noise as the decision reads it (runner.job.noise)

    @property
    def mode(self) -> str:
        return self.config.reference.mode


@dataclass
class Loaded:
    """The model as loaded: what the backend reports, and the effective spec with the task's protocol
    deviations, which is the reference key."""

    info: BackendInfo
    spec: AccuracySpec

