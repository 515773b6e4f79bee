"""Fidelity: on the embedded model in float32, task=lm_eval's per-document scores and aggregates equal lm-eval's
own CLI (``lm_eval --model hf ... --log_samples``) on the same local tasks, for the three request types: multiple
choice (log-likelihood), generation and rolling log-likelihood. The expected values are read from lm-eval's
output files of the session's float32 oracle run (tests/helpers/lm_eval_tasks.py: one CLI run covers these three
tasks and the compare oracle's, so the CLI starts and loads the model once). The CLI's ``max_length`` and our
``task.rolling_window`` are both WINDOW, below the corpus documents' lengths: a rolling text is scored in lm-eval's
windows on both sides (and above the generation prompt plus its 8 new tokens, which HFLM's max_length would cut)."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict

import pytest

from tests.conftest import compose
from tests.helpers.lm_eval_tasks import WINDOW

TASKS = ("arc_local", "gsm8k_local", "corpus_rolling")


@pytest.mark.e2e
def test_scores_equal_lm_eval_cli_for_each_request_type(tmp_path, lm_eval_float32_oracle):
    import torch

    from runner.job.answer import job_requests, score_all
    from runner.job.flow import typed
    from runner.job.prepare import prepare

    oracle = lm_eval_float32_oracle()
    tasks, cli = oracle / "tasks", oracle / "cli"
    results = json.loads(next(cli.rglob("results_*.json")).read_text())["results"]
    expected = {name: {r["doc_id"]: r for r in map(json.loads, next(cli.rglob(f"samples_{name}_*.jsonl"))
                                                   .read_text().splitlines())} for name in TASKS}

    # the runner's side in this process, the model loaded once: each task's own job (prepare: its evaluator, the
    # backend's config), its samples, and every request of a kind in one call (the job's answer step)
    started = time.monotonic()
    jobs = {name: prepare(typed(compose(["task=lm_eval", f"task.lm_eval_task={name}", f"task.include_path={tasks}",
                                         "backend=hf", "backend.dtype=float32", "backend.num_threads=1",
                                         "task.gen_kwargs='max_gen_toks=8'", f"task.rolling_window={WINDOW}",
                                         "tracking=none", "reference.mode=skip",
                                         f"output_dir={tmp_path / 'ours' / name}"]))) for name in TASKS}
    ours, threads = {}, torch.get_num_threads()
    try:
        with jobs[TASKS[0]].backend as backend:  # one thread, as the CLI's OMP_NUM_THREADS=1
            lengths = [len(backend.loaded[1](json.loads(line)["text"])["input_ids"])
                       for line in open(oracle / "data" / "corpus.jsonl")]
            for name, job in jobs.items():
                samples = job.evaluator.samples(50, 0)
                scored = score_all(job.evaluator, backend, samples, job_requests(job.evaluator, samples, job.task.sampling))
                ours[name] = (job.evaluator.aggregate(scored), {s.meta["doc_id"]: asdict(s) for s in scored})
    finally:
        torch.set_num_threads(threads)
    print(f"runner {time.monotonic() - started:.1f} s", file=sys.stderr)

    metrics, rows = ours["arc_local"]
    assert sorted(rows) == sorted(expected["arc_local"]) == [0, 1, 2, 3]
    for doc_id, row in rows.items():
        assert row["meta"]["lm_eval"] == {m: expected["arc_local"][doc_id][m] for m in ("acc", "acc_norm")}
        assert row["meta"]["prompt_hash"] == expected["arc_local"][doc_id]["prompt_hash"]
        assert row["meta"]["doc_hash"] == expected["arc_local"][doc_id]["doc_hash"]
    assert metrics["lm_eval/acc"] == results["arc_local"]["acc,none"]
    assert metrics["lm_eval/acc_norm"] == results["arc_local"]["acc_norm,none"]

    metrics, rows = ours["gsm8k_local"]
    assert sorted(rows) == sorted(expected["gsm8k_local"]) == [0, 1]
    for doc_id, row in rows.items():
        cli = expected["gsm8k_local"][doc_id]
        assert row["meta"]["response"] == cli["resps"][0][0]  # the same greedy text, before the filter
        assert row["prediction"] == cli["filtered_resps"][0] and row["meta"]["lm_eval"]["exact_match"] == cli["exact_match"]
        assert row["meta"]["prompt_hash"] == cli["prompt_hash"]  # the same 1-shot example was drawn
    assert metrics["lm_eval/exact_match"] == results["gsm8k_local"]["exact_match,last-number"]

    metrics, rows = ours["corpus_rolling"]
    assert sorted(rows) == sorted(expected["corpus_rolling"]) == [0, 1]
    assert min(lengths) > WINDOW and max(lengths) > 2 * WINDOW  # every document in windows, one in three
    for doc_id, row in rows.items():
        ll, words = row["meta"]["lm_eval"]["word_perplexity"]
        cli_ll, cli_words = expected["corpus_rolling"][doc_id]["word_perplexity"]
        assert words == cli_words and ll == pytest.approx(cli_ll, rel=1e-4)
    for metric in ("word_perplexity", "byte_perplexity", "bits_per_byte"):
        assert metrics[f"lm_eval/{metric}"] == pytest.approx(results["corpus_rolling"][f"{metric},none"], rel=1e-4)
    # the task metric is lm-eval's corpus figure (a corpus metric), not the mean of per-document perplexities
    assert metrics["word_perplexity"] == pytest.approx(results["corpus_rolling"]["word_perplexity,none"], rel=1e-4)
