"""What tasks share beyond the contract: rows from a task's dataset config and seeded subsets. Every task
subclasses :class:`Evaluator` from here."""

from __future__ import annotations

import random
from typing import Any

from evaluators.data.sources import check_source, resolve_source, split_loader
from runner.contract.errors import ConfigError
from runner.contract.evaluator import Evaluator as Contract


class Evaluator(Contract):
    """The contract's :class:`~runner.contract.evaluator.Evaluator` with the parts most tasks use."""

    def load_rows(self, split: str | None = None, packaged: str | None = None) -> Any:
        """Rows of ``task.dataset``'s split (default ``task.dataset.split``) through ``datasets``, from a local
        copy or the Hub; sets :attr:`source_used`. ``packaged``: how to get data when no packaged copy exists."""
        ds = self.config.dataset
        check_source(ds)
        source = resolve_source(ds)
        if source == "packaged":
            raise ConfigError(f"task {self.config.name} has no packaged copy", where="task.dataset.source",
                              given="packaged", fix=packaged or "set task.dataset.local_path to a local copy")
        self.source_used = source
        _, load = split_loader(ds, source, "set task.dataset.local_path to a local copy")
        return load(split or ds.split)

    @staticmethod
    def seeded_subset(count: int, num_samples: int, seed: int, salt: str) -> list[int]:
        """Row indices of a seeded sample of ``num_samples`` of ``count`` rows, in row order (all when fewer)."""
        if num_samples >= count:
            return list(range(count))
        return sorted(random.Random(f"{salt}:{seed}").sample(range(count), num_samples))

    @staticmethod
    def nested_subset(count: int, num_samples: int, seed: int, salt: str) -> list[int]:
        """Row indices of a seeded sample that grows by prefix: the first ``num_samples`` of one seeded shuffle, in
        row order. A smaller draw lies inside every larger one of the same seed, so the looks of an extended run
        are nested and a reference recorded on more samples holds every smaller run's."""
        order = list(range(count))
        random.Random(f"{salt}:{seed}").shuffle(order)
        return sorted(order[:num_samples])
