"""Step 5's one progress bar: a job counts every request it asks, across cache chunks, and a rerun that
resumes from the generation cache counts the answers it reads back (issue 31: the bar counted one
256-request chunk and restarted at 0)."""

from __future__ import annotations

from runner.contract.progress import Progress
from runner.job import answer as answer_step
from runner.job.flow import run
from tests.conftest import ROOT, compose

GSM8K = ["backend=fake", "task=gsm8k", "task.dataset.source=local",
         f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "tracking=none", "reference.mode=skip",
         "task.num_samples=5", "cache.chunk_size=2"]


def test_one_bar_counts_the_jobs_requests_across_chunks_and_resumed_cache_hits(tmp_path, monkeypatch):
    bars: list[Progress] = []

    class Recorded(Progress):
        def __init__(self, total, shown, desc="answers"):
            super().__init__(total, False, desc)
            self.updates: list[int] = []
            bars.append(self)

        def update(self, n=1):
            super().update(n)
            if n:
                self.updates.append(n)

    monkeypatch.setattr(answer_step, "Progress", Recorded)
    cache = f"cache.path={tmp_path / 'generations.sqlite'}"
    run(compose([*GSM8K, cache, f"output_dir={tmp_path / 'first'}"]))
    run(compose([*GSM8K, cache, f"output_dir={tmp_path / 'again'}"]))
    first, again = bars
    # GSM8K asks one generation per sample: 5 requests, computed in chunks of 2 (2 + 2 + 1), one bar
    assert (first.total, first.done, first.updates) == (5, 5, [2, 2, 1])
    assert (again.total, again.done, again.updates) == (5, 5, [5])  # all five read back from the cache at once
