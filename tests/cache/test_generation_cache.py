"""The generation cache: keys, chunked storage, hits and misses, and several processes at once."""

from __future__ import annotations

import math
import multiprocessing
import sqlite3

import pytest

from runner.contract.requests import GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult
from runner.cache.generations import BoundCache, GenerationCache


def fake_generate(requests):
    """A deterministic 'model': the answer names the prompt and the sampling settings."""
    return [f"{r.prompt}|{r.max_tokens}|{r.seed}" for r in requests]


def requests(n, seed=None):
    return [GenerationRequest(prompt=f"q{i}", max_tokens=2, seed=seed) for i in range(n)]


class Counter:
    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, batch):
        self.calls.append(len(batch))
        return self.fn(batch)


def test_misses_are_computed_in_chunks_and_stored_as_each_chunk_returns(tmp_path):
    store = GenerationCache(tmp_path / "g.sqlite")
    cache = store.bind({"model": "m"})
    seen = []

    def compute(batch):
        seen.append(store.count())  # rows already durable when the next chunk starts
        return fake_generate(batch)

    out = cache.resolve(requests(10), compute, chunk_size=4)
    assert out == [f"q{i}|2|None" for i in range(10)]
    assert seen == [0, 4, 8] and store.count() == 10
    assert (cache.hits, cache.misses) == (0, 10)

    again = store.bind({"model": "m"})
    counter = Counter(fake_generate)
    assert again.resolve(requests(12), counter, chunk_size=4) == [f"q{i}|2|None" for i in range(12)]
    assert counter.calls == [2] and (again.hits, again.misses) == (10, 2)


def test_every_request_field_and_the_context_are_in_the_key(tmp_path):
    store = GenerationCache(tmp_path / "g.sqlite")
    a = store.bind({"model": "m", "compute_dtype": "bfloat16"})
    a.resolve(requests(3), fake_generate, 8)
    for changed in (requests(3, seed=1), [GenerationRequest("q0", 2, stop=("\n",))],
                    [GenerationRequest("q0", 3)], [GenerationRequest("q0", 2, temperature=0.7, seed=0)]):
        probe = store.bind({"model": "m", "compute_dtype": "bfloat16"})
        probe.resolve(changed, fake_generate, 8)
        assert probe.hits == 0, changed
    other_dtype = store.bind({"model": "m", "compute_dtype": "float32"})
    other_dtype.resolve(requests(3), fake_generate, 8)
    assert other_dtype.hits == 0 and other_dtype.misses == 3


def test_loglikelihood_results_round_trip_and_duplicates_are_computed_once(tmp_path):
    store = GenerationCache(tmp_path / "g.sqlite")
    reqs = [LoglikelihoodRequest("ctx", " A"), LoglikelihoodRequest("ctx", " B"), LoglikelihoodRequest("ctx", " A")]
    counter = Counter(lambda batch: [LoglikelihoodResult(-float(len(r.continuation + r.context)), True, 1)
                                     for r in batch])
    first = store.bind({}).resolve(reqs, counter, 16)
    assert counter.calls == [2] and first[0] == first[2]
    second = store.bind({}).resolve(reqs, counter, 16)
    assert counter.calls == [2] and second == first and isinstance(second[1], LoglikelihoodResult)


def test_a_rolling_window_is_in_the_key_and_a_request_without_one_keys_as_before_windows(tmp_path):
    import hashlib
    import json

    from runner.cache.generations import request_document

    store = GenerationCache(tmp_path / "g.sqlite")
    answer = Counter(lambda batch: [LoglikelihoodResult(-1.0, False, 1) for _ in batch])
    plain, windowed = LoglikelihoodRequest("", "a text"), LoglikelihoodRequest("", "a text", rolling_window=256)
    store.bind({}).resolve([plain], answer, 4)
    for other in (windowed, LoglikelihoodRequest("", "a text", rolling_window=512), windowed):
        store.bind({}).resolve([other], answer, 4)
    assert answer.calls == [1, 1, 1]  # another window, another answer; the same window, the stored one
    # the key of a request without a window: the document rows were keyed by before the field existed
    assert request_document(plain) == {"kind": "LoglikelihoodRequest", "context": "", "continuation": "a text"}
    before = json.dumps({"context": "c", "request": {"kind": "LoglikelihoodRequest", "context": "",
                                                     "continuation": "a text"}}, sort_keys=True, separators=(",", ":"))
    assert BoundCache(store, "c").key(plain) == hashlib.sha256(before.encode()).hexdigest()


