"""HTTP calls to an OpenAI-compatible server through the ``openai`` client library.

The library retries connection errors, timeouts, 408, 409, 429 and 5xx answers with exponential
backoff and jitter (0.5 s doubling up to 8 s, honouring ``Retry-After``), ``max_retries`` times.
What still fails becomes an :class:`~runner.contract.errors.EndpointError` naming the URL, the status and
the start of the body. Requests of one bulk call go out ``max_concurrency`` at a time; answers keep
request order. The API key is read from the environment variable the config names, and is held
only by the client object.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any, Callable, Sequence, TypeVar

from runner.contract.errors import ConfigError, EndpointError

log = logging.getLogger("runner")
T = TypeVar("T")
R = TypeVar("R")
NO_KEY = "EMPTY"  # what local servers accept when no key is configured (vLLM's and lm-eval's convention)


def api_key(env_name: str | None) -> str:
    """The key from the variable ``backend.api_key_env`` names; never from the config itself."""
    if not env_name:
        return NO_KEY
    value = os.environ.get(env_name)
    if not value:
        raise ConfigError("the API key variable is not set", where="backend.api_key_env", given=env_name,
                          fix=f"export {env_name}=<key>, or set backend.api_key_env=null for a server without keys")
    return value


def make_client(base_url: str, key: str, timeout_s: float, max_retries: int) -> Any:
    import openai

    for name in ("httpx2", "httpx", "openai"):  # one INFO line per request otherwise
        logging.getLogger(name).setLevel(logging.WARNING)

    return openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout_s, max_retries=max_retries)


def describe_failure(err: BaseException, base_url: str) -> EndpointError:
    """A failed call, said with its URL, status and body excerpt (never the key)."""
    import openai

    if isinstance(err, openai.APIStatusError):
        body = " ".join(err.response.text.split())[:300]
        return EndpointError("the model server refused a request", where=str(err.request.url),
                             given=f"HTTP {err.status_code}: {body}",
                             fix="check backend.served_model, the request limits and the server log")
    if isinstance(err, openai.APITimeoutError):
        return EndpointError("the model server did not answer in time", where=base_url,
                             given=f"{type(err).__name__} after the retries",
                             fix="raise backend.timeout_s or lower backend.max_concurrency")
    if isinstance(err, openai.APIConnectionError):
        cause = err.__cause__ or err
        return EndpointError("the model server cannot be reached", where=base_url,
                             given=f"{type(cause).__name__}: {cause}"[:300],
                             fix="start the server, check backend.base_url, or use backend.launch to start one per job")
    return EndpointError("the model server's answer could not be used", where=base_url,
                         given=f"{type(err).__name__}: {err}"[:300])


def call(base_url: str, fn: Callable[[], R]) -> R:
    """One call, with what fails after the library's retries turned into an EndpointError."""
    import openai

    try:
        return fn()
    except openai.OpenAIError as err:
        raise describe_failure(err, base_url) from None


def map_bounded(fn: Callable[[T], R], items: Sequence[T], concurrency: int, on_done: Callable[[], None]) -> list[R]:
    """``[fn(x) for x in items]`` with at most ``concurrency`` calls in flight; the first error cancels
    what has not started and is raised."""
    if concurrency <= 1 or len(items) <= 1:
        out = []
        for item in items:
            out.append(fn(item))
            on_done()
        return out
    results: list[Any] = [None] * len(items)
    with ThreadPoolExecutor(max_workers=min(concurrency, len(items)), thread_name_prefix="endpoint") as pool:
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for future in done:
                if future.exception() is not None:
                    for other in pending:
                        other.cancel()
                    raise future.exception()  # type: ignore[misc]
                results[futures[future]] = future.result()
                on_done()
    return results


def list_models(client: Any, base_url: str) -> tuple[list[dict[str, Any]] | None, str]:
    """``GET /v1/models`` as plain dicts, or None with the reason when the server does not list them."""
    import openai

    try:
        page = client.with_options(max_retries=1).models.list()
    except openai.OpenAIError as err:
        return None, str(describe_failure(err, base_url).given)
    return [m.model_dump() for m in page.data], ""
