"""A resumable cache of backend responses, shared by every job on the host.

Why: a sweep is hours of compute, and a job killed half-way (SIGKILL, pre-emption, out of memory)
should not throw away what it already computed. Every response is stored as soon as its chunk
returns, so a rerun sends only what is missing; rerunning a finished job computes nothing. A chunk
that stops half-way (SIGTERM/SIGINT, or one request failing after its retries) stores the answers its
backend did receive, where the backend hands them on (``openai`` and ``hf``:
:func:`runner.contract.stopping.keep_answered`); only a SIGKILL loses the chunk in flight.

Storage: one SQLite file, ``<cache_dir>/generations.sqlite`` (or ``cache.path``), in WAL mode with a
busy timeout, so several processes read and write it at once (one writer at a time, readers never
blocked). Rows are immutable: ``INSERT OR IGNORE``, since two jobs computing the same key produce
the same answer.

The key is the sha256 of two canonical JSON documents:

- the job *context*, everything outside a request that can change a response: the model files'
  content fingerprint (``runner.cache.engines.fingerprint_dir``: names, sizes, hashes; a Hub id with
  no local files: id and revision), the requested quant config (calibration settings included)
  and the effective spec read back from the loaded model, the quantized model's cache key, the
  backend name and its config (less what its class declares answer-neutral: a log file's path, time
  limits), the served model id and URL of an endpoint, the library versions the backend reports, the device and
  the dtype it computes in (bfloat16 and float32 give different answers), the task's length limits
  (prompt truncation) and the chat template settings;
- the *request* itself: its kind and every field (the prompt or context/continuation, max tokens,
  stop strings, temperature, top-p, top-k, seed; a rolling log-likelihood request's window).

A generated text is stored with what its backend said of it (the prompt cut, the token limit reached:
:mod:`runner.contract.indicators`); a row without them reads back as a plain text (unknown). A backend's failure is
never stored. Each row is bound to its key: the stored document names the key it answers, and a row read under another
key (moved or copied between keys in the file) fails the check on read, is deleted and computed again, like
a row that fails the answer check. A file whose tables are not this cache's is a message, not a traceback.

Responses of one call can depend, up to floating-point rounding, on which other requests share the
batch; the cache keeps the first answer computed, so a resumed job can differ from an uninterrupted
one by that rounding only (as a run with another ``backend.batch_size`` would).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from runner.cache.engines import fingerprint_digest
from runner.contract import stopping
from runner.contract.backend import BackendInfo, ChatFormat, TaskLimits
from runner.contract.errors import ConfigError, ModelError
from runner.contract.indicators import Generated, facts_from_dict, facts_of, facts_to_dict
from runner.contract.requests import LoglikelihoodResult, response_problem
from runner.contract.secrets import redact_tree
from runner.files.paths import cache_dir

log = logging.getLogger("runner")

SCHEMA_VERSION = 1
TABLES = {"contexts": ("context", "document", "created"), "responses": ("key", "context", "kind", "response", "created")}
LOOKUP_BATCH = 500  # keys per SELECT (SQLite's bound-parameter limit is far above)


@dataclass
class CacheConfig:
    """The generation cache (runner/cache/generations.py): responses kept so a rerun computes only what is missing."""

    enabled: bool = True
    path: Optional[str] = None  # None: <cache_dir>/generations.sqlite ($RUNNER_CACHE_DIR or ~/.cache/runner)
    chunk_size: int = 256  # requests per backend call while filling the cache; a kill loses one chunk at most


def canonical(value: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, dataclasses as dicts, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()


LATE_FIELDS = {"LoglikelihoodRequest": ("rolling_window", "messages", "top_tokens")}
"""Fields added to a request type after cache rows were written: keyed only when set."""


def request_document(request: Any) -> dict[str, Any]:
    """The request's kind (class name) and every field, so a new sampling field changes the key. A field added
    after rows were written, at its "not asked" value, is left out (``LoglikelihoodRequest.rolling_window`` and
    ``messages`` None), so those rows keep their keys; set, it is part of the key (another window or chat, another
    answer)."""
    fields = dataclasses.asdict(request)
    for late in LATE_FIELDS.get(type(request).__name__, ()):
        if fields.get(late, 0) is None:
            del fields[late]
    return {"kind": type(request).__name__, **fields}


def encode_response(response: Any, key: str) -> str:
    """The row's document: the response, and the key it answers (a row moved to another key is seen on read)."""
    if dataclasses.is_dataclass(response) and not isinstance(response, type):
        cls = type(response)
        return json.dumps({"__class__": cls.__qualname__, "fields": dataclasses.asdict(response), "key": key})
    facts = facts_of(response)
    return json.dumps({"value": str(response), "key": key} | ({"facts": facts_to_dict(facts)} if facts else {}))


