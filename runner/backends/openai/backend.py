"""The ``openai`` backend: requests answered by a model behind an OpenAI-compatible endpoint.

The runner sends what ``backend=hf`` would feed its model (the same rendered prompts, cut with the
served model's tokenizer), so a served model is evaluated on the same requests as an in-process
one. What is served cannot be read back (a server does not report its quantization): the
accuracy spec is declared in ``backend.served_spec`` and reported as declared. ``/v1/models`` is
checked against the declared model id where the server lists its models. With ``backend.launch``
the server is started for the job and stopped after it (:mod:`runner.backends.openai.server`).
"""

from __future__ import annotations

import json
import logging
import platform
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from runner.backends import rolling, token_counts
from runner.backends.threads import cpu_server_env
from runner.backends.configured import ConfiguredBackend
from runner.backends.models import resolve_model_source
from runner.backends.openai import answers
from runner.backends.openai import client as http
from runner.backends.openai.config import ENDPOINTS, JSON_SCHEMA_FIELDS, ON_FAILURE, PROMPT_FORMATS, TRUNCATIONS
from runner.backends.openai.payloads import (
    PromptSettings, chat_messages, completion_prompt, sampling_fields,
)
from runner.backends.openai.server import render_command, keep, ManagedServer, free_port, take_kept
from runner.contract import stopping
from runner.contract.backend import BackendInfo, Capabilities, ChatFormat, GpuNeeds, Perturbation, TaskLimits
from runner.contract.errors import BackendUnavailable, ConfigError, EndpointError
from runner.contract.secrets import redact_url
from runner.contract.indicators import Generated, GenerationFacts, same_facts
from runner.contract.requests import GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, cut_at_stop
from runner.contract.spec import AccuracySpec

log = logging.getLogger("runner")
GUIDED_MODES = ("none", "auto", "server")
LOGLIKELIHOOD_FIX = ("a server that returns prompt log-probabilities (vLLM) with backend.prompt_logprobs=true, "
                     "backend.prompt_format=token_ids and backend.endpoint=completions")


