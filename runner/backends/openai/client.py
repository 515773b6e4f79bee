"""HTTP calls to an OpenAI-compatible server through the ``openai`` client library.

The library retries connection errors, timeouts, 408, 409, 429 and 5xx answers with exponential
backoff and jitter (0.5 s doubling up to 8 s, honouring ``Retry-After``), ``max_retries`` times.
Each request has one deadline from send to last byte and a cap on its answer's size
(:mod:`runner.backends.openai.transport`); redirects are not followed. Every 200 answer is read as plain
JSON and checked (:mod:`runner.backends.openai.answers`); an invalid one is retried like a 5xx, with
the same backoff, ``max_retries`` times. What still fails becomes an
:class:`~runner.contract.errors.EndpointError` naming the URL (secrets redacted), the status and the start
of the body; a failure of the server as a whole (unreachable, 401/403/404, a redirect) is a
:class:`ServerFailure`, which stops a job whatever ``backend.on_failure`` says. Requests of one bulk call go out ``max_concurrency`` at a time; answers keep
request order. A stop request (:mod:`runner.contract.stopping`) ends a bulk call within moments: no
request starts after it, the ones in flight have their sockets shut, backoff sleeps end. The API key is read from the environment variable the config names, and is held
only by the client object.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import threading
from typing import Any, Callable, Sequence, TypeVar

from runner.backends.openai.answers import InvalidAnswer
from runner.backends.openai.transport import ResponseTooLarge, guarded_transport
from runner.contract import stopping
from runner.contract.errors import ConfigError, EndpointError
from runner.contract.secrets import looks_like_key, redact_url, remember

log = logging.getLogger("runner")
T = TypeVar("T")
R = TypeVar("R")
NO_KEY = "EMPTY"  # what local servers accept when no key is configured (vLLM's and lm-eval's convention)
RETRY_BASE_S, RETRY_MAX_S = 0.5, 8.0  # the client library's backoff, used for invalid answers too
SERVER_STATUSES = (401, 403, 404)
"""HTTP statuses that refuse every request alike (a key refused, a model or path the server does not have)."""


def api_key(env_name: str | None) -> str:
    """The key from the variable ``backend.api_key_env`` names; never from the config itself."""
    if not env_name:
        return NO_KEY
    if looks_like_key(env_name):
        raise ConfigError("backend.api_key_env names the environment variable that holds the key, and this value "
                          "looks like a key itself (it is not repeated here)", where="backend.api_key_env",
                          given=f"a {len(env_name)}-character value that is not a variable name",
                          fix="export the key as a variable (export OPENAI_API_KEY=...) and set "
                              "backend.api_key_env=OPENAI_API_KEY; revoke the key if this config was shared")
    value = os.environ.get(env_name)
    if not value:
        raise ConfigError("the API key variable is not set", where="backend.api_key_env", given=env_name,
                          fix=f"export {env_name}=<key>, or set backend.api_key_env=null for a server without keys")
    remember(value)  # a server that echoes the request's headers in an error body does not print it
    return value


def make_client(base_url: str, key: str, timeout_s: float, max_retries: int, max_response_bytes: int) -> Any:
    """The client library's client over :func:`~runner.backends.openai.transport.guarded_transport`."""
    redact_url(base_url)  # its password (sent as Basic auth) is remembered as a secret: hidden wherever it comes back
    import httpx2
    import openai

    for name in ("httpx2", "httpx", "openai"):  # one INFO line per request otherwise
        logging.getLogger(name).setLevel(logging.WARNING)
    http_client = httpx2.Client(transport=guarded_transport(timeout_s, max_response_bytes), timeout=timeout_s,
                                follow_redirects=False)
    return openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout_s, max_retries=max_retries,
                         http_client=http_client)


class ServerFailure(EndpointError):
    """A failure of the server as a whole, not of one request: it cannot be reached, refuses the key, has no such
    model or path, or redirects. Every request would meet it, so it always stops the job, whatever
    ``backend.on_failure`` says (answering each request as a failure would leave no sample to judge)."""


