"""Cutting a text before a space that follows a non-space gives the ids of the whole text, for the tokenizer
families :mod:`runner.backends.token_cuts` accepts, and is refused for the others.

The claim is checked on random texts (letters, digits, punctuation, apostrophes, spaces, tabs, newlines) with
small byte-level BPE tokenizers trained here on the same alphabet, one per accepted split pattern (GPT-2's
built into ``ByteLevel``, Llama-3's and Qwen2's as ``Split`` patterns), at every allowed cut; the same
checker finds the cuts the rule leaves out (inside a whitespace run, before a newline) wrong, so it can fail.
"""

from __future__ import annotations

import random

import pytest

from runner.backends import token_cuts

ALPHABET = ["a", "b", "Zq", "é", "1", "23", "456", " ", " ", "  ", "\n", "\n\n", "\r\n", "\t", ".", ",", ":", "'s",
            "'T", "'", "!?", "(", ")", "$", "-"]


def texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(2, 30))) for _ in range(count)]


def trained(pre_tokenizer, **options):
    """A small byte-level BPE tokenizer over :data:`ALPHABET`, wrapped as transformers wraps tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(dropout=options.get("dropout")))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    if options.get("lowercase"):
        tok.normalizer = normalizers.Lowercase()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<s>"])
    tok.train_from_iterator(texts(0, 3000), trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>")
    if options.get("rstrip_token"):
        from tokenizers import AddedToken

        wrapped.add_tokens([AddedToken("<x>", rstrip=True)])
    return wrapped


def byte_level_after(pattern: str):
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def families():
    from tokenizers import pre_tokenizers

    return {"gpt2": pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            "llama3": byte_level_after(token_cuts.LLAMA3_PATTERN), "qwen2": byte_level_after(token_cuts.QWEN2_PATTERN)}


def wrong_cuts(tokenizer, samples: list[str], allowed) -> list[tuple[str, int]]:
    """(text, b) where ``allowed(text, b)`` and the two parts' ids differ from the whole's."""
    def ids(text: str, special: bool) -> list[int]:
        return tokenizer(text, add_special_tokens=special)["input_ids"]

    return [(text, b) for text in samples for b in range(1, len(text)) if allowed(text, b)
            and ids(text, True) != ids(text[:b], True) + ids(text[b:], False)]


def before_a_space(text: str, b: int) -> bool:
    return text[b] == " " and not text[b - 1].isspace()


@pytest.mark.parametrize("family", ["gpt2", "llama3", "qwen2"])
def test_every_cut_before_a_space_after_a_non_space_keeps_the_ids(family):
    tokenizer = trained(families()[family])
    assert token_cuts.cuts_before_spaces(tokenizer)
    samples = texts(1, 1500)
    assert sum(before_a_space(t, b) for t in samples for b in range(1, len(t))) > 1000  # cuts actually tried
    assert wrong_cuts(tokenizer, samples, before_a_space) == []
    # the cuts the rule leaves out are not safe: inside a whitespace run, and (Llama-3) before a newline
    assert wrong_cuts(tokenizer, samples, lambda t, b: t[b] == " " and t[b - 1].isspace())
    if family != "gpt2":
        assert wrong_cuts(tokenizer, ["x.\nb", "a:\n\nb"], lambda t, b: t[b] == "\n" and not t[b - 1].isspace())


def test_other_tokenizers_are_not_cut():
    from tokenizers import pre_tokenizers

    gpt2 = families()["gpt2"]
    assert not token_cuts.cuts_before_spaces(trained(pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)))
    assert not token_cuts.cuts_before_spaces(trained(pre_tokenizers.Metaspace()))
    assert not token_cuts.cuts_before_spaces(trained(byte_level_after(r"\s+|\S+")))  # an unknown pattern
    assert not token_cuts.cuts_before_spaces(trained(gpt2, lowercase=True))
    assert not token_cuts.cuts_before_spaces(trained(gpt2, dropout=0.1))
    assert not token_cuts.cuts_before_spaces(trained(gpt2, rstrip_token=True))


def test_the_embedded_tokenizer_is_cut_and_heads_are_shared():
    from transformers import AutoTokenizer

    from runner.backends.prompting import BulkEncoded
    from runner.files.assets import smollm2_checkpoint

    tokenizer = AutoTokenizer.from_pretrained(smollm2_checkpoint())
    assert token_cuts.cuts_before_spaces(tokenizer)
    block = "The following are multiple choice questions (with answers) about anatomy.\n\nWhat is 2 + 2?\nAnswer: B\n\n"
    given = [(block + "Which bone? Answer:", True), (block + "Which organ?\nAnswer:", True),
             ("short one", True), ("Context sentence that is long enough to be a head, it ends here:", True)]
    given += [(given[-1][0] + " A", True), (given[-1][0] + " B", True)]
    cuts = token_cuts.shared_cuts([t for t, _ in given])
    assert given[0][0][:cuts[given[0][0]]] == block + "Which"  # the longest shared head, cut before a space
    assert cuts[given[4][0]] == len(given[3][0]) and cuts["short one"] == 0
    bulk = BulkEncoded(tokenizer, given)
    assert [bulk(t, s) for t, s in given] == [tokenizer(t)["input_ids"] for t, _ in given]
