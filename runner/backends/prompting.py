"""Prompt and output handling every backend shares, so tokens and texts agree across backends."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from runner.backends import token_cuts
from runner.contract.backend import ChatFormat
from runner.contract.requests import GenerationRequest

TRUNCATIONS = ("left", "right")

Encode = Callable[[str, bool], list[int]]
"""Token ids of a text, with or without the tokenizer's special tokens."""


def encoder(tokenizer: Any) -> Encode:
    """One tokenizer call per text."""
    return lambda text, special: list(tokenizer(text, add_special_tokens=special)["input_ids"])


class BulkEncoded:
    """Token ids of many texts from one tokenizer call per special-token setting, each distinct text once.

    A fast tokenizer encodes a list in one call into the same ids as one call per text (padding and
    truncation off), without the per-call cost; a text not given up front is encoded on its own. Where
    the tokenizer is proven to cut before a space (:mod:`runner.backends.token_cuts`), texts that share
    a head (a few-shot block, a context before its continuations) are cut there: the head is encoded
    once, each text's rest apart, and the ids are those of the whole text."""

    def __init__(self, tokenizer: Any, texts: Iterable[tuple[str, bool]]) -> None:
        self._tokenizer = tokenizer
        self._ids: dict[tuple[str, bool], list[int]] = {}
        given = list(texts)
        cut = token_cuts.cuts_before_spaces(tokenizer)
        for special in (True, False):
            unique = list(dict.fromkeys(t for t, s in given if s == special))
            if not unique:
                continue
            cuts = token_cuts.shared_cuts(unique) if cut else {}
            heads = {text[:b] for text, b in cuts.items() if b}
            cuts = {text: b for text, b in cuts.items() if b and text not in heads}  # a head is encoded whole
            whole = [t for t in unique if t not in cuts] + sorted(heads - set(unique))
            tails = list(dict.fromkeys(text[b:] for text, b in cuts.items()))
            encoded = dict(zip(whole, tokenizer(whole, add_special_tokens=special)["input_ids"])) if whole else {}
            rests = dict(zip(tails, tokenizer(tails, add_special_tokens=False)["input_ids"])) if tails else {}
            for text in unique:
                b = cuts.get(text, 0)
                self._ids[(text, special)] = list(encoded[text[:b]]) + list(rests[text[b:]]) if b \
                    else list(encoded[text])

    def __call__(self, text: str, special: bool) -> list[int]:
        found = self._ids.get((text, special))
        if found is None:
            return list(self._tokenizer(text, add_special_tokens=special)["input_ids"])
        return list(found)


def render_prompt(tokenizer: Any, chat: ChatFormat, prompt: str,
                  conversation: Sequence[tuple[str, str]] | None = None) -> tuple[str, bool]:
    """The text to tokenize and whether the tokenizer should still add its special tokens (always).

    TensorRT-LLM tokenizes every prompt text with ``add_special_tokens=True`` (the
    ``SamplingParams`` default), the chat-templated ones included, and de-duplicates nothing: a
    Llama-3 chat prompt therefore starts with two ``<|begin_of_text|>``. That quirk is part of
    the requests upstream's references were measured with, so it is kept (a tokenizer that adds no
    BOS, such as SmolLM2's, is unaffected). ``conversation`` ((role, content) pairs) replaces the single user turn ``prompt``; the task's
    system prompt goes first unless the conversation opens with its own. The chat format's
    ``template_kwargs`` (``enable_thinking``...) go to the template as Hugging Face's
    ``apply_chat_template`` takes them. Without the chat template, a conversation is its contents
    separated by blank lines.
    """
    if not chat.apply_chat_template:
        if conversation is not None:
            return "\n\n".join(content for _, content in conversation), True
        return prompt, True
    turns = list(conversation) if conversation is not None else [("user", prompt)]
    messages = []
    if chat.system_prompt and not (turns and turns[0][0] == "system"):
        messages.append({"role": "system", "content": chat.system_prompt})
    messages += [{"role": role, "content": content} for role, content in turns]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                         **dict(chat.template_kwargs)), True


def request_text(tokenizer: Any, chat: ChatFormat, request: GenerationRequest) -> tuple[str, bool]:
    """The text :func:`encode_request` tokenizes first (the whole prompt and suffix, rendered)."""
    return render_prompt(tokenizer, chat, request.prompt + request.suffix, request.messages)


def encode_requests(tokenizer: Any, chat: ChatFormat, requests: Sequence[GenerationRequest], budget: int,
                    bulk: bool = True) -> list[list[int]]:
    """:func:`encode_request` of each request; with ``bulk``, every prompt tokenized in one call first
    (:class:`BulkEncoded`: the same ids)."""
    return encode_requests_cut(tokenizer, chat, requests, budget, bulk)[0]


def encode_requests_cut(tokenizer: Any, chat: ChatFormat, requests: Sequence[GenerationRequest], budget: int,
                        bulk: bool = True) -> tuple[list[list[int]], list[bool]]:
    """:func:`encode_requests`, and whether each rendered prompt was longer than ``budget`` tokens (it was cut)."""
    texts = [request_text(tokenizer, chat, r) for r in requests]  # rendered once, tokenized from here on
    encode = BulkEncoded(tokenizer, texts) if bulk else encoder(tokenizer)
    ids = [encode_request(tokenizer, chat, r, budget, encode, text) for r, text in zip(requests, texts)]
    return ids, [len(encode(*text)) > budget for text in texts]


