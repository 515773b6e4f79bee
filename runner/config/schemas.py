"""The top-level schemas: one evaluation job and one ``python -m runner.quantize`` export.

The model, quant and task bases live in :mod:`runner.contract.task_config`; each backend's, task's,
tracker's and cache's own schema lives beside the code it configures, and :mod:`runner.config.store`
registers them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING

from runner.references.store import ReferenceConfig
from runner.reports.config import ReportConfig
from runner.stats.settings import StatsConfig
from runner.sweep.policy import GateConfig
from runner.sweep.summary import SweepConfig


@dataclass
class RunnerConfig:
    """The top-level job. Groups are typed by their own schemas (see the option files)."""

    model: Any = MISSING
    quant: Any = MISSING
    task: Any = MISSING
    backend: Any = MISSING
    tracking: Any = MISSING
    seed: int = 0
    reference: ReferenceConfig = field(default_factory=ReferenceConfig)
    stats: StatsConfig = field(default_factory=StatsConfig)
    cache: Any = MISSING
    sweep: SweepConfig = field(default_factory=SweepConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    gate: Optional[GateConfig] = None  # a release policy (conf/gate/); None: no release verdict, jobs as configured
    dry_run: bool = False  # list what would run (n, cached requests, estimated time) without loading a model
    # the run's directory (Hydra's); None only while Hydra prints the config (--cfg job --resolve), before one exists
    output_dir: Optional[str] = MISSING
    # true: hydra.run.dir may name a directory holding an earlier run's results, which this run replaces
    overwrite_output: bool = False