def _response_types() -> dict[str, type]:
    """The closed set of response records a row may hold, by name: rows are data, never a way to name code.
    Caches written while the records lived in ``runner.backends.base`` name them with that module."""
    return {name: cls for cls in (LoglikelihoodResult,)
            for name in (cls.__qualname__, f"runner.backends.base:{cls.__qualname__}")}


def decode_response(text: str, key: str) -> Any:
    """The response a row holds for ``key``; a ``ValueError`` when it is bound to another key (or to none)."""
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("key") != key:
        raise ValueError("generation cache row is not bound to the key it was read under (moved, or written before "
                         "rows were bound)")
    if "__class__" in doc:
        cls = _response_types().get(doc["__class__"])
        if cls is None:
            raise ValueError(f"generation cache row names an unknown response type: {doc['__class__']!r}")
        return cls(**doc["fields"])
    value = doc["value"]
    if not isinstance(value, str):
        raise ValueError(f"generation cache row holds a {type(value).__name__}, not a generated text")
    facts = doc.get("facts")
    if facts is None:  # a row written before facts were kept, or by a backend that knows none: unknown
        return value
    if not isinstance(facts, dict):
        raise ValueError(f"generation cache row's facts are a {type(facts).__name__}, not an object")
    return Generated(value, facts_from_dict(facts))


def failed(answer: Any) -> bool:
    """An answer that stands for a backend's failure (:class:`runner.contract.indicators.GenerationFacts`)."""
    facts = facts_of(answer)
    return facts is not None and facts.failed


def model_fingerprint(model_path: str, revision: str | None) -> Any:
    """Content fingerprint of a local checkpoint directory; a Hub id is keyed by id and revision."""
    path = Path(model_path)
    if path.is_dir():

        return {"files_sha256": fingerprint_digest(path)}
    return {"location": model_path, "revision": revision}


