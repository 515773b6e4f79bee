"""lm-eval's requests (``Instance`` objects) as the runner's requests, and our answers as lm-eval's responses.

- ``loglikelihood`` ``(context, continuation)``: a :class:`LoglikelihoodRequest` of the same strings (our
  backends split the tokens as lm-eval's ``TemplateLM._encode_pair`` does); the answer is ``(logprob, is_greedy)``.
- ``loglikelihood_rolling`` ``(text,)``: a :class:`LoglikelihoodRequest` of the text with an empty context and
  ``rolling_window`` (``task.rolling_window``): the backend scores every token in lm-eval's disjoint rolling windows,
  the first token predicted from BOS, or EOS without one, as lm-eval's prefix token; the answer is the summed
  log-probability.
- ``generate_until`` ``(context, gen_kwargs)``: a :class:`GenerationRequest` (``until`` -> stop strings,
  ``max_gen_toks`` -> max tokens, greedy unless ``do_sample``); the answer is the text.

With the chat template, lm-eval renders a chat (the system turn, few-shot turns, the question) through a
template function; here that function records the chat as :data:`CHAT_MARK` + JSON, and the backend renders it
with the model's template (``GenerationRequest.messages``, ``LoglikelihoodRequest.messages``). An opened
assistant turn (lm-eval's ``gen_prefix``) is refused before any request.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from runner.contract.errors import ConfigError
from runner.contract.requests import GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, Request

CHAT_MARK = "\x00runner-chat:"
LOGLIKELIHOOD_TYPES = ("loglikelihood", "loglikelihood_rolling", "multiple_choice")
GEN_KWARGS = ("until", "max_gen_toks", "do_sample", "temperature", "top_p", "top_k")
DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's HFLM default


def record_chat(messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    """lm-eval's ``chat_template`` callable: the chat itself, marked, instead of a rendered string."""
    return CHAT_MARK + json.dumps({"messages": messages, "add_generation_prompt": add_generation_prompt})


def read_chat(context: str) -> tuple[tuple[tuple[str, str], ...], bool] | None:
    """The (role, content) turns and add_generation_prompt of a recorded chat; None for a plain prompt."""
    if not context.startswith(CHAT_MARK):
        return None
    doc = json.loads(context[len(CHAT_MARK):])
    return tuple((m["role"], m["content"]) for m in doc["messages"]), bool(doc["add_generation_prompt"])


def _chat_error(task: str, what: str) -> ConfigError:
    return ConfigError(f"this lm-eval task's chat cannot be sent as the runner's requests: {what}",
                       where="task.apply_chat_template", given=f"true (lm_eval_task {task})",
                       fix="run it with task.apply_chat_template=false, or without few-shot turns / system text")


def to_request(instance: Any, max_output_len: int, seed: int | None = None, rolling_window: int | None = None) -> Request:
    """The runner's request for one lm-eval ``Instance`` (``seed``: for a sampled generation; ``rolling_window``:
    the window of a rolling text, None: the text as one sequence, cut to the task's input length)."""
    kind, args, task = instance.request_type, instance.args, instance.task_name
    if kind == "loglikelihood_rolling":
        return LoglikelihoodRequest(context="", continuation=args[0], rolling_window=rolling_window)
    if kind == "loglikelihood":
        context, continuation = args[0], args[1]
        chat = read_chat(context)
        if chat is None:
            return LoglikelihoodRequest(context=context, continuation=continuation)
        turns, generation_prompt = chat
        if not generation_prompt:
            raise _chat_error(task, "a gen_prefix (an opened assistant turn) is not supported")
        if len(turns) == 1 and turns[0][0] == "user":  # one user turn: the plain request, as every backend wraps it
            return LoglikelihoodRequest(context=turns[0][1], continuation=continuation)
        return LoglikelihoodRequest(context=turns[-1][1], continuation=continuation, messages=turns)
    if kind == "generate_until":
        context, kwargs = args[0], dict(args[1] or {})
        unknown = sorted(set(kwargs) - set(GEN_KWARGS))
        if unknown:
            raise ConfigError("unsupported lm-eval generation settings", where=f"task.gen_kwargs / {task}",
                              given=", ".join(unknown), allowed=", ".join(GEN_KWARGS))
        until = kwargs.get("until") or ()
        stop = (until,) if isinstance(until, str) else tuple(until)
        max_tokens = int(kwargs.get("max_gen_toks", DEFAULT_MAX_GEN_TOKS))
        if max_tokens > max_output_len:
            raise ConfigError("the task generates more tokens than task.max_output_len allows",
                              where="task.max_output_len", given=f"{max_output_len} (lm-eval asks {max_tokens})",
                              fix=f"set task.max_output_len={max_tokens}, or task.gen_kwargs.max_gen_toks lower "
                                  "(a protocol change)")
        sampled = bool(kwargs.get("do_sample")) and float(kwargs.get("temperature") or 0.0) > 0
        temperature = float(kwargs["temperature"]) if sampled else None
        messages, prompt = None, context
        chat = read_chat(context)
        if chat is not None:
            turns, generation_prompt = chat
            if not generation_prompt:
                raise _chat_error(task, "a gen_prefix (an opened assistant turn) is not supported")
            messages, prompt = turns, turns[-1][1]
        return GenerationRequest(prompt=prompt, max_tokens=max_tokens, stop=stop, temperature=temperature,
                                 top_p=kwargs.get("top_p") if sampled else None,
                                 top_k=kwargs.get("top_k") if sampled else None,
                                 seed=seed if sampled else None, messages=messages)
    raise ConfigError("lm-eval request type not supported", where=f"task.lm_eval_task={task}", given=kind,
                      allowed="loglikelihood, loglikelihood_rolling, multiple_choice, generate_until")


def to_lm_eval(kind: str, response: Any) -> Any:
    """Our answer as lm-eval's model returns it for a request of ``kind``."""
    if kind == "loglikelihood":
        assert isinstance(response, LoglikelihoodResult)
        return (response.logprob, response.is_greedy)
    if kind == "loglikelihood_rolling":
        assert isinstance(response, LoglikelihoodResult)
        return response.logprob
    return response


def loglikelihood_fix(output_types: Sequence[str], task: str) -> str:
    """What would run tasks of these output types when the backend answers no log-likelihood requests."""
    needing = sorted({t for t in output_types if t in LOGLIKELIHOOD_TYPES}) or ["loglikelihood"]
    return (f"lm-eval task {task} is {'/'.join(needing)}, scored by log-likelihood requests: use a backend that "
            "returns prompt log-probabilities (backend=hf); generate_until tasks run on any backend")


def needs_loglikelihood(output_types: Sequence[str]) -> bool:
    return any(t in LOGLIKELIHOOD_TYPES for t in output_types)