def test_wal_mode(tmp_path):
    GenerationCache(tmp_path / "g.sqlite")
    assert sqlite3.connect(tmp_path / "g.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _worker(path, offset, n, queue):
    store = GenerationCache(path)
    cache = store.bind({"model": "m"})
    reqs = [GenerationRequest(prompt=f"q{i}", max_tokens=2) for i in range(offset, offset + n)]
    out = cache.resolve(reqs, fake_generate, chunk_size=3)
    queue.put((offset, out == fake_generate(reqs), cache.hits + cache.misses))


def test_several_processes_share_one_cache(tmp_path):
    """Four processes with overlapping requests write one file at once: no error, no lost row."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(tmp_path / "g.sqlite", 20 * k, 60, queue)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    results = [queue.get(timeout=5) for _ in procs]
    assert all(p.exitcode == 0 for p in procs)
    assert all(ok and total == 60 for _, ok, total in results)
    assert GenerationCache(tmp_path / "g.sqlite").count() == 120  # q0..q119, each stored once


@pytest.mark.parametrize("value", ["on", "off"])
def test_cache_group_composes(value):
    from tests.conftest import compose

    cfg = compose([f"cache={value}"])
    assert cfg.cache.enabled is (value == "on") and cfg.cache.chunk_size == 256


def test_the_context_holds_the_backends_settings_not_its_code_location(tmp_path):
    """Moving a backend's module changes its _target_; cached answers must survive that."""
    from runner.backends.hf.backend import HFBackendConfig
    from runner.cache.generations import CacheConfig, open_for_job, settings_context
    from runner.contract.backend import BackendInfo, ChatFormat, TaskLimits
    from runner.contract.spec import AccuracySpec
    from runner.contract.task_config import QuantConfig

    def bound(target: str):
        settings = settings_context(QuantConfig(name="none"), HFBackendConfig(_target_=target), (), TaskLimits(8, 2),
                                    ChatFormat())
        info = BackendInfo(name="hf", spec=AccuracySpec(), device="cpu", model_path="org/m")
        return open_for_job(CacheConfig(enabled=True, path=str(tmp_path / "g.sqlite")), None, settings, info)

    assert bound("runner.backends.hf.HFBackend").context_id == bound("runner.backends.hf.backend.HFBackend").context_id


def test_a_poisoned_row_is_dropped_on_read_and_computed_again(tmp_path):
    """Rows written before answers were checked (an empty-choice text stored as a dict, a NaN or a
    positive log-probability, a count as text) fail the check on read: deleted, recomputed, stored right."""
    import json

    store = GenerationCache(tmp_path / "g.sqlite")
    cache = store.bind({"model": "m"})
    gen = GenerationRequest(prompt="q", max_tokens=2)
    lls = [LoglikelihoodRequest(context="c", continuation=f"x{i}") for i in range(3)]
    poison = [json.dumps({"value": {"text": None}, "key": cache.key(gen)})] + [
        json.dumps({"__class__": "LoglikelihoodResult", "fields": f, "key": cache.key(r)}) for r, f in zip(lls, (
            {"logprob": math.nan, "is_greedy": True, "num_tokens": 1},
            {"logprob": 0.5, "is_greedy": True, "num_tokens": 1},
            {"logprob": -1.0, "is_greedy": True, "num_tokens": "1"}))]
    store.put_many([(cache.key(r), cache.context_id, "x", p) for r, p in zip([gen, *lls], poison)])
    good = LoglikelihoodResult(-0.5, False, 1)
    compute_gen, compute_ll = Counter(fake_generate), Counter(lambda batch: [good] * len(batch))
    assert cache.resolve([gen], compute_gen, 8) == ["q|2|None"]
    assert cache.resolve(lls, compute_ll, 8) == [good] * 3
    assert (compute_gen.calls, compute_ll.calls, store.count()) == ([1], [3], 4)
    assert cache.resolve(lls + [gen], lambda batch: pytest.fail("all stored now"), 8)[-1] == "q|2|None"


@pytest.mark.parametrize("bad", [None, math.inf, 0.25, "text"])
def test_an_invalid_computed_answer_is_refused_and_nothing_is_stored(tmp_path, bad):
    from runner.contract.errors import ModelError

    store = GenerationCache(tmp_path / "g.sqlite")
    cache = store.bind({"model": "m"})
    answer = bad if bad in (None, "text") else LoglikelihoodResult(bad, True, 1)
    request = LoglikelihoodRequest(context="c", continuation="x")
    with pytest.raises(ModelError, match="cannot be used"):
        cache.resolve([request], lambda batch: [answer], 8)
    assert store.count() == 0


def test_the_jobs_progress_counts_cached_computed_and_duplicate_answers_across_chunks(tmp_path):
    """One bar for the job: answers read back count at once, then each computed one (the backend's
    update) and each duplicate of a computed one, chunk after chunk, up to the job's total."""
    from runner.contract.progress import Progress

    class Recorded(Progress):
        def __init__(self, total):
            super().__init__(total, shown=False)
            self.seen = []

        def update(self, n=1):
            super().update(n)
            if n:
                self.seen.append(self.done)

    store = GenerationCache(tmp_path / "g.sqlite")
    cache = store.bind({"model": "m"})
    cache.resolve(requests(2), fake_generate, chunk_size=2)  # q0, q1 answered by an earlier run
    job = [*requests(4), requests(3)[2], GenerationRequest(prompt="q4", max_tokens=2)]  # q2 asked twice
    progress = Recorded(len(job))

    def backend(batch):
        out = fake_generate(batch)
        for _ in out:
            progress.update(1)  # what a backend does as each answer arrives
        return out

    cache.resolve(job, backend, chunk_size=2, progress=progress)
    # 2 from the cache, q2 and q3 computed, q2's duplicate, q4 computed: one bar, never restarted
    assert progress.seen == [2, 3, 4, 5, 6] and progress.done == progress.total == 6

    resumed = Recorded(len(job))
    cache.resolve(job, Counter(fake_generate), chunk_size=2, progress=resumed)
    assert resumed.seen == [6]  # a rerun resumes: every answer counted, all from the cache


def test_a_row_moved_to_another_key_is_detected_and_computed_again(tmp_path):
    """Swapping two rows' answers in the file (every request still a 'hit' before) changes no answer: each row
    names the key it answers, and one read under another key is deleted and computed again."""
    store = GenerationCache(tmp_path / "g.sqlite")
    cache = store.bind({"model": "m"})
    asked = requests(2)
    assert cache.resolve(asked, fake_generate, 8) == ["q0|2|None", "q1|2|None"]
    a, b = (cache.key(r) for r in asked)
    db = sqlite3.connect(tmp_path / "g.sqlite", isolation_level=None)
    rows = dict(db.execute("SELECT key, response FROM responses"))
    db.executemany("UPDATE responses SET response = ? WHERE key = ?", [(rows[b], a), (rows[a], b)])
    db.close()
    counter = Counter(fake_generate)
    again = store.bind({"model": "m"})
    assert again.resolve(asked, counter, 8) == ["q0|2|None", "q1|2|None"]
    assert counter.calls == [2] and (again.hits, again.misses) == (0, 2)


def test_a_file_with_other_tables_is_a_message_not_a_traceback(tmp_path):
    from runner.cache.generations import CacheConfig, preflight
    from runner.contract.errors import ConfigError

    path = tmp_path / "g.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, answer TEXT)")
    db.commit()
    db.close()
    with pytest.raises(ConfigError, match="not a generation cache of this runner"):
        preflight(CacheConfig(path=str(path)))


def test_a_top_k_record_is_asked_in_the_key_and_stored_with_the_answer(tmp_path):
    from runner.cache.generations import request_document
    from runner.contract import top_tokens
    from runner.contract.requests import response_problem

    record = top_tokens.encode([[5, 7]], [[-0.1, -2.5]])
    store = GenerationCache(tmp_path / "g.sqlite")
    answer = Counter(lambda batch: [LoglikelihoodResult(-1.0, False, 1, record if r.top_tokens else None)
                                    for r in batch])
    plain, asked = LoglikelihoodRequest("", "a text"), LoglikelihoodRequest("", "a text", top_tokens=2)
    assert "top_tokens" not in request_document(plain) and request_document(asked)["top_tokens"] == 2
    first = store.bind({}).resolve([plain, asked], answer, 4)
    again = store.bind({}).resolve([plain, asked], answer, 4)
    assert answer.calls == [2] and again == first and again[1].top_tokens == record and again[0].top_tokens is None
    assert "top_tokens" in response_problem(asked, LoglikelihoodResult(-1.0, False, 1, [1, 2]))  # type: ignore
    with pytest.raises(ValueError, match="top_tokens"):
        LoglikelihoodRequest("", "a text", top_tokens=0)
