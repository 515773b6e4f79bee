"""Config schema of the ``openai`` backend (``conf/backend/openai.yaml`` and its presets)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

ENDPOINTS = ("completions", "chat")
PROMPT_FORMATS = ("text", "token_ids")
TRUNCATIONS = ("client", "server")
JSON_SCHEMA_FIELDS = ("response_format", "guided_json", "structured_outputs")
ON_FAILURE = ("answer", "stop")
"""``backend.on_failure``: a generation request that still fails after its retries is answered as a failure (answer,
the default: left out of both arms up to ``stats.max_failed_share``, never cached), or stops the job (stop). A
failure of the server as a whole (unreachable, key refused, no such model) and a run of
``backend.max_failures_in_a_row`` failed requests stop the job either way."""
PLACEHOLDERS = ("checkpoint", "served_model", "host", "port", "gpus", "dtype")


@dataclass
class ServedSpec:
    """What the server runs, as declared by the user: a server does not report its quantization.

    It is the reference key (reported as declared, not read back). The quant algorithms follow the
    ``quant`` option unless set here; ``checkpoint`` (a local directory or a Hub id; None: the
    model's ``path``/embedded copy/``hf_id``) names the weights and gives the tokenizer."""

    dtype: str = "auto"
    quant_algo: Optional[str] = "${quant.quant_algo}"
    kv_cache_quant_algo: Optional[str] = "${quant.kv_cache_quant_algo}"
    spec_dec_algo: Optional[str] = None
    checkpoint: Optional[str] = None


@dataclass
class LaunchConfig:
    """A server started for the job on a free local port and stopped when the job ends.

    ``command`` is split like a shell line after filling ``{checkpoint}``, ``{served_model}``,
    ``{host}``, ``{port}``, ``{gpus}`` and ``{dtype}``; it runs in its own process group with
    ``env`` added, its output going to ``log_file`` (an artifact of the run)."""

    command: Optional[str] = None  # None: no managed server (backend.base_url names a running one)
    host: str = "127.0.0.1"
    gpus: int = 1  # GPUs the server takes (its tensor-parallel size); a sweep gives each job its own
    health_path: str = "/health"  # polled until it answers 200 (then /v1/models is checked)
    ready_timeout_s: float = 900.0
    stop_timeout_s: float = 30.0  # after SIGTERM, before SIGKILL
    env: dict[str, str] = field(default_factory=dict)
    log_file: str = "${output_dir}/server.log"
    # a job that ends well leaves the server to the next job of this process with the same command line
    # (a sweep's tasks on one model); false stops it after every job
    reuse: bool = True


@dataclass
class OpenAIBackendConfig:
    """A model behind an OpenAI-compatible endpoint (runner/backends/openai/backend.py)."""

    _target_: str = "runner.backends.openai.backend.OpenAIBackend"
    name: str = "openai"
    base_url: Optional[str] = None  # e.g. http://host:8000/v1; None with ``launch.command`` set: the managed server's
    served_model: Optional[str] = None  # the request's "model"; None: the served checkpoint as given
    api_key_env: Optional[str] = None  # NAME of the environment variable holding the key (None: no key)
    endpoint: str = "completions"  # completions: our rendered prompt; chat: the server's chat template
    prompt_format: str = "text"  # completions prompts as text, or as token ids (vLLM, trtllm-serve)
    truncation: str = "client"  # client: cut with the served model's tokenizer; server: truncate_prompt_tokens
    tokenizer: Optional[str] = None  # path or Hub id of the served model's tokenizer; None: the checkpoint's
    prompt_logprobs: bool = False  # the server returns prompt log-probabilities (completions echo + logprobs)
    per_request_seeds: bool = True  # the server honours a request's seed
    json_schema_field: str = "response_format"  # where a guided-JSON request puts its schema
    max_concurrency: int = 8  # requests in flight at once
    timeout_s: float = 600.0  # per request, from send to the last byte of the answer (a deadline, not a read timeout)
    max_response_mb: float = 64.0  # an answer body larger than this is refused (a generation is kilobytes)
    max_retries: int = 5  # connection errors, 408/409/429/5xx: exponential backoff with jitter
    # a generation request that still fails after its retries: answer (a failure, left out of both arms up to
    # stats.max_failed_share; docs/noise.md, "Truncation and errors") | stop (the job stops, keeping what was answered)
    on_failure: str = "answer"
    # this many failed generation requests in a row, with no answer between, stop the job under on_failure=answer:
    # a server that fails them all is down, and each failure would first wait out its retries
    max_failures_in_a_row: int = 8
    served_spec: ServedSpec = field(default_factory=ServedSpec)
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    extra_body: dict[str, Any] = field(default_factory=dict)  # added to every request (server-specific fields)
