"""The helpers every task shares (evaluators/metrics.py, deviations.py, checks.py, responses.py,
scoring/filters.py): the arithmetic and key parts the tasks' references were recorded with."""

from __future__ import annotations

import hashlib
import math
from types import SimpleNamespace

import pytest

from runner.contract.evaluator import ScoredSample
from evaluators.checks import check_choice
from evaluators.deviations import chat_deviation, generation_deviations
from evaluators.metrics import group_means, mean, rate
from evaluators.responses import only_text
from evaluators.scoring.filters import apply_filters, filter_rates
from runner.contract.errors import ConfigError

BRIEF = "system_prompt=" + hashlib.sha256(b"Be brief.").hexdigest()[:8]


def chat(apply: bool, system: str | None = None, **kw) -> SimpleNamespace:
    return SimpleNamespace(apply_chat_template=apply, system_prompt=system, **kw)


def scored(score: float, **meta) -> ScoredSample:
    return ScoredSample("id", "p", "o", "t", score, meta)


def test_mean_and_rate_keep_the_sum_over_n_arithmetic():
    values = [100.0, 0.0, 0.0, 100.0, 100.0, 0.0, 100.0]
    assert mean(values) == sum(values) / len(values)
    flags = [True, False, False, True, True, False, True]
    assert rate(flags) == 100.0 * 4 / 7 and rate([1, 0, "yes", ""]) == 50.0
    assert math.isnan(mean([])) and math.isnan(rate([]))


def test_group_means_are_named_and_sorted_by_group():
    rows = [scored(100.0, subject="b"), scored(0.0, subject="a"), scored(100.0, subject="a")]
    assert list(group_means(rows, "subject", "subject").items()) == [("subject/a", 50.0), ("subject/b", 100.0)]


@pytest.mark.parametrize("apply,system,upstream_chat,without,expected", [
    (False, None, False, True, []),
    (True, None, False, True, ["chat_template=true"]),
    (False, "Be brief.", False, True, [BRIEF]),  # keyed even though only the template uses it (recorded so)
    (False, "Be brief.", False, False, []),  # cnn_dailymail, mmlu: keyed only with the template
    (True, "Be brief.", False, False, ["chat_template=true", BRIEF]),
    (True, "Be brief.", True, True, [BRIEF]),  # gpqa, json_mode, SCORE: upstream uses the template
    (False, "Be brief.", True, True, [BRIEF, "chat_template=false"]),
    (False, "Be brief.", True, False, ["chat_template=false"]),
])
def test_chat_deviation(apply, system, upstream_chat, without, expected):
    assert chat_deviation(chat(apply, system), upstream_chat, key_system_prompt_without_chat=without) == expected


def test_generation_deviations_put_the_chat_parts_last():
    config = chat(True, "Be brief.", max_output_len=64, stop=["Q:"])
    parts = generation_deviations(config, 256, ("Q:",))
    assert parts == ["max_output_len=64", "chat_template=true", BRIEF]


def test_check_choice_names_what_is_allowed():
    check_choice("a", ("a", "b"), "mode", "task.mode")
    with pytest.raises(ConfigError) as err:
        check_choice("c", ("a", "b"), "mode", "task.mode", " (upstream: a)")
    assert "unknown mode" in str(err.value) and "a, b (upstream: a)" in str(err.value)


def test_only_text_takes_the_single_generation():
    assert only_text(["out"]) == "out"
    with pytest.raises(ValueError):
        only_text(["a", "b"])


def test_lm_eval_filters_record_and_rate_both_extractions():
    found = apply_filters("x 7", lambda o: None, lambda o: o.split()[-1], lambda a: a == "7")
    assert found == {"strict": None, "flexible": "7", "strict_match": False, "flexible_match": True}
    rows = [scored(50.0, **found), scored(100.0, strict_match=True, flexible_match=True)]
    assert filter_rates(rows) == {"exact_match_strict": 50.0, "exact_match_flexible": 100.0}
