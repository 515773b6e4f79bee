"""``backend=openai`` against a server that answers badly on purpose (tests/helpers/hostile_server.py).

Each hostile behaviour must end the request with the right message within its deadline (tiny
timeouts here: every case takes well under a second), and leave nothing in the generation cache:
under ``backend.on_failure=stop`` the message is the job's error; under the default ``answer`` the request
is answered as a failure (the job leaves it out of both arms) and the message is logged. A failure of the
server as a whole (unreachable, key refused, no such model, a redirect) and a run of failed requests stop
the job under either setting. In-process: the backend is built as the job builds it, with a tokenizer of
one token per character standing in for the served model's (no model is loaded).
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from runner.backends.openai import client as http
from runner.backends.openai.backend import OpenAIBackend
from runner.backends.openai.config import OpenAIBackendConfig
from runner.cache.generations import CachedBackend, GenerationCache
from runner.contract import stopping
from runner.contract.backend import ChatFormat, TaskLimits
from runner.contract.errors import ConfigError, EndpointError, Terminated
from runner.contract.indicators import GenerationFacts, facts_of
from runner.contract.progress import Progress
from runner.contract.requests import GenerationRequest
from tests.helpers.hostile_server import ECHO_PROMPT, GOOD_TEXT, MODEL, HostileServer

DEADLINE_S = 0.4
SLACK_S = 1.0  # the deadline plus what a loaded CI host needs to notice it


class CharTokenizer:
    """One token per character: enough for prompts sent as text."""

    def __call__(self, text, add_special_tokens=True):
        if isinstance(text, list):
            return {"input_ids": [[ord(c) for c in t] for t in text]}
        return {"input_ids": [ord(c) for c in text]}


@pytest.fixture()
def server():
    hostile = HostileServer(huge_bytes=3 << 20)
    yield hostile
    hostile.close()


def backend_for(url: str, **settings) -> OpenAIBackend:
    """The backend as the job builds it; ``on_failure=stop`` unless a test says otherwise (most check the error)."""
    config = OpenAIBackendConfig(base_url=f"{url}/v1", served_model=MODEL,
                                 **({"timeout_s": DEADLINE_S, "max_retries": 0, "max_response_mb": 1.0,
                                     "on_failure": "stop"} | settings))
    config.prompt_logprobs, config.prompt_format = True, "token_ids"
    backend = OpenAIBackend(config, SimpleNamespace(name="m"), SimpleNamespace(), TaskLimits(64, 8), ChatFormat(),
                            progress=False)
    backend._tokenizer, backend._served, backend.settings = CharTokenizer(), MODEL, \
        backend.settings.__class__(**{**backend.settings.__dict__, "prompt_format": "text"})
    backend._client = http.make_client(f"{url}/v1", http.api_key(None), config.timeout_s, config.max_retries,
                                       int(config.max_response_mb * 2 ** 20))
    return backend


def answer_through_cache(backend: OpenAIBackend, tmp_path) -> tuple[object, GenerationCache, float]:
    """Generate one request through a fresh generation cache: (answer or the error, the cache, seconds)."""
    store = GenerationCache(tmp_path / "generations.sqlite")
    cached = CachedBackend(backend, store.bind({"test": "hostile"}), chunk_size=4)
    start = time.monotonic()
    try:
        result: object = cached.generate([GenerationRequest("2+2=", 4)])
    except EndpointError as err:
        result = err
    return result, store, time.monotonic() - start


CASES = [  # (mode, what the message must say)
    ("malformed", "not JSON"), ("empty", "body is empty"), ("html", "not JSON.*502 Bad Gateway"),
    ("not_utf8", "not JSON"), ("missing_fields", "no list of choices"), ("no_choices", "0 choices"),
    ("choices_string", "no list of choices"), ("no_text", "no text"), ("null_text", "no text"),
    ("text_number", "no text"), ("three_choices", "3 choices for one request"),
    ("error_200", "answered with an error.*model overloaded"),
    ("huge_declared", "larger than allowed"), ("huge_streamed", "larger than allowed"),
    ("drip", "did not answer in time"), ("hang", "did not answer in time"),
    ("error_500", "HTTP 500.*CUDA out of memory"),
]


@pytest.mark.parametrize(("mode", "said"), CASES, ids=[c[0] for c in CASES])
def test_a_hostile_answer_is_a_message_within_the_deadline_and_never_cached(server, tmp_path, mode, said):
    server.mode = mode
    result, store, took = answer_through_cache(backend_for(server.url), tmp_path)
    assert isinstance(result, EndpointError), f"{mode} was accepted as {result!r}"
    import re
    assert re.search(said, result.render(), re.S), result.render()
    assert took < DEADLINE_S + SLACK_S, f"{mode} took {took:.2f} s"
    assert store.count() == 0


@pytest.mark.parametrize(("mode", "said"), CASES, ids=[c[0] for c in CASES])
def test_by_default_a_hostile_answer_is_a_failure_logged_within_the_deadline_and_never_cached(server, tmp_path,
                                                                                              caplog, mode, said):
    """The default (``backend.on_failure=answer``): the same request is answered as a failure (an empty text whose
    facts say so), within the same deadline, with the same message in the log, and nothing cached."""
    import re

    assert OpenAIBackendConfig().on_failure == "answer"
    server.mode = mode
    with caplog.at_level("WARNING", logger="runner"):
        result, store, took = answer_through_cache(backend_for(server.url, on_failure="answer"), tmp_path)
    assert isinstance(result, list) and result == [""] and facts_of(result[0]).failed, f"{mode}: {result!r}"
    assert re.search(said, caplog.text, re.S), caplog.text
    assert took < DEADLINE_S + SLACK_S, f"{mode} took {took:.2f} s"
    assert store.count() == 0


def test_a_good_answer_is_cached_and_the_same_request_is_not_sent_again(server, tmp_path):
    backend = backend_for(server.url)
    assert answer_through_cache(backend, tmp_path)[0] == [GOOD_TEXT]
    result, store, _ = answer_through_cache(backend, tmp_path)
    assert (result, store.count(), server.posts) == ([GOOD_TEXT], 1, 1)


def test_an_invalid_answer_is_asked_again_as_the_retry_policy_says(server, tmp_path, monkeypatch):
    monkeypatch.setattr(http, "RETRY_BASE_S", 0.01)
    server.sequence = ["no_text", "malformed", "ok"]
    result, store, _ = answer_through_cache(backend_for(server.url, max_retries=2), tmp_path)
    assert (result, server.posts, store.count()) == ([GOOD_TEXT], 3, 1)
    server.sequence, server.posts = ["no_text", "ok"], 0
    result, _, _ = answer_through_cache(backend_for(server.url, max_retries=0), tmp_path / "other")
    assert isinstance(result, EndpointError) and server.posts == 1  # max_retries=0: asked once


def test_on_failure_answer_makes_a_failed_request_a_failure_that_is_never_cached(server, tmp_path):
    """backend.on_failure=answer: an HTTP 500 after the retries is an empty answer marked failed (the job leaves it
    out of both arms, runner.job.indicators), not stored; once the server recovers the request is asked again. A
    good answer says whether it stopped at the token limit (its finish_reason, "stop" here)."""
    server.mode = "error_500"
    (failed,), store, _ = answer_through_cache(backend_for(server.url, on_failure="answer"), tmp_path)
    assert failed == "" and facts_of(failed) == GenerationFacts(input_cut=False, failed=True) and store.count() == 0
    server.mode = "ok"
    (good,), store, _ = answer_through_cache(backend_for(server.url, on_failure="answer"), tmp_path)
    assert good == GOOD_TEXT and facts_of(good) == GenerationFacts(input_cut=False, hit_limit=False) and store.count() == 1
    with pytest.raises(ConfigError, match="unknown on_failure"):
        backend_for(server.url, on_failure="ignore")


def test_a_server_that_cannot_be_reached_stops_the_job_under_either_setting(server, tmp_path):
    """Connection refused (the server is gone) is no sample's failure: answering every request as one would leave
    nothing to judge after each had waited out its retries. The job stops with the message, nothing cached."""
    url = server.url
    server.close()  # nothing listens on its port any more
    for on_failure in ("answer", "stop"):
        result, store, took = answer_through_cache(backend_for(url, on_failure=on_failure), tmp_path / on_failure)
        assert isinstance(result, http.ServerFailure), f"{on_failure}: {result!r}"
        assert "cannot be reached" in result.render() and store.count() == 0 and took < SLACK_S


SERVER_CASES = [("error_401", "HTTP 401.*invalid api key"), ("error_404", "HTTP 404.*does not exist"),
                ("redirect", "redirects are not followed")]


@pytest.mark.parametrize(("mode", "said"), SERVER_CASES, ids=[c[0] for c in SERVER_CASES])
def test_a_server_that_refuses_every_request_alike_stops_the_job_by_default(server, tmp_path, mode, said):
    """A key refused, a model the server does not have, a redirect: every request would fail the same way, so the
    default ``on_failure=answer`` stops at the first, as ``stop`` does."""
    import re

    server.mode = mode
    result, store, _ = answer_through_cache(backend_for(server.url, on_failure="answer"), tmp_path)
    assert isinstance(result, http.ServerFailure), f"{mode}: {result!r}"
    assert re.search(said, result.render(), re.S) and store.count() == 0 and server.posts == 1


def test_failures_in_a_row_stop_the_job_and_an_answer_between_resets_the_count(server, tmp_path):
    """``backend.max_failures_in_a_row=3``: a server failing every request stops the job at the third (not after
    every request's retries), the answers before it kept; failures with answers between are each a sample's."""
    server.mode = "error_500"
    backend = backend_for(server.url, on_failure="answer", max_failures_in_a_row=3, max_concurrency=1)
    asked = [GenerationRequest(f"{i}+{i}=", 4) for i in range(6)]
    with pytest.raises(http.ServerFailure, match="failed 3 requests in a row") as info:
        backend.generate(asked)
    assert server.posts == 3 and "HTTP 500" in info.value.render()
    server.posts, server.sequence = 0, ["error_500", "error_500", "ok", "error_500", "error_500", "ok"]
    answers = backend_for(server.url, on_failure="answer", max_failures_in_a_row=3, max_concurrency=1).generate(asked)
    assert [facts_of(a).failed for a in answers] == [True, True, False, True, True, False]
    assert server.posts == 6
    server.posts, server.sequence = 0, ["ok", "ok", "error_500"]  # the server dies after two answers
    store = GenerationCache(tmp_path / "generations.sqlite")
    with pytest.raises(http.ServerFailure, match="failed 3 requests in a row"):
        CachedBackend(backend_for(server.url, on_failure="answer", max_failures_in_a_row=3, max_concurrency=1),
                      store.bind({"test": "down"}), chunk_size=8).generate(asked)
    assert (server.posts, store.count()) == (5, 2)  # the two answers kept: a rerun asks only the rest
    with pytest.raises(ConfigError, match="max_failures_in_a_row >= 1"):
        backend_for(server.url, max_failures_in_a_row=0)


def test_a_huge_retry_after_is_not_waited_for(server, tmp_path):
    server.mode = "retry_after_huge"
    result, store, took = answer_through_cache(backend_for(server.url, max_retries=3), tmp_path)
    assert isinstance(result, EndpointError) and "HTTP 429" in result.render()
    assert (server.posts, store.count()) == (1, 0) and took < SLACK_S


def test_a_redirect_to_another_port_is_refused_and_not_followed(server, tmp_path):
    other = HostileServer()
    try:
        server.mode, server.redirect_to = "redirect", f"{other.url}/v1"
        result, store, _ = answer_through_cache(backend_for(server.url), tmp_path)
        assert isinstance(result, EndpointError)
        assert "redirects are not followed" in result.render() and f"{other.url}/v1/completions" in result.render()
        assert (other.posts, store.count()) == (0, 0)
    finally:
        other.close()


LOGPROB_CASES = [("logprobs_nan", "not JSON"), ("logprobs_positive", r"token_logprobs\[2\] is 0.7"),
                 ("logprobs_string", r"token_logprobs\[2\] is a str"), ("logprobs_too_many", "6 token log-probabilities")]


@pytest.mark.parametrize(("mode", "said"), LOGPROB_CASES, ids=[c[0] for c in LOGPROB_CASES])
def test_bad_log_probabilities_are_refused(server, mode, said):
    server.mode = mode
    with pytest.raises(EndpointError, match=said):
        backend_for(server.url)._loglikelihood_one((list(range(ECHO_PROMPT)), [1, 2]))


def test_good_log_probabilities_sum_the_continuation(server):
    server.mode = "logprobs_ok"  # prompt tokens [None, -1.0, -0.5]; each the top token
    result = backend_for(server.url)._loglikelihood_one((list(range(ECHO_PROMPT)), [1, 2]))
    assert (result.logprob, result.is_greedy, result.num_tokens) == (-1.5, True, 2)


def test_a_key_pasted_into_api_key_env_is_refused_without_echoing_it():
    key = "sk-proj-Abc123def456GHI789jkl012MNO345"
    with pytest.raises(ConfigError) as info:
        http.api_key(key)
    assert key not in info.value.render() and "looks like a key" in info.value.render()


# ------------------------------------------------------------------ a stop request (SIGTERM, SIGINT)
STOP_AFTER_S = 0.3


@pytest.fixture()
def stop_soon():
    """Call it to ask for a stop ``STOP_AFTER_S`` later, from another thread (as the signal handler does)."""
    stopping.reset()
    timer = threading.Timer(STOP_AFTER_S, stopping.request_stop, args=("stopped by SIGTERM",))
    yield timer.start
    timer.cancel()
    stopping.reset()


def _endpoint_threads_end(within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while any(t.name.startswith("endpoint-") for t in threading.enumerate()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_stop_ends_requests_stalled_on_a_dripping_server_at_once(server, stop_soon, concurrency):
    """A server sending one byte every half second (about a minute an answer, well inside the deadline):
    the requests in flight end with the stop, from the calling thread or the workers, and none is sent after."""
    server.mode, server.drip_interval_s = "drip", 0.5
    backend = backend_for(server.url, timeout_s=120.0, max_concurrency=concurrency)
    started = time.monotonic()
    stop_soon()
    with pytest.raises(Terminated, match="stopped by SIGTERM"):
        backend.generate([GenerationRequest(f"{i}+{i}=", 4) for i in range(6)])
    assert time.monotonic() - started < STOP_AFTER_S + SLACK_S
    assert _endpoint_threads_end(within_s=SLACK_S)
    assert server.posts == concurrency


def test_a_stop_ends_the_backoff_between_invalid_answers(server, stop_soon, monkeypatch):
    monkeypatch.setattr(http, "RETRY_BASE_S", 30.0)
    server.mode = "no_text"
    backend = backend_for(server.url, max_retries=3)
    started = time.monotonic()
    stop_soon()
    with pytest.raises(Terminated):
        backend.generate([GenerationRequest("2+2=", 4)])
    assert time.monotonic() - started < STOP_AFTER_S + SLACK_S and server.posts == 1


def test_answers_from_the_worker_threads_advance_the_jobs_one_bar(server):
    backend = backend_for(server.url, max_concurrency=3)
    progress = Progress(7, shown=False)
    backend.track(progress)
    backend.generate([GenerationRequest(f"{i}+{i}=", 4) for i in range(5)])
    assert progress.done == 5
    backend.generate([GenerationRequest(f"{i}*{i}=", 4) for i in range(2)])  # the next chunk goes on counting
    assert progress.done == progress.total == 7


def test_answers_received_before_a_stop_are_cached_and_a_rerun_asks_only_the_rest(server, tmp_path, stop_soon):
    server.sequence = ["ok", "ok", "drip"]  # the third request stalls until the stop
    server.drip_interval_s = 0.5
    backend = backend_for(server.url, timeout_s=120.0, max_concurrency=1)
    store = GenerationCache(tmp_path / "generations.sqlite")
    asked = [GenerationRequest(f"{i}+{i}=", 4) for i in range(4)]
    stop_soon()
    with pytest.raises(Terminated):
        CachedBackend(backend, store.bind({"test": "stop"}), chunk_size=8).generate(asked)
    assert store.count() == 2  # one chunk of 8, half answered: the two answers are kept
    stopping.reset()
    server.sequence, server.mode, server.posts = [], "ok", 0
    again = CachedBackend(backend, store.bind({"test": "stop"}), chunk_size=8).generate(asked)
    assert again == [GOOD_TEXT] * 4 and server.posts == 2 and store.count() == 4
