"""Reference writes that cannot lose entries: writers in separate processes, each with its own cache
directory (two CI jobs, two users), recording into one references file keep every entry."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

from runner.contract.spec import AccuracySpec
from runner.references.recording import record
from runner.references.store import lookup
from runner.stats.data.hypothesis import HypothesisParams

WRITERS, PROCESSES = 60, 6
DEFAULTS = HypothesisParams(alpha=0.05, beta=0.2, sigma=50.0, num_samples=4096)


def _write(ref_dir: str, cache_root: str, i: int) -> None:
    os.environ["RUNNER_CACHE_DIR"] = f"{cache_root}/cache-{i}"  # each writer its own cache directory
    record(ref_dir, "mmlu", "accuracy", f"org/model-{i}", AccuracySpec(), 50.0 + i / 10, {"writer": i})


def test_sixty_writers_with_separate_cache_directories_keep_sixty_entries(tmp_path: Path) -> None:
    refs = tmp_path / "refs"
    context = multiprocessing.get_context("fork")
    with context.Pool(PROCESSES) as pool:
        pool.starmap(_write, [(str(refs), str(tmp_path), i) for i in range(WRITERS)], chunksize=1)
    from ruamel.yaml import YAML

    kept = YAML(typ="safe").load((refs / "mmlu.yaml").read_text())
    assert len(kept) == WRITERS, f"{len(kept)} of {WRITERS} entries kept"
    values = {i: lookup(refs, "mmlu", "accuracy", f"org/model-{i}", AccuracySpec(), DEFAULTS).value for i in range(WRITERS)}
    assert values == {i: round(50.0 + i / 10, 4) for i in range(WRITERS)}
    assert [p.name for p in refs.iterdir() if not p.name.startswith(".")] == ["mmlu.yaml"]


def test_a_file_changed_between_the_read_and_the_write_is_read_again_not_overwritten(tmp_path, monkeypatch) -> None:
    from runner.references import recording

    refs = tmp_path / "refs"
    record(refs, "mmlu", "accuracy", "org/a", AccuracySpec(), 40.0, {})
    real, edited = recording._updated, []

    def meanwhile(path, text, *args):  # a writer that takes no lock appends its entry while this one works
        out = real(path, text, *args)
        if not edited:
            edited.append(1)
            path.write_text(path.read_text() + "org/hand:\n  - accuracy: 30.0\n")
        return out

    monkeypatch.setattr(recording, "_updated", meanwhile)
    record(refs, "mmlu", "accuracy", "org/b", AccuracySpec(), 45.0, {})
    assert [lookup(refs, "mmlu", "accuracy", m, AccuracySpec(), DEFAULTS).value for m in ("org/a", "org/hand", "org/b")] == [
        40.0, 30.0, 45.0]