class FailureRun:
    """Failed requests in a row (across the worker threads, in the order they end): the ``limit``-th with no answer
    between says the server is down, and stops the job with a :class:`ServerFailure` rather than waiting out every
    remaining request's retries to answer each as a failure."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self._lock = threading.Lock()

    def answered(self) -> None:
        with self._lock:
            self.count = 0

    def failed(self, err: EndpointError) -> None:
        with self._lock:
            self.count += 1
            count = self.count
        if count >= self.limit:
            raise ServerFailure(f"the model server failed {count} requests in a row, with no answer between: it looks "
                                "down, not failing single samples, so the job stops", where=err.where,
                                given=f"the last: {err.what} ({err.given})",
                                fix="check the server and its log, then rerun: answers received are cached and not "
                                    "asked again; backend.max_failures_in_a_row sets how many failures in a row stop "
                                    "the job")


def describe_failure(err: BaseException, base_url: str) -> EndpointError:
    """A failed call, said with its URL, status and body excerpt (never the key)."""
    import openai

    base_url = redact_url(base_url)
    if isinstance(err, ResponseTooLarge):
        return EndpointError("the model server's answer is larger than allowed", where=base_url, given=str(err),
                             fix="raise backend.max_response_mb if such answers are expected, or check the server")
    if isinstance(err, InvalidAnswer):
        return EndpointError("the model server's answer cannot be used (it is neither scored nor cached)",
                             where=base_url, given=f"{err.what}; the server sent: {err.excerpt}",
                             fix="check the server log and that backend.base_url is an OpenAI-compatible /v1 "
                                 "endpoint; the job can be rerun once the server answers correctly")
    if isinstance(err, openai.APIStatusError) and 300 <= err.status_code < 400:
        target = redact_url(err.response.headers.get("location", "(no Location header)"))
        return ServerFailure("the model server redirected a request, and redirects are not followed (answers "
                             "from another server would be cached under this one's URL)",
                             where=redact_url(str(err.request.url)), given=f"HTTP {err.status_code} to {target}",
                             fix="set backend.base_url to the server that answers")
    if isinstance(err, openai.APIStatusError):
        body = " ".join(err.response.text.split())[:300]
        kind = ServerFailure if err.status_code in SERVER_STATUSES else EndpointError
        return kind("the model server refused a request", where=redact_url(str(err.request.url)),
                    given=f"HTTP {err.status_code}: {body}",
                    fix="check backend.served_model, the request limits and the server log")
    if isinstance(err, openai.APITimeoutError):
        return EndpointError("the model server did not answer in time", where=base_url,
                             given=f"{type(err).__name__} after the retries",
                             fix="raise backend.timeout_s or lower backend.max_concurrency")
    if isinstance(err, openai.APIConnectionError):
        cause = err.__cause__ or err
        return ServerFailure("the model server cannot be reached", where=base_url,
                             given=f"{type(cause).__name__}: {cause}"[:300],
                             fix="start the server, check backend.base_url, or use backend.launch to start one per job")
    return EndpointError("the model server's answer could not be used", where=base_url,
                         given=f"{type(err).__name__}: {err}"[:300])


def call(base_url: str, fn: Callable[[], R]) -> R:
    """One call, with what fails after the library's retries turned into an EndpointError."""
    import openai

    try:
        return fn()
    except (openai.OpenAIError, ResponseTooLarge) as err:
        raise describe_failure(err, base_url) from None


def post_checked(base_url: str, send: Callable[[], Any], read: Callable[[bytes], R], max_retries: int) -> R:
    """``read(body)`` of one request's answer, ``send`` returning the library's raw response
    (``.with_raw_response``): an answer ``read`` refuses (:class:`InvalidAnswer`) is asked again up to
    ``max_retries`` times with the library's backoff, then reported with the server's words."""
    for attempt in range(max_retries + 1):
        raw = call(base_url, send)
        try:
            return read(raw.http_response.content)
        except InvalidAnswer as err:
            if attempt == max_retries:
                raise describe_failure(err, base_url) from None
            log.warning("the model server sent an invalid answer (%s); asking again", err.what)
            stopping.wait(min(RETRY_BASE_S * 2 ** attempt, RETRY_MAX_S) * (1 - 0.25 * random.random()))
    raise AssertionError("unreachable")


def map_bounded(fn: Callable[[T], R], items: Sequence[T], concurrency: int, on_done: Callable[[], None]) -> list[R]:
    """``[fn(x) for x in items]`` with at most ``concurrency`` calls in flight; the first error (or a stop
    request) keeps what has not started from starting and is raised, carrying the answers received
    until then (:func:`runner.contract.stopping.keep_answered`).

    The workers are daemon threads, not a ``ThreadPoolExecutor``'s: the interpreter joins an executor's
    threads before it exits, so one thread in the client library's backoff sleep (up to two minutes when
    a server sends ``Retry-After``) would hold a stopped job's exit. Requests are sent from a worker even
    one at a time: the calling thread, where a signal handler raises, only waits for answers, so the
    handler never interrupts the HTTP library half-way. ``on_done`` runs in the calling thread, once per
    answer, as the answers arrive."""
    if not items:
        return []
    results: list[Any] = [None] * len(items)
    got: list[int] = []
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(items)):
        todo.put(i)
    finished: queue.SimpleQueue[tuple[int, Any, BaseException | None]] = queue.SimpleQueue()
    quit_ = threading.Event()

    def worker() -> None:
        while not quit_.is_set() and not stopping.stop_requested():
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            try:
                finished.put((i, fn(items[i]), None))
            except BaseException as err:  # handed to the calling thread, which raises it
                finished.put((i, None, err))
                return

    for n in range(max(1, min(concurrency, len(items)))):
        threading.Thread(target=worker, name=f"endpoint-{n}", daemon=True).start()
    try:
        received = 0
        while received < len(items):
            try:
                i, value, err = finished.get(timeout=0.5)  # a bounded wait: the calling thread sees a stop too
            except queue.Empty:
                stopping.check()
                continue
            if err is not None:
                raise err
            results[i] = value
            got.append(i)
            received += 1
            on_done()
    except BaseException as err:
        stopping.keep_answered(err, {i: results[i] for i in got})
        raise
    finally:
        quit_.set()
    return results


def list_models(client: Any, base_url: str) -> tuple[list[dict[str, Any]] | None, str]:
    """``GET /v1/models`` as plain dicts, or None with the reason when the server does not list them."""
    import openai

    try:
        page = client.with_options(max_retries=1).models.list()
    except openai.OpenAIError as err:
        return None, str(describe_failure(err, base_url).given)
    except ResponseTooLarge as err:
        return None, str(err)
    try:
        return [m.model_dump() for m in page.data], ""
    except (AttributeError, TypeError, ValueError) as err:  # a listing of another shape: not checked, said so
        return None, f"an unreadable model list ({type(err).__name__})"