class OpenAIBackend(ConfiguredBackend):
    """A client of one served model. Construct cheaply; start/probe the server on ``__enter__``."""

    name = "openai"
    answer_neutral_settings = ("launch.log_file", "launch.ready_timeout_s", "launch.stop_timeout_s", "launch.reuse",
                               "timeout_s", "max_retries", "max_response_mb", "on_failure", "max_failures_in_a_row")

    @classmethod
    def gpu_needs(cls, config: Any) -> GpuNeeds:
        """An HTTP client needs no GPU; a managed server takes ``launch.gpus`` of them."""
        return GpuNeeds(per_job=config.launch.gpus if config.launch.command is not None else 0)

    def __init__(self, config: Any, model: Any, quant: Any, limits: TaskLimits,
                 chat: ChatFormat = ChatFormat(), progress: bool = True) -> None:
        for key, value, allowed in (("endpoint", config.endpoint, ENDPOINTS),
                                    ("prompt_format", config.prompt_format, PROMPT_FORMATS),
                                    ("truncation", config.truncation, TRUNCATIONS),
                                    ("json_schema_field", config.json_schema_field, JSON_SCHEMA_FIELDS),
                                    ("on_failure", config.on_failure, ON_FAILURE)):
            if value not in allowed:
                raise ConfigError(f"unknown {key} for the openai backend", where=f"backend.{key}", given=value,
                                  allowed=", ".join(allowed))
        if (config.base_url is None) == (config.launch.command is None):
            raise ConfigError("say where the server is, or how to start one (one of the two)",
                              where="backend.base_url / backend.launch.command",
                              given=f"base_url={config.base_url}, launch.command={config.launch.command}",
                              fix="backend.base_url=http://HOST:PORT/v1 for a running server (with backend.launch.command=null "
                                  "on a preset), or a preset that starts one "
                                  "(backend=trtllm_serve, backend=vllm, backend=transformers_serve)")
        if (config.max_concurrency < 1 or config.max_retries < 0 or config.timeout_s <= 0 or config.max_response_mb <= 0
                or config.max_failures_in_a_row < 1):
            raise ConfigError("request limits out of range",
                              where="backend.max_concurrency / max_retries / timeout_s / max_response_mb / "
                                    "max_failures_in_a_row",
                              given=f"{config.max_concurrency} / {config.max_retries} / {config.timeout_s} / "
                                    f"{config.max_response_mb} / {config.max_failures_in_a_row}",
                              allowed="max_concurrency >= 1, max_retries >= 0, timeout_s > 0, max_response_mb > 0, "
                                      "max_failures_in_a_row >= 1")
        if config.base_url is not None and not str(config.base_url).startswith(("http://", "https://")):
            raise ConfigError("the server's URL must be http:// or https://", where="backend.base_url",
                              given=redact_url(str(config.base_url)), fix="backend.base_url=http://HOST:PORT/v1")
        if config.endpoint == "chat" and not chat.apply_chat_template:
            raise ConfigError("the chat endpoint wraps every prompt in the server's chat template, and this task "
                              "sends plain prompts (its references were measured without a template)",
                              where="backend.endpoint", given="chat (task.apply_chat_template=false)",
                              fix="use backend.endpoint=completions, or task.apply_chat_template=true")
        if config.endpoint == "chat" and config.prompt_format == "token_ids":
            raise ConfigError("chat requests carry messages, not token ids", where="backend.prompt_format",
                              given="token_ids with backend.endpoint=chat", allowed="text")
        if limits.guided_decoding not in GUIDED_MODES:
            raise ConfigError("guided decoding on an endpoint is the server's own", where="task.guided_decoding",
                              given=limits.guided_decoding, allowed=", ".join(GUIDED_MODES))
        super().__init__(config, model, quant, limits, chat, progress)
        scores = config.prompt_logprobs and config.prompt_format == "token_ids" and config.endpoint == "completions"
        self.capabilities = Capabilities(
            loglikelihood=scores, rolling_windows=scores, token_counter=True, per_request_seeds=config.per_request_seeds,
            loglikelihood_fix=LOGLIKELIHOOD_FIX)
        self.settings = PromptSettings(config.endpoint, config.prompt_format, config.truncation, limits.max_input_len,
                                       limits.max_output_len, config.json_schema_field, limits.guided_decoding != "none")
        self._server: Any = None
        self._client: Any = None
        self._tokenizer: Any = None
        self._base_url = config.base_url or ""
        self._checked_logprobs = False
        self._served = ""
        self._server_key = ""
        self._server_reused = False
        self._failing = http.FailureRun(config.max_failures_in_a_row)

    # ------------------------------------------------------------------ lifecycle
    def preflight(self) -> None:
        """The client library is installed, the key variable is set, the launch command is well formed."""
        try:
            import openai  # noqa: F401
        except ImportError:
            raise BackendUnavailable("backend=openai needs the openai client library",
                                     given="import openai failed", fix="pip install 'runner[serve]'") from None
        http.api_key(self.config.api_key_env)
        if self.config.launch.command is not None:

            render_command(self.config.launch.command, self._placeholders(port=0))

    def __enter__(self) -> "OpenAIBackend":
        try:
            self._start()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def _start(self) -> None:
        import openai
        from transformers import AutoTokenizer

        checkpoint = self._checkpoint()
        tokenizer_source = self.config.tokenizer or checkpoint
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(tokenizer_source,
                                                            trust_remote_code=self.model_config.trust_remote_code)
        except Exception as err:  # the user's path or Hub id
            raise ConfigError("the served model's tokenizer cannot be loaded (it cuts prompts and counts tokens)",
                              where="backend.tokenizer", given=f"{tokenizer_source} ({type(err).__name__}: {err})"[:400],
                              fix="set backend.tokenizer to a local copy of the served model's tokenizer") from None
        if self.config.launch.command is not None:
            self._base_url = self._launch()
        self._client = http.make_client(self._base_url, http.api_key(self.config.api_key_env),
                                        self.config.timeout_s, self.config.max_retries,
                                        int(self.config.max_response_mb * 2 ** 20))
        served = self._served = self.config.served_model or checkpoint
        listing = self._check_served(served)
        spec = self.config.served_spec
        managed = self.config.launch.command is not None
        details = {"base_url": "managed (backend.launch)" if managed else redact_url(self._base_url),
                   "served_model": served, "endpoint": self.config.endpoint, "prompt_format": self.config.prompt_format,
                   "spec_source": "declared (backend.served_spec), not read back from the server",
                   "truncation": (f"client: the tokenizer of {tokenizer_source}" if self.config.truncation == "client"
                                  else "server: truncate_prompt_tokens"),
                   "guided_decoding": "none" if self.limits.guided_decoding == "none" else "server",
                   "max_concurrency": str(self.config.max_concurrency), "models_listed": listing}
        if self._server is not None:
            details |= {"server": "reused" if self._server_reused else "started", "server_log": str(self._server.log_file)}
            if not self._server_reused:
                details["server_start_time_s"] = f"{self._server.startup_s:.1f}"
        self._info = BackendInfo(
            name=self.name,
            spec=AccuracySpec(dtype=spec.dtype, quant_algo=spec.quant_algo, kv_cache_quant_algo=spec.kv_cache_quant_algo,
                              spec_dec_algo=spec.spec_dec_algo),
            device="endpoint (managed server)" if managed else f"endpoint {redact_url(self._base_url)}",
            model_path=checkpoint,
            versions={"openai": openai.__version__, "python": platform.python_version()},
            details=details, spec_declared=True,
        )

    def host_fields(self) -> dict[str, str]:
        """What the served model is and how hard it was asked: the server, the model it lists, the concurrency."""
        info = self.info()
        return {"server": f"{info.details.get('served_model', '')} at {info.details.get('base_url', '')}",
                "concurrency": str(self.config.max_concurrency)}

    def perturbations(self) -> list[Perturbation]:
        """One request at a time against the run's concurrency (a server batches concurrent requests)."""
        return [Perturbation("max_concurrency=1", (("max_concurrency", 1),))] if self.config.max_concurrency > 1 else []

    def __exit__(self, *exc: object) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
        server, self._server = self._server, None
        if server is None:
            return
        if exc and exc[0] is None and self.config.launch.reuse and server.alive():

            keep(self._server_key, server)
        else:
            server.stop()

    def _checkpoint(self) -> str:
        """The declared weights: ``served_spec.checkpoint``, else the model's path/embedded copy/Hub id."""

        if self.config.served_spec.checkpoint:
            return self.config.served_spec.checkpoint
        m = self.model_config
        return resolve_model_source(m.name, m.hf_id, m.path, m.embedded).location

    def _placeholders(self, port: int) -> dict[str, Any]:
        launch = self.config.launch
        checkpoint = self.config.served_spec.checkpoint or self.model_config.path or self.model_config.hf_id
        return {"checkpoint": checkpoint, "served_model": self.config.served_model or checkpoint, "host": launch.host,
                "port": port, "gpus": launch.gpus, "dtype": self.config.served_spec.dtype}

    def _launch(self) -> str:

        launch = self.config.launch
        values = self._placeholders(0) | {"checkpoint": self._checkpoint()}
        values["served_model"] = self.config.served_model or values["checkpoint"]
        self._server_key = json.dumps([render_command(launch.command, values), launch.host, sorted(launch.env.items())])
        kept = take_kept(self._server_key)  # stops a kept server that is not this one
        if kept is not None and not launch.reuse:
            kept.stop()
        elif kept is not None:
            log.info("reusing the model server the previous job started (%s, log %s)", kept.root_url, kept.log_file)
            self._server, self._server_reused = kept, True
            return f"{kept.root_url}/v1"
        port = free_port(launch.host)
        # a CPU server's threads: the cores free now (the reuse key above keeps the configured env only)
        env = cpu_server_env(dict(launch.env)) if launch.gpus == 0 else dict(launch.env)
        self._server = ManagedServer(render_command(launch.command, values | {"port": port}), launch.host, port,
                                     launch.health_path, launch.ready_timeout_s, launch.stop_timeout_s, env,
                                     Path(launch.log_file))
        self._server.start()
        return f"{self._server.root_url}/v1"

    def _check_served(self, served: str) -> str:
        """Refuse a server that lists its models without the declared one; check the context length."""
        models, why = http.list_models(self._client, self._base_url)
        if models is None:
            log.warning("the server does not list its models (%s): the served model id is not checked", why)
            return f"not listed ({why})"[:300]
        if not models:
            return "empty list (not checked)"
        ids = [str(m.get("id")) for m in models]
        if served not in ids:
            raise EndpointError("the server does not serve the declared model", where=f"{redact_url(self._base_url)}/models",
                                given=f"serves {', '.join(ids)[:300]}; backend.served_model={served}",
                                fix="set backend.served_model to the id the server lists (and served_spec to what it runs), "
                                    "or point backend.base_url at the right server")
        card = models[ids.index(served)]
        context = card.get("max_model_len")
        need = self.limits.max_input_len + self.limits.max_output_len
        if isinstance(context, int) and context < need:
            raise EndpointError("the served model's context is shorter than the task needs",
                                where=f"{redact_url(self._base_url)}/models",
                                given=f"max_model_len={context}; task needs max_input_len + max_output_len = {need}",
                                fix="serve the model with a longer context (vLLM --max-model-len)")
        return "checked"

    # ------------------------------------------------------------------ requests
    def _fan_out(self, fn: Any, items: Sequence[Any], desc: str) -> list[Any]:
        bar = self.bar(len(items), desc)
        try:
            return http.map_bounded(fn, items, self.config.max_concurrency, lambda: bar.update(1))
        finally:
            bar.close()

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text in the served model's tokenizer, special tokens excluded."""
        return token_counts.count_with(self._tokenizer, texts)

    def tokenizer_counter(self) -> token_counts.TokenCounter:
        """The same counts without starting or calling a server (a dry run)."""
        return token_counts.tokenizer_counter(self.config.tokenizer or self._checkpoint(), None,
                                              self.model_config.trust_remote_code)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[str]:
        for req in requests:
            if not req.greedy and req.seed is None:
                raise ConfigError("a sampled request needs an explicit seed", where="generation request",
                                  given=f"temperature={req.temperature}, seed=None")
        calls = [self._generation_call(req) for req in requests]  # tokenized here, sent from the worker threads
        try:
            texts = self._fan_out(self._send, calls, "generate")
        except BaseException as err:  # what did arrive is handed on, cut as it would have been
            stopping.keep_answered(err, {i: same_facts(text, cut_at_stop(text, requests[i].stop))
                                         for i, text in stopping.answered(err).items()})
            raise
        return [same_facts(text, cut_at_stop(text, req.stop)) for text, req in zip(texts, requests)]

    def _generation_call(self, req: GenerationRequest) -> tuple[str, dict[str, Any], bool]:
        """(endpoint, request fields, whether the prompt is longer than the input budget) of one generation request."""
        fields, extra = sampling_fields(req, self.settings)
        if self.settings.endpoint == "chat":
            messages, cut, input_cut = chat_messages(self._tokenizer, self.chat, req, self.settings)
            fields["messages"] = messages
        else:
            prompt, cut, input_cut = completion_prompt(self._tokenizer, self.chat, req, self.settings)
            fields["prompt"] = prompt
        body = dict(self.config.extra_body) | extra | cut
        return self.settings.endpoint, fields | {"model": self._served, "extra_body": body or None}, input_cut

    def _send(self, call: tuple[str, dict[str, Any], bool]) -> str:
        """One generation, its answer checked (:mod:`runner.backends.openai.answers`) before it is used, with whether
        its prompt was cut; with ``backend.on_failure=answer`` (the default) a request that still fails after its
        retries is answered as a failure, unless the server as a whole failed (:class:`http.ServerFailure`) or this is
        the ``backend.max_failures_in_a_row``-th failure with no answer between."""
        endpoint, fields, input_cut = call
        try:
            found = self._send_checked((endpoint, fields))
        except http.ServerFailure:
            raise
        except EndpointError as err:
            if self.config.on_failure != "answer":
                raise
            self._failing.failed(err)
            log.warning("a generation request failed after its retries and is answered as a failure "
                        "(backend.on_failure=answer): %s (%s)", err.what, err.given)
            return Generated("", GenerationFacts(input_cut=input_cut, failed=True))
        self._failing.answered()
        return Generated(found, replace(found.facts, input_cut=input_cut)) if isinstance(found, Generated) else found

    def _send_checked(self, call: tuple[str, dict[str, Any]]) -> str:
        endpoint, fields = call
        if endpoint == "chat":
            return http.post_checked(self._base_url, lambda: self._client.chat.completions.with_raw_response.create(
                **fields), lambda body: _generated(answers.document(body), answers.chat_text), self.config.max_retries)
        return http.post_checked(self._base_url, lambda: self._client.completions.with_raw_response.create(**fields),
                                 lambda body: _generated(answers.document(body), answers.completion_text),
                                 self.config.max_retries)

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """Prompt log-probabilities of an echoed completion (``echo``, ``logprobs=1``, one new token),
        the token ids sent as the prompt so context and continuation split exactly as on ``hf``. A rolling
        request's windows (``runner.backends.rolling``) are one prompt each, sent in turn by one worker and summed."""
        if not self.capabilities.loglikelihood:
            raise ConfigError("this endpoint does not score log-likelihood requests", where="backend.prompt_logprobs",
                              given=self.config.prompt_logprobs,
                              fix=f"score by generation (task.scoring=generate), or use {LOGLIKELIHOOD_FIX}")
        items = [rolling.request_rows(self._tokenizer, self.chat, r, self.limits.max_input_len,
                                      self.limits.max_output_len) for r in requests]
        if items and not self._checked_logprobs:  # one request first: a server without prompt logprobs stops here
            first = http.map_bounded(self._request_rows, items[:1], 1, lambda: None)[0]  # sent from a worker too
            if self.job_progress is not None:
                self.job_progress.update(1)
            self._checked_logprobs = True
            try:
                return [first] + self._fan_out(self._request_rows, items[1:], "loglikelihood")
            except BaseException as err:
                stopping.keep_answered(err, {0: first} | {i + 1: r for i, r in stopping.answered(err).items()})
                raise
        return self._fan_out(self._request_rows, items, "loglikelihood")

    def _request_rows(self, rows: list[rolling.Row]) -> LoglikelihoodResult:
        """One request's rows, scored in turn and summed."""
        return rolling.summed([self._loglikelihood_one(row) for row in rows])

    def _loglikelihood_one(self, item: tuple[list[int], list[int]]) -> LoglikelihoodResult:
        seq, scored = item
        client, model = self._client, self._served
        body = dict(self.config.extra_body) or None
        read = lambda raw: answers.echoed_logprobs(answers.document(raw), len(seq), len(scored))  # noqa: E731
        found = http.post_checked(self._base_url, lambda: client.completions.with_raw_response.create(
            model=model, prompt=seq, max_tokens=1, temperature=0.0, logprobs=1, echo=True, extra_body=body),
            read, self.config.max_retries)
        if found is None:
            raise EndpointError("the server returned no log-probabilities for the prompt tokens",
                                where="backend.prompt_logprobs", given=f"an echoed answer without token log-probs "
                                f"for a {len(seq)}-token prompt", fix="set backend.prompt_logprobs=false and score by "
                                "generation (task.scoring=generate), or serve the model with vLLM")
        return LoglikelihoodResult(found[0], found[1], len(scored))


def _generated(doc: dict[str, Any], text_of: Callable[[dict[str, Any]], str]) -> Generated:
    """The answer's text with whether it stopped at the token limit (the server's ``finish_reason``)."""
    return Generated(text_of(doc), GenerationFacts(hit_limit=answers.stopped_at_limit(doc)))
