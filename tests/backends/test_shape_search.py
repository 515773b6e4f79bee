"""Batch shapes by measurement (runner/backends/hf/shape_search.py): the choice by a scripted timer, every row
answered once whatever ran it, and the hf backend's answers in float32 the same whichever shape wins (on a
2-layer random-weight model of the embedded architecture: tests/helpers/micro_model.py)."""

from __future__ import annotations

import logging

import pytest

from runner.backends.hf import shape_search
from runner.backends.hf.batching import Group
from runner.backends.hf.backend import HFBackend, HFBackendConfig
from runner.backends.hf.shape_search import Shape, Trial
from runner.contract.backend import TaskLimits
from runner.contract.requests import LoglikelihoodRequest
from runner.contract.task_config import ModelConfig, QuantConfig
from tests.helpers.micro_model import micro_checkpoint

CPU = shape_search.candidates("cpu", 64, 16384)


def test_candidates_for_a_cpu_are_token_budgets_and_a_gpu_s_lie_within_its_budget():
    assert CPU == (Shape(64, 1024), Shape(64, 2048), Shape(64, 4096))
    assert shape_search.candidates("cuda", 256, 100_000) == (Shape(64, 25_000), Shape(128, 50_000),
                                                             Shape(256, 100_000))


def test_trials_run_two_batches_of_median_rows_each_and_only_when_the_job_has_the_rows_to_pay_for_them():
    # median 100 tokens: 1024 // 100 = 10 rows a call, then 20 and 40; trials of 2 x 70 = 140 rows, which 1.5 x 140 =
    # 210 rows would pay for, but a search needs 360 rows (smaller jobs' trials split too many prefix groups)
    assert shape_search.trial_sizes(CPU, [100] * 360, 1024) == [20, 40, 80]
    assert shape_search.trial_sizes(CPU, [100] * 359, 1024) is None
    # rows of 20 tokens: 51, 102 and 204 a call, the last two capped at the budget's 64 rows: 2 x 179 = 358 trial
    # rows, searched from 1.5 x 358 = 537
    assert shape_search.trial_sizes(CPU, [20] * 537, 1024) == [102, 128, 128]
    assert shape_search.trial_sizes(CPU, [20] * 536, 1024) is None
    # a task's own row cap shrinks the trials
    assert shape_search.trial_sizes(CPU, [90, 100, 110] * 120, 16) == [20, 32, 32]
    # a row longer than a budget still runs, alone
    assert shape_search.batch_rows(Shape(64, 1024), 1500, 1024) == 1


def test_the_fastest_rate_wins_and_a_tie_goes_to_the_narrower_shape():
    trials = [Trial(Shape(8, 1), 1000, 2.0), Trial(Shape(16, 1), 1000, 1.0), Trial(Shape(32, 1), 2000, 2.0),
              Trial(Shape(64, 1), 1000, 1.25)]
    assert shape_search.fastest(trials).shape == Shape(16, 1)  # 1000 tokens/s, tied with 32 rows: the first
    assert trials[0].rate == 500.0 and Trial(Shape(1, 1), 5, 0.0).rate == float("inf")


def test_task_shape_is_the_median_length_to_a_power_of_two():
    assert shape_search.task_shape([10, 60, 61, 900]) == "rows of ~64 tokens"
    assert shape_search.task_shape([64]) == "rows of ~64 tokens" and shape_search.task_shape([65]) == \
        "rows of ~128 tokens"


