"""Rolling log-likelihood requests as rows (runner/backends/rolling.py): lm-eval's disjoint windows worked out by
hand from its definition (``get_rolling_token_windows`` with ``context_len=1``, then ``make_disjoint_window``),
the text tokenized as HFLM's ``tok_encode``, rows summed back per request, and the openai backend sending one
prompt per window. A tokenizer of one token per word ``tN`` (id N) stands in for a model's: no model loads."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from runner.backends.prompting import loglikelihood_tokens
from runner.backends.rolling import Rows, request_rows, rolling_rows, text_tokens
from runner.contract.backend import ChatFormat, TaskLimits
from runner.contract.requests import LoglikelihoodRequest, LoglikelihoodResult


class WordTokenizer:
    """``t10 t11`` -> [10, 11]; ``<s>`` is BOS (id 1), ``</s>`` EOS (id 2); ``add_bos`` like Llama's."""

    bos_token_id, eos_token_id = 1, 2

    def __init__(self, add_bos: bool = False) -> None:
        self.add_bos = add_bos

    def __call__(self, text, add_special_tokens=True):
        ids = [1 if w == "<s>" else 2 if w == "</s>" else int(w[1:]) for w in text.split()]
        return {"input_ids": ([1] if add_special_tokens and self.add_bos else []) + ids}

    def decode(self, token):
        return {1: "<s>", 2: "</s>"}.get(token, f"t{token}")


def words(*ids: int) -> str:
    return " ".join(f"t{i}" for i in ids)


def test_windows_are_lm_evals_disjoint_windows():
    # seven tokens, windows of 3: the first predicts 3 from BOS, the second 3 from one token before them, the
    # last the one remaining token from the 3 before it; every token is predicted exactly once
    assert rolling_rows(list(range(10, 17)), 1, 3) == [
        ([1, 10, 11, 12], [10, 11, 12]),
        ([12, 13, 14, 15], [13, 14, 15]),
        ([13, 14, 15, 16], [16]),
    ]
    assert rolling_rows([10, 11, 12, 13, 14, 15], 1, 3) == [([1, 10, 11, 12], [10, 11, 12]),
                                                           ([12, 13, 14, 15], [13, 14, 15])]
    assert rolling_rows([], 1, 3) == []


def test_a_text_within_one_window_is_the_plain_whole_text_request():
    tok, chat = WordTokenizer(), ChatFormat()
    rows = request_rows(tok, chat, LoglikelihoodRequest("", words(10, 11, 12), rolling_window=3), 64, 8)
    assert rows == [([1, 10, 11, 12], [10, 11, 12])] == [loglikelihood_tokens(tok, chat, "", words(10, 11, 12), 64, 8)]
    # without a window the text is one sequence cut to the input length; with one it is scored whole
    assert request_rows(tok, chat, LoglikelihoodRequest("", words(*range(10, 17))), 4, 8) == \
        [([1, 14, 15, 16], [14, 15, 16])]
    assert len(request_rows(tok, chat, LoglikelihoodRequest("", words(*range(10, 17)), rolling_window=4), 4, 8)) == 2


def test_text_tokens_as_hflm_tok_encode():
    assert text_tokens(WordTokenizer(), words(10, 11)) == [10, 11]
    assert text_tokens(WordTokenizer(add_bos=True), words(10, 11)) == [1, 10, 11]  # the tokenizer's BOS is predicted
    assert text_tokens(WordTokenizer(add_bos=True), "<s> " + words(10)) == [1, 10]  # already there: not added again
    # lm-eval's prefix is EOS when there is no BOS
    no_bos = WordTokenizer()
    no_bos.bos_token_id = None
    rows = request_rows(no_bos, ChatFormat(), LoglikelihoodRequest("", words(10), rolling_window=5), 64, 8)
    assert rows == [([2, 10], [10])]


