"""Token counts from a tokenizer alone, without the model's weights.

A dry run draws a task's seeded subset to count the requests the generation cache already holds;
a task that keeps only documents of a minimum length in the evaluated model's tokens (perplexity)
needs those counts before any request exists. Loading the tokenizer takes seconds, the model a
minute or more (and quantizing it longer). The tokenizer is transformers' ``AutoTokenizer`` on the
same files the backend loads, counted as the backends' ``count_tokens`` counts (special tokens
excluded), so the subset is the one the real job draws. The last few are kept: the jobs of a sweep
share a model.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

TokenCounter = Callable[[Sequence[str]], list[int]]


@functools.lru_cache(maxsize=4)
def tokenizer_counter(location: str, revision: str | None = None, trust_remote_code: bool = False) -> TokenCounter:
    """``count(texts) -> tokens of each``, from the tokenizer at ``location`` (a directory or Hub id)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(location, revision=revision, trust_remote_code=trust_remote_code)

    return functools.partial(count_with, tokenizer)


def count_with(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """Tokens of each text in ``tokenizer``, special tokens excluded (every backend's ``count_tokens``)."""
    return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]