class GenerationCache:
    """The SQLite store. One instance per process; safe to share the file across processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), timeout=120.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA busy_timeout = 120000")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS contexts (context TEXT PRIMARY KEY, document TEXT NOT NULL, "
                         "created REAL NOT NULL)")
        self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, context TEXT NOT NULL, "
                         "kind TEXT NOT NULL, response TEXT NOT NULL, created REAL NOT NULL)")
        self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        for table, columns in TABLES.items():
            found = tuple(row[1] for row in self._db.execute(f"PRAGMA table_info({table})"))
            if found != columns:
                raise sqlite3.DatabaseError(f"table {table} has columns {', '.join(found)}, not {', '.join(columns)}: "
                                            "not a generation cache of this runner")

    def close(self) -> None:
        self._db.close()

    def bind(self, context: dict[str, Any]) -> "BoundCache":
        """The view of one job: keys are made under ``context``."""
        context_id = digest({"schema": SCHEMA_VERSION, **context})
        self._db.execute("INSERT OR IGNORE INTO contexts VALUES (?, ?, ?)", (context_id, canonical(context), time.time()))
        return BoundCache(self, context_id)

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for start in range(0, len(keys), LOOKUP_BATCH):
            part = list(keys[start:start + LOOKUP_BATCH])
            marks = ",".join("?" * len(part))
            found.update(self._db.execute(f"SELECT key, response FROM responses WHERE key IN ({marks})", part))
        return found

    def drop(self, keys: Sequence[str]) -> None:
        """Delete rows that failed the answer check on read (they are computed again)."""
        with self._db:
            self._db.executemany("DELETE FROM responses WHERE key = ?", [(k,) for k in keys])

    def put_many(self, rows: Sequence[tuple[str, str, str, str]]) -> None:
        """Insert ``(key, context, kind, response)`` rows in one transaction (durable once it returns)."""
        now = time.time()
        try:
            with self._db:  # BEGIN ... COMMIT
                self._db.executemany("INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?, ?)",
                                     [(*row, now) for row in rows])
        except sqlite3.OperationalError as err:  # a full disk (SQLITE_FULL), a quota, an I/O error: this chunk rolls back
            raise CacheWriteError(self.path, self.count(), len(rows), err) from None

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def contexts(self) -> list[tuple[str, dict[str, Any]]]:
        """Every job context stored so far, with its document (what a dry run matches against)."""
        return [(cid, json.loads(doc)) for cid, doc in self._db.execute("SELECT context, document FROM contexts")]


class CacheWriteError(ConfigError):
    """The cache could not store a chunk of answers: the chunks stored before it stay (each was committed), so a
    rerun answers them from the cache and computes only the rest."""

    def __init__(self, path: Path, kept: int, lost: int, err: sqlite3.OperationalError) -> None:
        super().__init__(f"the generation cache could not store new answers, so the job stopped; the {kept} answers "
                         f"stored stay in it (of the last {lost} computed, those not stored are asked again)",
                         where=str(path),
                         given=f"sqlite3.OperationalError: {err}",
                         fix="free space on that disk (or set cache.path / RUNNER_CACHE_DIR to one with room) and "
                             "rerun the same command: the stored answers are read back, only the rest is computed")


@dataclasses.dataclass
class BoundCache:
    """One job's view of the cache: answers requests from it and computes only the misses."""

    store: GenerationCache
    context_id: str
    hits: int = 0
    misses: int = 0
    uncached: int = 0  # sampled requests answered around the cache (their backend ignores seeds)

    def key(self, request: Any) -> str:
        return digest({"context": self.context_id, "request": request_document(request)})

    def resolve(self, requests: Sequence[Any], compute: Callable[[list[Any]], list[Any]], chunk_size: int,
                progress: Any = None) -> list[Any]:
        """Responses for ``requests`` in order: cached ones read back, the rest computed ``chunk_size``
        at a time and stored as each chunk returns (a kill loses one chunk at most). ``progress`` (the
        job's bar) is advanced by the answers read back and by the duplicates of each computed chunk;
        the backend advances it by what it computes."""
        keys = [self.key(r) for r in requests]
        stored = self._read_valid(requests, keys)
        out: list[Any] = [stored[k] if k in stored else None for k in keys]
        missing: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            if k not in stored:
                missing.setdefault(k, []).append(i)  # duplicates inside a job are computed once
        self.hits += len(requests) - sum(len(v) for v in missing.values())
        self.misses += sum(len(v) for v in missing.values())
        if progress is not None:
            progress.update(len(requests) - sum(len(v) for v in missing.values()))
        todo = list(missing)
        for start in range(0, len(todo), chunk_size):
            chunk = todo[start:start + chunk_size]
            try:
                answers = compute([requests[missing[k][0]] for k in chunk])
            except BaseException as err:  # a stop or a failed request: what did arrive is kept
                self._keep_answered(requests, missing, chunk, stopping.answered(err))
                raise
            _check_computed([requests[missing[k][0]] for k in chunk], answers)
            rows = []
            for k, answer in zip(chunk, answers):
                for i in missing[k]:
                    out[i] = answer
                if not failed(answer):  # a server's failure is asked again by a rerun, never replayed
                    rows.append((k, self.context_id, type(requests[missing[k][0]]).__name__, encode_response(answer, k)))
            self.store.put_many(rows)
            if progress is not None:
                progress.update(sum(len(missing[k]) - 1 for k in chunk))
        return out

    def _keep_answered(self, requests: Sequence[Any], missing: dict[str, list[int]], chunk: list[str],
                       answered: dict[int, Any]) -> None:
        """Store the answers of a chunk that did not finish (those that pass the answer check)."""
        rows = []
        for j, answer in sorted(answered.items()):
            if 0 <= j < len(chunk):
                request = requests[missing[chunk[j]][0]]
                if response_problem(request, answer) is None and not failed(answer):
                    rows.append((chunk[j], self.context_id, type(request).__name__, encode_response(answer, chunk[j])))
        if rows:
            self.store.put_many(rows)
            log.info("generation cache: kept the %d answer(s) received before the job stopped; a rerun resumes",
                     len(rows))

    def _read_valid(self, requests: Sequence[Any], keys: list[str]) -> dict[str, Any]:
        """The stored answers that decode and pass the answer check; the others are deleted (and so
        computed again), each said once in the log."""
        raw = self.store.get_many(sorted(set(keys)))
        found, bad = {}, {}
        for request, k in zip(requests, keys):
            if k not in raw or k in found or k in bad:
                continue
            try:
                value = decode_response(raw[k], k)
                problem = response_problem(request, value)
            except (ValueError, TypeError, KeyError) as err:
                problem = f"an unreadable row ({type(err).__name__}: {err})"[:200]
            if problem is None:
                found[k] = value
            else:
                bad[k] = problem
        if bad:
            log.warning("generation cache: %d stored answer(s) fail the answer check and are computed again (%s)",
                        len(bad), next(iter(bad.values())))
            self.store.drop(sorted(bad))
        return found


def _check_computed(requests: Sequence[Any], answers: Sequence[Any]) -> None:
    """Every computed answer passes the answer check before anything stores or scores it."""
    if len(answers) != len(requests):
        raise ModelError("the backend answered a different number of requests than it was sent (nothing was cached)",
                         where="backend", given=f"{len(answers)} answers for {len(requests)} requests",
                         fix="report this backend's bug; rerun once fixed")
    for request, answer in zip(requests, answers):
        problem = response_problem(request, answer)
        if problem is not None:
            raise ModelError("the backend returned an answer that cannot be used (nothing of this chunk was cached)",
                             where="backend", given=problem, fix="check the backend or its server; rerun once fixed")


