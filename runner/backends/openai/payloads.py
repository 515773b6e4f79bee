"""Request bodies for ``/v1/completions`` and ``/v1/chat/completions`` built from the runner's
requests (what comes back is read by :mod:`runner.backends.openai.answers`).

Prompts are the ones ``backend=hf`` tokenizes (:mod:`runner.backends.prompting`): the completions
endpoint gets our rendered prompt (as text, or as the very token ids), the chat endpoint the same
turns for the server's chat template, with the task's chat-template arguments in the body's
``chat_template_kwargs`` (the field vLLM and trtllm-serve read). Prompts over the task's input budget are cut with the served
model's tokenizer (``truncation=client``) or by the server (``truncation=server``: the
``truncate_prompt_tokens`` field of vLLM and trtllm-serve, which keeps the last tokens).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from runner.backends.prompting import encode_request, render_prompt
from runner.contract.backend import ChatFormat
from runner.contract.errors import ConfigError, EndpointError
from runner.contract.requests import GenerationRequest


@dataclass(frozen=True)
class PromptSettings:
    """How prompts are sent: what the backend config and the task's limits say."""

    endpoint: str  # completions | chat
    prompt_format: str  # text | token_ids
    truncation: str  # client | server
    budget: int  # the task's max_input_len
    max_output_len: int
    json_schema_field: str
    guided: bool  # the task asks for schema-constrained output


def sampling_fields(req: GenerationRequest, settings: PromptSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    """(standard OpenAI fields, server extensions for ``extra_body``) of one generation request."""
    fields: dict[str, Any] = {"max_tokens": min(req.max_tokens, settings.max_output_len),
                              "temperature": 0.0 if req.greedy else float(req.temperature)}
    extra: dict[str, Any] = {}
    if req.stop:
        fields["stop"] = list(req.stop)
    if req.top_p is not None:
        fields["top_p"] = req.top_p
    if req.top_k is not None:
        extra["top_k"] = req.top_k
    if req.seed is not None:
        fields["seed"] = req.seed
    if req.json_schema and settings.guided:
        schema = json.loads(req.json_schema)
        if settings.json_schema_field == "response_format":
            fields["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
        elif settings.json_schema_field == "guided_json":
            extra["guided_json"] = schema
        else:
            extra["structured_outputs"] = {"json": schema}
    return fields, extra


def completion_prompt(tokenizer: Any, chat: ChatFormat, req: GenerationRequest, settings: PromptSettings
                      ) -> tuple[Any, dict[str, Any], bool]:
    """The ``prompt`` of a completions request, the extension fields it needs, and whether the prompt is longer than
    the task's input budget (cut here, or by the server under ``truncation=server``)."""
    text, special = render_prompt(tokenizer, chat, req.prompt + req.suffix, req.messages)
    ids = list(tokenizer(text, add_special_tokens=special)["input_ids"])
    cut = len(ids) > settings.budget
    if settings.truncation == "server":
        _server_cut_allowed(req)
        prompt: Any = ids if settings.prompt_format == "token_ids" else text
        return prompt, {"truncate_prompt_tokens": settings.budget}, cut
    if cut:
        ids = encode_request(tokenizer, chat, req, settings.budget)
        if settings.prompt_format == "text":
            text = tokenizer.decode(ids[len(_added_head(tokenizer, ids)):], skip_special_tokens=False)
    return (ids if settings.prompt_format == "token_ids" else text), {}, cut


def chat_messages(tokenizer: Any, chat: ChatFormat, req: GenerationRequest, settings: PromptSettings
                  ) -> tuple[list[dict[str, str]], dict[str, Any], bool]:
    """The ``messages`` of a chat request (the task's system prompt first), cut to the budget; the extension fields;
    and whether the templated conversation is longer than the budget (cut here, or by the server)."""
    turns = list(req.messages) if req.messages is not None else [("user", req.prompt + req.suffix)]
    if chat.system_prompt and not (turns and turns[0][0] == "system"):
        turns.insert(0, ("system", chat.system_prompt))
    kwargs = dict(chat.template_kwargs)
    extra: dict[str, Any] = {"chat_template_kwargs": kwargs} if kwargs else {}  # vLLM's and trtllm-serve's field
    if settings.truncation == "server":
        _server_cut_allowed(req)
        cut = _templated_size(tokenizer, turns, kwargs) > settings.budget
        return _as_messages(turns), extra | {"truncate_prompt_tokens": settings.budget}, cut
    fitted = _fit_turns(tokenizer, turns, req, settings.budget, kwargs)
    return _as_messages(fitted), extra, fitted is not turns


def _templated_size(tokenizer: Any, conversation: list[tuple[str, str]],
                    template_kwargs: dict[str, Any] | None = None) -> int:
    """Tokens of a conversation with the chat template around it and the generation prompt after it."""
    text = tokenizer.apply_chat_template(_as_messages(conversation), tokenize=False, add_generation_prompt=True,
                                         **(template_kwargs or {}))
    return len(tokenizer(text, add_special_tokens=True)["input_ids"])


def _fit_turns(tokenizer: Any, turns: list[tuple[str, str]], req: GenerationRequest, budget: int,
               template_kwargs: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """Shorten the last turn's content until the templated conversation fits ``budget`` tokens (``turns`` itself,
    the same list, when it fits)."""
    def size(conversation: list[tuple[str, str]]) -> int:
        return _templated_size(tokenizer, conversation, template_kwargs)

    over = size(turns) - budget
    if over <= 0:
        return turns
    role, content = turns[-1]
    keep_suffix = req.messages is None and req.truncation == "right" and bool(req.suffix)
    body = req.prompt if keep_suffix else content
    tokens = list(tokenizer(body, add_special_tokens=False)["input_ids"])
    keep = len(tokens) - over
    while keep > 0:
        kept = tokens[:keep] if req.truncation == "right" else tokens[-keep:]
        text = tokenizer.decode(kept) + (req.suffix if keep_suffix else "")
        candidate = turns[:-1] + [(role, text)]
        over = size(candidate) - budget
        if over <= 0:
            return candidate
        keep -= over
    raise EndpointError("a prompt cannot be cut to the task's input length with the chat template around it",
                        where="task.max_input_len", given=budget, fix="raise task.max_input_len")


def _as_messages(turns: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"role": role, "content": content} for role, content in turns]


def _added_head(tokenizer: Any, ids: list[int]) -> list[int]:
    """The special tokens the tokenizer put in front (a BOS), which the server adds again itself."""
    head = list(tokenizer("", add_special_tokens=True)["input_ids"])
    return head if head and ids[:len(head)] == head else []


def _server_cut_allowed(req: GenerationRequest) -> None:
    if req.truncation == "right":
        raise ConfigError("this task cuts long prompts on the right, which server-side truncation cannot do",
                          where="backend.truncation", given="server",
                          allowed="client (the served model's tokenizer cuts prompts as backend=hf does)",
                          fix="set backend.truncation=client")