def test_searched_groups_time_each_candidate_on_its_own_chunk_and_plan_the_rest_under_the_fastest():
    lengths = [10] * 400
    clock = iter([0.0, 4.0,  # 1024 tokens: 16 rows x 10 tokens in 4 s = 40/s
                  4.0, 5.0,  # 2048 tokens: 320 tokens in 1 s = 320/s (the fastest)
                  5.0, 7.0])  # 4096 tokens: 640 in 2 s = 320/s (a tie: the narrower wins)
    planned: list[tuple[Shape, list[int]]] = []
    reported: list[tuple[Trial, list[Trial]]] = []
    syncs: list[int] = []

    def plan(chunk: list[int], shape: Shape) -> list[Group]:
        planned.append((shape, chunk))
        return [Group(0, [chunk[i:i + shape.rows] for i in range(0, len(chunk), shape.rows)])]

    groups = list(shape_search.searched_groups(range(400), lengths, CPU, [16, 32, 64], plan,
                                               lambda best, trials: reported.append((best, trials)),
                                               timer=lambda: next(clock), sync=lambda: syncs.append(1)))
    assert [shape for shape, _ in planned] == [*CPU, Shape(64, 2048)]
    assert [len(chunk) for _, chunk in planned] == [16, 32, 64, 288]
    answered = [i for g in groups for batch in g.batches for i in batch]
    assert sorted(answered) == list(range(400))  # every row once
    best, trials = reported[0]
    assert best.shape == Shape(64, 2048) and [t.rate for t in trials] == [40.0, 320.0, 320.0]
    assert len(syncs) == 6  # before and after each trial
    assert shape_search.describe(best, trials) == ("64 rows x 2048 tokens (measured tokens/s: 64x1024: 40, "
                                                   "64x2048: 320, 64x4096: 320)")


def test_trial_chunks_are_cut_from_the_middle_of_the_length_order():
    # 20 rows of lengths 19, 18, ..., 0 (row i has 19 - i tokens); trials of 2, 4 and 6 rows take the 12 rows around
    # the median: lengths 4-5, 6-9, 10-15, each chunk rows of like lengths; the rest is the 4 shortest and 4 longest
    lengths = [19 - i for i in range(20)]
    planned: list[list[int]] = []

    def plan(chunk: list[int], shape: Shape) -> list[Group]:
        planned.append(chunk)
        return [Group(0, [chunk])]

    shapes = (Shape(1, 10), Shape(2, 20), Shape(3, 30))
    groups = list(shape_search.searched_groups(range(20), lengths, shapes, [2, 4, 6], plan, lambda *a: None,
                                               timer=iter(range(100)).__next__))
    assert [sorted(lengths[i] for i in chunk) for chunk in planned] == \
        [[4, 5], [6, 7, 8, 9], [10, 11, 12, 13, 14, 15], [0, 1, 2, 3, 16, 17, 18, 19]]
    assert sorted(i for g in groups for b in g.batches for i in b) == list(range(20))


@pytest.fixture(scope="module")
def micro(tmp_path_factory) -> ModelConfig:
    path = micro_checkpoint(tmp_path_factory.mktemp("micro"), hidden_size=96)
    return ModelConfig(name="micro", hf_id="local/micro", path=str(path))


def requests(n: int) -> list[LoglikelihoodRequest]:
    """``n`` distinct contexts of varied lengths, four one-token letters each (an MMLU-like 0-shot call)."""
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()
    out = []
    for i in range(n):
        context = " ".join(words[(i * 7 + j) % len(words)] for j in range(5 + i % 37)) + f" {i}\nAnswer:"
        out += [LoglikelihoodRequest(context, f" {letter}") for letter in "ABCD"]
    return out


def scores(micro: ModelConfig, reqs, **config) -> tuple[list, HFBackend]:
    be = HFBackend(HFBackendConfig(dtype="float32", device="cpu", num_threads=1, **config), micro,
                   QuantConfig(name="none"), TaskLimits(max_input_len=2048, max_output_len=8), progress=False)
    with be:
        return be.loglikelihood(reqs), be


TRIED = (Shape(2, 512), Shape(5, 1280), Shape(12, 3072))  # small shapes: a trial of 38 rows, 57 needed