def test_rows_sum_back_per_request_and_only_whole_requests_count():
    tok, chat = WordTokenizer(), ChatFormat()
    requests = [LoglikelihoodRequest("", words(*range(10, 17)), rolling_window=3),
                LoglikelihoodRequest("t5", " t6"), LoglikelihoodRequest("", "", rolling_window=3)]
    table = Rows.of(tok, chat, requests, 64, 8)
    assert table.counts == [3, 1, 0] and table.owner == [0, 0, 0, 1]
    part = {0: LoglikelihoodResult(-1.5, True, 3), 1: LoglikelihoodResult(-2.0, True, 3),
            3: LoglikelihoodResult(-0.25, False, 1)}
    assert table.combine(part) == {1: LoglikelihoodResult(-0.25, False, 1), 2: LoglikelihoodResult(0, True, 0)}
    whole = table.combine(part | {2: LoglikelihoodResult(-0.5, False, 1)})
    assert whole[0] == LoglikelihoodResult(-4.0, False, 7)  # every token once; greedy only if every window is


def test_a_rolling_request_needs_an_empty_context_and_a_positive_window():
    for context, window in (("ctx", 4), ("", 0), ("", True)):
        with pytest.raises(ValueError, match="rolling request"):
            LoglikelihoodRequest(context, "text", rolling_window=window)


def test_the_openai_backend_sends_one_prompt_per_window_and_sums_them():
    from runner.backends.openai.backend import OpenAIBackend
    from runner.backends.openai.config import OpenAIBackendConfig

    config = OpenAIBackendConfig(base_url="http://127.0.0.1:9/v1", served_model="m")
    config.prompt_logprobs, config.prompt_format = True, "token_ids"
    backend = OpenAIBackend(config, SimpleNamespace(name="m"), SimpleNamespace(), TaskLimits(64, 8), ChatFormat(),
                            progress=False)
    assert backend.capabilities.rolling_windows
    backend._tokenizer = WordTokenizer()
    sent = []

    def one(row):  # the server's answer: minus the scored token ids / 100, greedy when one token is scored
        sent.append(row)
        return LoglikelihoodResult(-sum(row[1]) / 100, len(row[1]) == 1, len(row[1]))

    backend._loglikelihood_one = one
    got = backend.loglikelihood([LoglikelihoodRequest("", words(*range(10, 17)), rolling_window=3),
                                 LoglikelihoodRequest("", words(10, 11), rolling_window=3)])
    assert sorted(sent) == sorted(rolling_rows(list(range(10, 17)), 1, 3) + [([1, 10, 11], [10, 11])])
    assert got[0].logprob == pytest.approx(-(10 + 11 + 12 + 13 + 14 + 15 + 16) / 100)
    assert (got[0].is_greedy, got[0].num_tokens) == (False, 7)
    assert got[1] == LoglikelihoodResult(pytest.approx(-0.21), False, 2)


def test_a_windowed_texts_top_k_records_join_in_text_order_whatever_order_the_batches_answered():
    from runner.contract import top_tokens

    tok, chat = WordTokenizer(), ChatFormat()
    table = Rows.of(tok, chat, [LoglikelihoodRequest("", words(*range(10, 17)), rolling_window=3, top_tokens=1)],
                    64, 8)
    assert table.counts == [3]
    windows = [top_tokens.encode([[i]] * n, [[-0.5]] * n) for i, n in ((1, 3), (2, 3), (3, 1))]
    answered = {2: LoglikelihoodResult(-0.5, True, 1, windows[2]), 0: LoglikelihoodResult(-1.5, True, 3, windows[0]),
                1: LoglikelihoodResult(-1.5, True, 3, windows[1])}  # the batches read back longest first
    (whole,) = table.combine(answered).values()
    ids, _ = top_tokens.decode(whole.top_tokens)
    assert ids[:, 0].tolist() == [1, 1, 1, 2, 2, 2, 3] and whole.num_tokens == 7
    # one window without a record: the text has none
    answered[1] = LoglikelihoodResult(-1.5, True, 3)
    assert table.combine(answered)[0].top_tokens is None
