"""Log-likelihood requests as the token rows a backend scores, and the rows' answers summed back per request.

Why: lm-evaluation-harness scores a rolling text (``loglikelihood_rolling``: perplexity) whole, in disjoint
windows of at most its ``max_length`` tokens, and sums them. A request with ``rolling_window`` is therefore one or
more rows here, made with lm-eval's own ``get_rolling_token_windows`` and ``make_disjoint_window`` (so the window
arithmetic is lm-eval's, not a copy of it), the text tokenized as its HFLM ``tok_encode`` does. Every other
request is one row (:func:`runner.backends.prompting.loglikelihood_tokens`). A backend scores all rows of all
requests in its normal batched path (``hf``: one forward pass per distinct row; ``openai``: one echoed prompt per
row) and :class:`Rows` adds them up: log-probabilities summed, greedy only if every row is, the tokens counted
once (a rolling request's ``num_tokens`` is its text's token count)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from runner.backends.prompting import BulkEncoded, Encode, encoder, loglikelihood_tokens, pair_texts
from runner.contract import top_tokens
from runner.contract.backend import ChatFormat
from runner.contract.requests import LoglikelihoodRequest, LoglikelihoodResult

Row = tuple[list[int], list[int]]  # (the token sequence to score, its scored last tokens)


def prefix_token(tokenizer: Any) -> int:
    """What predicts a rolling text's first token: BOS, else EOS (lm-eval's ``prefix_token_id``; a BOS of id 0
    is a BOS)."""
    return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id


def text_tokens(tokenizer: Any, text: str) -> list[int]:
    """A rolling text's tokens as lm-eval's HFLM ``tok_encode`` makes them: the tokenizer's own special tokens,
    unless the text already starts with the prefix token's text."""
    special = not text.startswith(tokenizer.decode(prefix_token(tokenizer)))
    return list(tokenizer(text, add_special_tokens=special)["input_ids"])


def rolling_rows(tokens: Sequence[int], prefix: int, window: int) -> list[Row]:
    """lm-eval's disjoint rolling windows of ``tokens`` (``context_len=1``, ``max_seq_len=window``) as rows: each
    row is the window's context followed by its predicted tokens, and scores those. Every token is predicted once;
    no row is longer than ``window + 1`` tokens (``window`` inputs). An empty text has no rows."""
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

    rows = []
    for pair in get_rolling_token_windows(token_list=list(tokens), prefix_token=prefix, max_seq_len=window,
                                          context_len=1):
        context, predicted = make_disjoint_window(pair)
        rows.append((list(context) + list(predicted), list(predicted)))
    return rows


def request_rows(tokenizer: Any, chat: ChatFormat, request: LoglikelihoodRequest, max_input_len: int,
                 max_output_len: int, encode: Encode | None = None) -> list[Row]:
    """The rows that answer ``request``: its rolling windows, or its one sequence (its texts' token ids
    from ``encode``)."""
    if request.rolling_window is None:
        return [loglikelihood_tokens(tokenizer, chat, request.context, request.continuation, max_input_len,
                                     max_output_len, request.messages, encode)]
    return rolling_rows(text_tokens(tokenizer, request.continuation), prefix_token(tokenizer), request.rolling_window)


@dataclass
class Rows:
    """Every row of a list of requests, flattened in request order, and who owns each."""

    rows: list[Row]
    owner: list[int]  # the request index of each row
    counts: list[int]  # rows per request

    @classmethod
    def of(cls, tokenizer: Any, chat: ChatFormat, requests: Sequence[LoglikelihoodRequest], max_input_len: int,
           max_output_len: int, bulk: bool = False) -> "Rows":
        """The rows of ``requests``; with ``bulk``, every context and context + continuation text is tokenized
        in one call first (:class:`~runner.backends.prompting.BulkEncoded`: the same ids)."""
        encode = BulkEncoded(tokenizer, bulk_texts(tokenizer, chat, requests)) if bulk else encoder(tokenizer)
        rows, owner, counts = [], [], []
        for i, request in enumerate(requests):
            mine = request_rows(tokenizer, chat, request, max_input_len, max_output_len, encode)
            rows += mine
            owner += [i] * len(mine)
            counts.append(len(mine))
        return cls(rows, owner, counts)

    def combine(self, answered: Mapping[int, LoglikelihoodResult]) -> dict[int, LoglikelihoodResult]:
        """The requests all of whose rows are in ``answered`` (row index -> result), each rows' results summed;
        a request without rows (an empty rolling text) is a log-probability of 0 over no tokens."""
        parts: dict[int, list[LoglikelihoodResult]] = {i: [] for i in range(len(self.counts))}
        for row in sorted(answered):  # a request's windows in text order (their top-k records join in it)
            parts[self.owner[row]].append(answered[row])
        return {i: summed(got) for i, got in parts.items() if len(got) == self.counts[i]}


def bulk_texts(tokenizer: Any, chat: ChatFormat, requests: Sequence[LoglikelihoodRequest]) -> list[tuple[str, bool]]:
    """The texts the non-rolling requests tokenize: each context, and each context with its continuation."""
    texts = []
    for request in requests:
        if request.rolling_window is None:
            context, continuation, special = pair_texts(tokenizer, chat, request.context, request.continuation,
                                                        request.messages)
            texts += [(context, special), (context + continuation, special)]
    return texts


def summed(parts: Sequence[LoglikelihoodResult]) -> LoglikelihoodResult:
    """One request's answer from its rows': log-probabilities and tokens summed, greedy only if every row is, the
    rows' top-k records joined in order (when every row has one)."""
    records = [r.top_tokens for r in parts]
    joined = top_tokens.concat(records) if records and all(t is not None for t in records) else None  # type: ignore
    return LoglikelihoodResult(sum(r.logprob for r in parts), all(r.is_greedy for r in parts),
                               sum(r.num_tokens for r in parts), joined)