@pytest.mark.parametrize("winner", [0, 2])
def test_float32_answers_are_the_same_whichever_shape_wins(micro, monkeypatch, caplog, winner):
    """The search on (the narrowest or the widest shape forced to win) against one fixed shape: the same
    greedy flags and log-likelihoods to float32 rounding; the choice is logged in the details and
    remembered for the next job on the same device, model and lengths; a shape the user set is kept."""
    monkeypatch.setattr(shape_search, "_chosen", {})
    monkeypatch.setattr(shape_search, "candidates", lambda *args: TRIED)
    monkeypatch.setattr(shape_search, "MIN_SEARCH_ROWS", 0)  # a search on 60 rows
    monkeypatch.setattr(shape_search, "fastest", lambda trials: trials[winner])
    reqs = requests(60)
    fixed, _ = scores(micro, reqs, batch_size=7, max_batch_tokens=3000)
    searched, be = scores(micro, reqs)
    assert [r.is_greedy for r in searched] == [r.is_greedy for r in fixed]
    assert [r.num_tokens for r in searched] == [r.num_tokens for r in fixed]
    assert [r.logprob for r in searched] == pytest.approx([r.logprob for r in fixed], rel=1e-5, abs=1e-5)
    details = be.info().details
    assert details["batch_search"].startswith(str(TRIED[winner]))
    assert details["batch_budget"].startswith(f"{TRIED[winner].rows} rows") and "measured, rows of ~" in \
        details["batch_budget"]

    def no_trial(*args, **kwargs):
        raise AssertionError("searched again")

    monkeypatch.setattr(shape_search, "searched_groups", no_trial)
    again, be = scores(micro, reqs)  # the next job: the remembered shape, no trial
    assert "measured by an earlier job" in be.info().details["batch_budget"] and "batch_search" not in \
        be.info().details
    assert [r.logprob for r in again] == pytest.approx([r.logprob for r in fixed], rel=1e-5, abs=1e-5)
    with caplog.at_level(logging.INFO, logger="runner"):
        _, be = scores(micro, reqs, batch_size=7)  # the user's shape wins, and the log says so
    assert be.info().details["batch_budget"].startswith("7 rows")
    assert "batch shape: 7 rows, 16384 tokens (CPU defaults); backend.batch_size / max_batch_tokens given" in \
        caplog.text


def test_float32_answers_are_the_same_with_shared_prefixes_on_off_and_where_they_pay(micro):
    """Rows in groups sharing a 40-word passage, and rows sharing only a 3-token header: every prefix shared (a
    cheap call, 16 tokens: the header too), the passages only (the default call cost, 64 tokens), and none; the
    same greedy flags and log-likelihoods to float32 rounding, and the three plans differ."""
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()
    passage = [" ".join(words[(g * 3 + j) % len(words)] for j in range(40)) for g in range(3)]
    reqs = []
    for i in range(24):
        head = f"Read this. {passage[i % 3]}\n" if i < 12 else "Read this. "
        context = head + " ".join(words[(i * 5 + j) % len(words)] for j in range(3 + i % 9)) + f" {i}\nAnswer:"
        reqs += [LoglikelihoodRequest(context, f" {letter}") for letter in "ABCD"]
    configs = {"all": {"batch_call_cost_tokens": 16}, "paying": {}, "none": {"prefix_cache": False}}
    runs = {name: scores(micro, reqs, batch_size=4, max_batch_tokens=4096, **config)
            for name, config in configs.items()}
    plans = {}
    for name, (_, be) in runs.items():
        with be:
            rows = [be._tokenizer(r.context)["input_ids"] for r in reqs[::4]]
            plans[name] = sorted(g.prefix for g in be._plan(rows, list(range(24)), [1] * 24))
    assert plans["none"] == [0] and plans["all"] != plans["paying"] and max(plans["all"]) > 32
    fixed = runs["none"][0]
    for name in ("all", "paying"):
        got = runs[name][0]
        assert [r.is_greedy for r in got] == [r.is_greedy for r in fixed]
        assert [r.logprob for r in got] == pytest.approx([r.logprob for r in fixed], rel=1e-5, abs=1e-5)
