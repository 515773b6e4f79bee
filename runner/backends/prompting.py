"""Prompt and output handling every backend shares, so tokens and texts agree across backends."""

from __future__ import annotations

from typing import Any, Sequence

from runner.backends.base import ChatFormat


def render_prompt(tokenizer: Any, chat: ChatFormat, prompt: str) -> tuple[str, bool]:
    """The text to tokenize and whether the tokenizer should still add its special tokens.

    With the chat template on, the template already holds them (BOS, role markers).
    """
    if not chat.apply_chat_template:
        return prompt, True
    messages = []
    if chat.system_prompt:
        messages.append({"role": "system", "content": chat.system_prompt})
    messages.append({"role": "user", "content": prompt})
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True), False


def cut_at_stop(text: str, stops: Sequence[str]) -> str:
    """Cut ``text`` before the first stop string.

    Engines that match stop strings as token sequences can miss one tokenized differently inside
    the output; cutting the text as well gives every backend the same result.
    """
    cut = len(text)
    for stop in stops:
        pos = text.find(stop)
        if pos != -1:
            cut = min(cut, pos)
    return text[:cut]
