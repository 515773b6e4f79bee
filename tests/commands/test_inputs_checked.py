"""Issue 39, items 4 and 5: inputs checked before they change a verdict, and messages instead of tracebacks.

Readers of per-sample files refuse duplicated ids and wrongly typed fields; a run compared with itself is said;
tolerances outside a 0/100 metric's range or reading as fractions, planned looks too small to decide on, report
paths that cannot be written and mandatory settings left unset are refused before any request; a generation
cache that fills up keeps what it stored and says so; an extension that draws more than asked says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from runner.contract.errors import ConfigError, UserError
from tests.conftest import ROOT, compose

GSM8K = ["backend=fake", "task=gsm8k", "task.dataset.source=local",
         f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "tracking=none"]


def _run_dir(path: Path, rows: list[dict], config: dict | None = None, report: dict | None = None) -> Path:
    path.mkdir(parents=True)
    (path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "config.yaml").write_text(yaml.safe_dump(config or {"task": {"name": "gsm8k", "metric": "accuracy"},
                                                                 "seed": 0}))
    (path / "report.json").write_text(json.dumps(report or {}))
    return path


def _rows(*scores: float) -> list[dict]:
    return [{"sample_id": f"s{i}", "score": s, "prompt": f"q{i}"} for i, s in enumerate(scores)]


# ------------------------------------------------------------------ runner.compare's readers
def test_a_duplicated_sample_id_is_refused_not_last_row_wins(tmp_path):
    from runner.reports.runs import read_run

    rows = _rows(0, 100, 0) + [{"sample_id": "s0", "score": 100.0, "prompt": "q0"}]
    with pytest.raises(UserError, match="a sample appears twice") as caught:
        read_run(str(_run_dir(tmp_path / "a", rows)))
    assert "sample_id s0" in caught.value.render()


@pytest.mark.parametrize("config,report,rows,fragment", [
    ({"task": 5}, {}, None, "holds a task that is not a mapping"),
    (None, {"decision": "GO"}, None, "holds a decision that is not a mapping"),
    (None, {"decision": {"tolerance": "2"}}, None, "tolerance that is not a number"),
    (None, {"spec": 5}, None, "holds a spec that is not a mapping"),
    (None, {}, [{"sample_id": "s0", "score": 0.0, "meta": 5}], "meta of sample s0"),
    (None, {}, [{"sample_id": {"x": 1}, "score": 0.0}], "sample_id is neither a string"),
])
def test_wrongly_typed_run_files_get_a_message(tmp_path, config, report, rows, fragment):
    from runner.reports.runs import read_run

    with pytest.raises(UserError) as caught:
        read_run(str(_run_dir(tmp_path / "a", rows or _rows(0, 100), config, report)))
    assert fragment in caught.value.render()


@pytest.mark.parametrize("field,value,fragment", [("metrics", 5, "metrics is not a list"),
                                                  ("metrics", "acc", "metrics is not a list"),
                                                  ("arguments", "x", "arguments are neither")])
def test_wrongly_typed_lm_eval_rows_get_a_message(tmp_path, field, value, fragment):
    from runner.reports.runs import read_run

    rows = [{"doc_id": i, "metrics": ["acc"], "acc": 1.0, "arguments": {}} for i in range(2)]
    rows[1][field] = value
    path = tmp_path / "samples_arc_2026-01-01T10-00-00.000000.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UserError, match=fragment):
        read_run(str(path))


def test_a_run_compared_with_itself_or_a_copy_is_noted(tmp_path):
    from runner.reports.comparison import compare, stats_config
    from runner.reports.runs import read_run

    a = _run_dir(tmp_path / "a", _rows(0, 100, 100, 0))
    copy = _run_dir(tmp_path / "copy", _rows(0, 100, 100, 0))
    other = _run_dir(tmp_path / "other", _rows(100, 100, 100, 0))
    stats = stats_config(0.05, 0.0, "points", 5.0, "points", "auto", "regression", "inconclusive")
    itself = compare(read_run(str(a)), read_run(str(a)), stats, 0.05, 0.2, None, False)
    assert any("A and B are the same run" in n for n in itself.notes)
    copied = compare(read_run(str(a)), read_run(str(copy)), stats, 0.05, 0.2, None, False)
    assert any("a copy of itself" in n for n in copied.notes)
    changed = compare(read_run(str(a)), read_run(str(other)), stats, 0.05, 0.2, None, False)
    assert not any("itself" in n for n in changed.notes)


@pytest.mark.parametrize("flags,fragment", [(["--output-dir", "/proc/runner-x"], "--output-dir"),
                                            (["--output-dir", "{tmp}/out", "--markdown", "/proc/x.md"], "--markdown"),
                                            (["--output-dir", "{tmp}/out", "--markdown", "{tmp}"], "is a directory")])
def test_compare_checks_its_outputs_before_reading_the_runs(tmp_path, capsys, flags, fragment):
    from runner.commands.compare import main

    status = main(["nowhere-a", "nowhere-b", "--tolerance", "2", *[f.replace("{tmp}", str(tmp_path)) for f in flags]])
    err = capsys.readouterr().err
    assert status == 1 and fragment in err and "no such run" not in err


def test_compare_refuses_a_tolerance_outside_a_binary_metrics_range(tmp_path, capsys):
    from runner.commands.compare import main

    a, b = _run_dir(tmp_path / "a", _rows(0, 100, 100, 0)), _run_dir(tmp_path / "b", _rows(100, 0, 100, 0))
    status = main([str(a), str(b), "--tolerance", "1000", "--output-dir", str(tmp_path / "out")])
    assert status == 1 and "outside the metric's range" in capsys.readouterr().err


def test_a_reference_samples_file_with_a_duplicated_id_is_refused(tmp_path):
    from runner.contract.errors import ReferenceError_
    from runner.references.samples import load_rows

    (tmp_path / "samples").mkdir()
    (tmp_path / "samples" / "x.jsonl").write_text(
        "".join(json.dumps({"sample_id": "s0", "score": s}) + "\n" for s in (0.0, 100.0)))
    with pytest.raises(ReferenceError_, match="appears twice"):
        load_rows(tmp_path, "samples/x.jsonl")


# ------------------------------------------------------------------ tolerances and looks
@pytest.mark.parametrize("settings,fragment", [
    (dict(tolerance=500.0, tolerance_unit="percent"), "100 or more is the whole score"),
    (dict(tolerance=100.0, tolerance_unit="percent"), "100 or more is the whole score"),
    (dict(tolerance=0.05, tolerance_unit="percent"), "looks like a fraction"),
    (dict(margin=100.0, margin_unit="percent"), "no drop could exceed it"),
])
def test_percent_tolerances_out_of_range_or_reading_as_fractions_are_refused(settings, fragment):
    from runner.stats.settings import StatsConfig, validate

    with pytest.raises(ConfigError, match=fragment):
        validate(StatsConfig(**settings))
    validate(StatsConfig(tolerance=5.0, tolerance_unit="percent"))  # 5 % is fine


@pytest.mark.parametrize("tolerance,margin,fragment", [(1000.0, 0.0, "tolerance is outside"), (100.0, 0.0, "outside"),
                                                       (2.0, 150.0, "margin is outside"),
                                                       (0.05, 0.0, "looks like a fraction")])
def test_binary_range(tolerance, margin, fragment):
    from runner.stats.data.tolerance import check_binary_range

    with pytest.raises(ConfigError, match=fragment):
        check_binary_range(tolerance, margin, "stats.tolerance")
    check_binary_range(2.0, 0.0, "stats.tolerance")


def test_a_job_refuses_a_tolerance_of_1000_points_before_any_request(tmp_path):
    from runner.job.flow import run

    common = [*GSM8K, "task.num_samples=6", f"reference.dir={tmp_path / 'refs'}", f"cache.path={tmp_path / 'g.sqlite'}"]
    run(compose([*common, "reference.mode=record", f"output_dir={tmp_path / 'rec'}"]))
    with pytest.raises(ConfigError, match="outside the metric's range"):
        run(compose([*common, "stats.tolerance=1000", f"output_dir={tmp_path / 'check'}"]))
    assert not (tmp_path / "check" / "samples.jsonl").exists()  # refused before answering


def test_planned_looks_too_small_to_decide_on_are_refused():
    from runner.job.looks import check_first_look
    from runner.stats.numerics.group_sequential import SequentialConfig, look_fractions
    from runner.stats.numerics.looks import look_sizes

    sizes = look_sizes(look_fractions(SequentialConfig(enabled=True, looks=6)), 12)
    with pytest.raises(ConfigError, match="first planned look would decide on too few samples") as caught:
        check_first_look(sizes, "perplexity")
    assert "stats.sequential.looks=1" in caught.value.render()
    check_first_look(look_sizes(look_fractions(SequentialConfig(enabled=True, looks=4)), 37), "perplexity")


def test_an_extension_drawing_more_than_asked_says_so():
    from runner.job.looks import extension_notes

    note, = extension_notes([4], [57, 114])
    assert "asked for 4 more samples; the task's draw added 57" in note and "n=114" in note
    assert extension_notes([57], [57, 114]) == []


# ------------------------------------------------------------------ settings and files checked before the job
@pytest.mark.parametrize("override,fragment", [("report.junit={tmp}", "the report file is a directory"),
                                               ("report.markdown=/proc/runner-x/r.md", "cannot be written there"),
                                               ("task=lm_eval", "task.lm_eval_task")])
def test_report_paths_and_unset_settings_are_refused_at_validation(tmp_path, override, fragment):
    from runner.config.validate import check_job

    with pytest.raises(ConfigError) as caught:
        check_job(compose([*GSM8K, "reference.mode=skip", f"output_dir={tmp_path / 'o'}",
                           override.replace("{tmp}", str(tmp_path))]))
    assert fragment in caught.value.render()


def test_reference_dir_that_is_a_file_is_named(tmp_path):
    from runner.references.store import preflight

    (tmp_path / "refs").write_text("x")
    with pytest.raises(UserError, match="reference.dir is not a directory"):
        preflight(tmp_path / "refs", "gsm8k", "org/model", writing=False)


@pytest.mark.parametrize("text", ["stats: {extensions: [", "task: {}\n", "stats: {extensions: two, extend: []}\n"
                                  "task: {num_samples: 8}\n"])
def test_extend_on_an_unreadable_config_gets_a_message(tmp_path, text):
    from runner.commands.extend import overrides_for

    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "overrides.yaml").write_text("[]\n")
    (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(UserError, match="config.yaml"):
        overrides_for(tmp_path, 4)


def test_a_full_generation_cache_keeps_what_it_stored_and_says_so(tmp_path):
    from runner.cache.generations import CacheWriteError, GenerationCache

    cache = GenerationCache(tmp_path / "g.sqlite")
    cache._db.execute("PRAGMA max_page_count = 12")  # a disk that fills up after a few chunks
    stored = 0
    with pytest.raises(CacheWriteError) as caught:
        for chunk in range(1000):
            cache.put_many([(f"k{chunk}-{j}", "ctx", "generate", "x" * 500) for j in range(4)])
            stored += 4
    kept = cache.count()
    assert stored > 0 and stored <= kept < stored + 4  # every chunk before the full one is still there
    assert f"the {kept} answers stored stay in it" in caught.value.render()
    assert "rerun the same command" in caught.value.render()


# ------------------------------------------------------------------ lm-eval task definitions
def test_lm_eval_unknown_key_and_a_metric_never_computed_get_messages(tmp_path):
    from runner.job.flow import run
    from tests.helpers.lm_eval_tasks import write_tasks

    tasks = write_tasks(tmp_path / "lm")
    arc = (tasks / "arc_local.yaml").read_text()
    (tasks / "unknown_key.yaml").write_text(arc.replace("task: arc_local", "task: unknown_key") + "bogus_key: 1\n")
    (tasks / "no_bleu.yaml").write_text(arc.replace("task: arc_local", "task: no_bleu")
                                        .replace("metric: acc_norm", "metric: bleu"))
    common = ["task=lm_eval", f"task.include_path={tasks}", "backend=fake", "tracking=none", "reference.mode=skip",
              "task.num_samples=2", f"cache.path={tmp_path / 'g.sqlite'}"]
    with pytest.raises(ConfigError, match="lm-eval refuses the task's definition"):
        run(compose([*common, "task.lm_eval_task=unknown_key", f"output_dir={tmp_path / 'a'}"]))
    with pytest.raises(ConfigError, match="does not compute this metric") as caught:
        run(compose([*common, "task.lm_eval_task=no_bleu", "task.metric=bleu", f"output_dir={tmp_path / 'b'}"]))
    assert "allowed: acc" in caught.value.render()