class CachedBackend:
    """A backend whose answers go through the generation cache: the same calls, only the misses computed
    (``chunk_size`` requests a call, each chunk stored as it returns). Wraps any backend."""

    def __init__(self, backend: Any, cache: BoundCache, chunk_size: int, progress: Any = None) -> None:
        self.backend = backend
        self.cache = cache
        self.chunk_size = chunk_size
        self.progress = progress  # the job's bar: cached answers count as answered

    def generate(self, requests: Sequence[Any]) -> list[str]:
        """Through the cache, except sampled requests on a backend that ignores their seeds: a stored
        answer would pass for a reproducible one, so those are computed each time and never stored."""
        requests = list(requests)
        if self.backend.capabilities.per_request_seeds:
            return self.cache.resolve(requests, self.backend.generate, self.chunk_size, self.progress)
        sampled = [i for i, r in enumerate(requests) if not r.greedy]
        if not sampled:
            return self.cache.resolve(requests, self.backend.generate, self.chunk_size, self.progress)
        greedy = [i for i, r in enumerate(requests) if r.greedy]
        out: list[Any] = [None] * len(requests)
        for i, answer in zip(greedy, self.cache.resolve([requests[i] for i in greedy], self.backend.generate,
                                                        self.chunk_size, self.progress) if greedy else []):
            out[i] = answer
        fresh = self.backend.generate([requests[i] for i in sampled])
        _check_computed([requests[i] for i in sampled], fresh)
        for i, answer in zip(sampled, fresh):
            out[i] = answer
        self.cache.uncached += len(sampled)
        return out

    def loglikelihood(self, requests: Sequence[Any]) -> list[Any]:
        return self.cache.resolve(list(requests), self.backend.loglikelihood, self.chunk_size, self.progress)


def open_for_job(cache: CacheConfig, revision: str | None, settings: dict[str, Any],
                 info: BackendInfo) -> BoundCache | None:
    """The job's cache view (None with ``cache=off``), keyed by what the backend actually loaded and the
    job's :func:`settings_context`."""
    if not cache.enabled:
        return None
    path = cache_path(cache)
    context = {
        "model": model_fingerprint(info.model_path, revision),
        "effective_spec": dataclasses.asdict(info.spec),
        "quantized_model_key": info.details.get("quant_key"),
        "backend_name": info.name, "versions": dict(info.versions), "device": info.device,
        "compute_dtype": info.details.get("torch_dtype"),
    } | settings
    if info.details.get("served_model"):  # an endpoint: the id the server answers to (its URL is the device)
        context["served_model"] = info.details["served_model"]
    if info.details.get("extra_llm_api_options"):  # the file's contents, not only its path
        context["extra_llm_api_options"] = info.details["extra_llm_api_options"]
    bound = GenerationCache(path).bind(context)
    log.info("generation cache: %s (context %s)", path, bound.context_id[:12])
    return bound


def settings_context(quant: Any, backend: Any, neutral: Sequence[str], limits: TaskLimits,
                     chat: ChatFormat) -> dict[str, Any]:
    """The part of a job's cache context known before the model loads: the quant spec, the backend's
    settings (not where its code lives: a moved module must not invalidate the cache; nor the ``neutral``
    settings its class declares answer-neutral, such as a log file's path), limits and chat."""
    settings = dataclasses.asdict(backend)
    for dotted in ("_target_", *neutral):
        *parents, last = dotted.split(".")
        node = settings
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    chat_settings = dataclasses.asdict(chat)
    if not chat.template_kwargs:  # keys written before chat-template arguments existed stay valid
        chat_settings.pop("template_kwargs")
    return {"quant": dataclasses.asdict(quant), "backend": redact_tree(settings),  # the key holds no URL secret
            "limits": dataclasses.asdict(limits), "chat": chat_settings}


def cache_path(cache: CacheConfig) -> Path:
    return Path(cache.path).expanduser() if cache.path else cache_dir() / "generations.sqlite"


def preflight(cache: CacheConfig) -> None:
    """Before any model loads: the cache file can be created, opened and written (or the cache is off)."""
    if not cache.enabled:
        return
    path = cache_path(cache)
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "is a directory", str(path))
        GenerationCache(path).close()
    except (OSError, sqlite3.Error) as err:
        raise ConfigError("the generation cache cannot be opened for writing", where="cache.path / RUNNER_CACHE_DIR",
                          given=f"{path} ({type(err).__name__}: {err})",
                          fix="point cache.path at a writable file (or RUNNER_CACHE_DIR at a writable directory), "
                          "delete a corrupt cache file, or run with cache=off") from None
