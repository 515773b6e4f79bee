"""A dry run counts the cached requests of a task whose subset depends on the model's tokens (perplexity keeps
documents of ``min_tokens`` tokens) with the backend's tokenizer alone, creates no MLflow store, and estimates
the time from earlier runs whether or not they answered from the cache (issue 31, item 6)."""

from __future__ import annotations

import pytest

from runner.backends.fake import FakeBackend
from runner.job.dry_run import dry_run
from runner.job.history import seconds_per_computed_sample
from runner.job.flow import asked_num_samples, run, typed
from tests.conftest import compose


def _perplexity(tmp_path, *extra: str):
    return compose(["backend=fake", "task=perplexity", "task.num_samples=3", "reference.mode=skip",
                    f"cache.path={tmp_path / 'gen.sqlite'}", f"output_dir={tmp_path / 'out'}", *extra])


def test_perplexity_requests_are_counted_before_and_after_a_real_run(tmp_path, capsys):
    db = tmp_path / "mlflow.db"
    before = dry_run(typed(_perplexity(tmp_path, f"tracking.tracking_uri=sqlite:///{db}")))
    # one log-likelihood request per document, none stored yet; no store is created to say there is no history
    assert "n=3, 3 requests; cache: 0 of 3 stored; estimate: no earlier run to measure from" in before
    assert not db.exists()
    assert run(_perplexity(tmp_path, "tracking=none")).exit_status == 0
    after = dry_run(typed(_perplexity(tmp_path, "tracking=none")))
    assert "n=3, 3 requests; cache: 3 of 3 stored" in after  # the documents the real run drew, all answered
    assert after in capsys.readouterr().out


def test_a_backend_that_counts_tokens_only_once_loaded_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(FakeBackend, "tokenizer_counter", lambda self: None)
    line = dry_run(typed(_perplexity(tmp_path, "tracking=none")))
    assert "n=3 (drawn by the model's token counts once it loads); cache: not counted " \
           "(backend=fake counts tokens only with its model loaded)" in line


def test_a_run_that_sets_no_n_is_counted_at_the_reference_entrys_n(tmp_path):
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "perplexity.yaml").write_text(  # the fake backend's perplexity entry, recorded on 5 documents
        "HuggingFaceTB/SmolLM2-135M-Instruct:\n"
        "  - extra_acc_spec: corpus=pydoc_topics-32e8236b,min_tokens=256,max_input_len=512\n"
        "    perplexity: 1.0\n    num_samples: 5\n")

    def line(*extra: str) -> str:
        cfg = compose(["backend=fake", "task=perplexity", "tracking=none", f"reference.dir={refs}",
                       f"cache.path={tmp_path / 'gen.sqlite'}", f"output_dir={tmp_path / 'out'}", *extra])
        config = typed(cfg)
        return dry_run(config, "", asked_num_samples(cfg, config))

    assert "n=5 (the reference entry's: perplexity.yaml, entry 0), 5 requests" in line()  # as the real job would
    assert "n=3, 3 requests" in line("task.num_samples=3")  # an n the run sets wins
    # no reference: the task's n=40, of which the corpus has 37 documents of 256 words (the fake counts words)
    assert "n=37, 37 requests" in line("reference.mode=skip")
    assert "(the task's; no reference entry matches before the model loads)" in line("task.min_tokens=300")


@pytest.mark.parametrize("metrics, expected", [
    ({"num_evaluated": 10, "eval_time_s": 20.0}, 2.0),  # no cache counts: every sample computed
    ({"num_evaluated": 10, "eval_time_s": 20.0, "cache_hits": 0, "cache_misses": 40}, 2.0),
    ({"num_evaluated": 10, "eval_time_s": 20.0, "cache_hits": 30, "cache_misses": 10}, 8.0),  # 2.5 samples computed
    ({"num_evaluated": 10, "eval_time_s": 0.5, "cache_hits": 40, "cache_misses": 0}, None),  # measured nothing
    ({"num_evaluated": 0, "eval_time_s": 1.0}, None),
    ({"num_evaluated": 10}, None),
])
def test_the_rate_of_an_earlier_run_counts_only_the_samples_it_computed(metrics, expected):
    assert seconds_per_computed_sample(metrics) == expected
