"""What every backend built from a job keeps: the job's settings, and the effective spec once entered.

A backend's constructor validates its settings, then hands them to :class:`ConfiguredBackend`, which
holds them under the names the job and the tests read (``config``, ``model_config``, ``quant``,
``limits``, ``chat``, ``progress``). ``info()`` answers once ``__enter__`` has set ``_info``. A job
hands it its progress bar (:meth:`ConfiguredBackend.track`), which every bulk call then advances.
"""

from __future__ import annotations

from typing import Any

from runner.contract.backend import Backend, BackendInfo, ChatFormat, TaskLimits
from runner.contract.progress import Progress, Shared


class ConfiguredBackend(Backend):
    """A :class:`Backend` holding the settings it was built from; subclasses validate them first."""

    def __init__(self, config: Any, model: Any, quant: Any, limits: TaskLimits,
                 chat: ChatFormat = ChatFormat(), progress: bool = True) -> None:
        self.config = config
        self.model_config = model
        self.quant = quant
        self.limits = limits
        self.chat = chat
        self.progress = progress
        self._info: BackendInfo | None = None
        self.job_progress: Progress | None = None

    def track(self, progress: Progress | None) -> None:
        """Advance ``progress`` (the job's bar) with every answer from now on; None: a bar per bulk call."""
        self.job_progress = progress

    def bar(self, total: int, desc: str) -> Progress | Shared:
        """What one bulk call of ``total`` requests advances: the job's bar, else a bar of its own
        (shown when ``progress``); the call closes it when done."""
        if self.job_progress is not None:
            return Shared(self.job_progress)
        return Progress(total, self.progress, desc)

    def info(self) -> BackendInfo:
        if self._info is None:
            raise RuntimeError("info() is available once the backend has been entered")
        return self._info