def encode_request(tokenizer: Any, chat: ChatFormat, request: GenerationRequest, budget: int,
                   encode_text: Encode | None = None, rendered: tuple[str, bool] | None = None) -> list[int]:
    """Token ids of a generation request, at most ``budget`` of them, the same on every backend.

    ``truncation="left"`` keeps the last tokens (after the tokenizer's own leading special tokens,
    see :func:`keep_last`); ``"right"`` keeps the first ones. With a
    ``suffix`` and ``"right"``, the end of ``prompt`` is cut instead, so the suffix (and whatever
    the chat template puts after it) survives: the prompt's tokens are shortened, decoded and the
    request rendered again until it fits (a token boundary can move by one when re-encoded).
    ``rendered``: the request's :func:`request_text`, when the caller has rendered it already.
    """
    if request.truncation not in TRUNCATIONS:
        raise ValueError(f"unknown truncation {request.truncation!r}; allowed: {', '.join(TRUNCATIONS)}")
    encode_text = encode_text or encoder(tokenizer)

    def encode(prompt: str) -> list[int]:
        return encode_text(*render_prompt(tokenizer, chat, prompt, request.messages))

    ids = encode_text(*rendered) if rendered is not None else encode(request.prompt + request.suffix)
    if len(ids) <= budget:
        return ids
    if request.truncation == "left":
        return keep_last(tokenizer, ids, budget, added_special=True)
    if not request.suffix or request.messages is not None:
        return ids[:budget]
    body = list(tokenizer(request.prompt, add_special_tokens=False)["input_ids"])
    keep = len(body) - (len(ids) - budget)
    while keep > 0:
        ids = encode(tokenizer.decode(body[:keep]) + request.suffix)
        if len(ids) <= budget:
            return ids
        keep -= len(ids) - budget
    return encode(request.suffix)[-budget:]  # not even the suffix fits: its last tokens


def keep_last(tokenizer: Any, ids: list[int], budget: int, added_special: bool) -> list[int]:
    """The last ``budget`` tokens of ``ids``; a BOS the tokenizer added stays in front.

    That is what TensorRT-LLM's ``truncate_prompt_tokens`` does (its tokenizer truncates on the
    left, and Hugging Face tokenizers truncate the text before adding special tokens), so a
    truncated Llama prompt still starts with <|begin_of_text|>. With the chat template the
    template's own special tokens are part of the text and are cut like any other token, as upstream.
    """
    head: list[int] = []
    if added_special:
        head = list(tokenizer("", add_special_tokens=True)["input_ids"])
        if ids[:len(head)] != head or len(head) >= budget:
            head = []
    return head + ids[len(head):][-(budget - len(head)):]


def pair_texts(tokenizer: Any, chat: ChatFormat, context: str, continuation: str,
               conversation: Sequence[tuple[str, str]] | None = None) -> tuple[str, str, bool]:
    """(context, continuation, special) as :func:`encode_pair` tokenizes them: the context rendered, its
    trailing whitespace moved to the continuation."""
    context, special = render_prompt(tokenizer, chat, context, conversation)
    trailing = len(context) - len(context.rstrip())
    if trailing:
        continuation = context[-trailing:] + continuation
        context = context[:-trailing]
    return context, continuation, special


def encode_pair(tokenizer: Any, chat: ChatFormat, context: str, continuation: str,
                conversation: Sequence[tuple[str, str]] | None = None,
                encode: Encode | None = None) -> tuple[list[int], list[int]]:
    """Context and continuation tokens, split the way lm-evaluation-harness splits them: trailing
    whitespace of the context moves to the continuation, and the continuation's tokens are those of
    the whole text after the context's (so a merge across the boundary counts once). ``conversation``: the
    context as chat turns (:func:`render_prompt`); ``encode``: the texts' token ids (:class:`BulkEncoded`)."""
    encode = encode or encoder(tokenizer)
    context, continuation, special = pair_texts(tokenizer, chat, context, continuation, conversation)
    whole = encode(context + continuation, special)
    ctx = encode(context, special)
    if not ctx:
        # BOS, or EOS without one (lm-eval's prefix token): a BOS of id 0 is a BOS
        ctx = [tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id]
        return ctx, encode(continuation, False)
    return ctx, whole[len(ctx):]


def loglikelihood_tokens(tokenizer: Any, chat: ChatFormat, context: str, continuation: str,
                         max_input_len: int, max_output_len: int,
                         conversation: Sequence[tuple[str, str]] | None = None,
                         encode: Encode | None = None) -> tuple[list[int], list[int]]:
    """(the token sequence to score, its scored last tokens) of one log-likelihood request.

    With a context, the sequence is cut to its last ``max_input_len + max_output_len + 1`` tokens.
    Without one (a whole document, perplexity) it is BOS plus the document's last tokens,
    ``max_input_len`` in all, as TensorRT-LLM's left-truncating tokenizer keeps them."""
    ctx, cont = encode_pair(tokenizer, chat, context, continuation, conversation, encode)
    if context:
        seq = (ctx + cont)[-(max_input_len + max_output_len + 1):]
    else:
        cont = cont[-max(max_input_len - len(ctx), 1):]
        seq = ctx + cont
    scored = cont[-(len(seq) - 1):] if len(cont) >= len(seq) else cont
    return seq, scored
