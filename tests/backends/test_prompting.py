"""Prompt rendering shared by the backends: upstream's tokenization quirks, reproduced."""

from __future__ import annotations

from runner.contract.backend import ChatFormat
from runner.contract.requests import GenerationRequest
from runner.backends.prompting import encode_request


class BosTokenizer:
    """A Llama-3-like tokenizer: adds BOS (id 1) and its chat template writes BOS too; one id per word."""

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        body = " ".join(f"<{m['role']}> {m['content']}" for m in messages)
        return "<bos> " + body + " <assistant>"

    def __call__(self, text, add_special_tokens=True):
        ids = [1 if w == "<bos>" else 100 + len(w) for w in text.split()]
        return {"input_ids": ([1] if add_special_tokens else []) + ids}


def test_chat_prompts_get_the_tokenizers_bos_on_top_of_the_templates_as_upstream():
    """TensorRT-LLM encodes the templated text with add_special_tokens=True: two BOS on Llama-3."""
    req = GenerationRequest(prompt="hello there", max_tokens=4)
    ids = encode_request(BosTokenizer(), ChatFormat(True, None), req, 100)
    assert ids[:2] == [1, 1]
    plain = encode_request(BosTokenizer(), ChatFormat(False, None), req, 100)
    assert plain[:2] == [1, 105]


def test_left_truncation_keeps_the_added_bos_in_front():
    req = GenerationRequest(prompt="a bb ccc dddd eeeee", max_tokens=4, truncation="left")
    ids = encode_request(BosTokenizer(), ChatFormat(True, None), req, 4)
    assert ids == [1, 104, 105, 111]  # added BOS, then the last three tokens ("dddd eeeee <assistant>")


def test_an_empty_context_is_the_bos_token_even_when_its_id_is_0():
    """lm-eval's prefix token: BOS when the tokenizer has one (id 0 included), else EOS."""
    from runner.backends.prompting import encode_pair

    class Plain:
        bos_token_id, eos_token_id = 0, 2

        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": [100 + len(w) for w in text.split()]}

    assert encode_pair(Plain(), ChatFormat(), "", "ab cde") == ([0], [102, 103])
    Plain.bos_token_id = None
    assert encode_pair(Plain(), ChatFormat(), "", "ab cde") == ([2], [102, 103])
