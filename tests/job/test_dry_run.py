"""A dry run lists what a sweep would run (its n, what the generation cache holds, an estimate from
earlier runs) without loading a model, evaluating or logging; a real sweep says "job k of N"."""

from __future__ import annotations

import mlflow

from tests.conftest import ROOT, run_cli, run_in_process

GSM8K = ["backend=fake", "task=gsm8k", "task.dataset.source=local",
         f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "task.num_samples=4",
         "reference.mode=skip"]


def test_a_dry_run_lists_jobs_cache_and_estimates_without_running(tmp_path, sqlite_store):
    uri = sqlite_store(tmp_path / 'mlflow.db')
    cache = [f"cache.path={tmp_path / 'generations.sqlite'}", f"tracking.tracking_uri={uri}"]
    done = run_in_process([*GSM8K, *cache, "seed=0", f"output_dir={tmp_path / 'done'}"], tmp_path)  # an earlier job
    assert done.returncode == 0, done.stderr

    dry = run_cli(["-m", *GSM8K, *cache, "seed=0,1", "dry_run=true", f"hydra.sweep.dir={tmp_path / 'sweep'}"], tmp_path)
    assert dry.returncode == 0, dry.stderr
    lines = [line for line in dry.stdout.splitlines() if line.startswith("job ")]
    assert len(lines) == 2 and lines[0].startswith("job 1 of 2") and lines[1].startswith("job 2 of 2")
    assert "n=4, 4 requests; cache: 4 of 4 stored" in lines[0]  # seed 0 ran before: every answer is cached
    assert "cache: 0 of 4 stored" in lines[1]  # seed 1 draws other questions
    assert "s/sample, median of 1 earlier runs" in lines[1]
    client = mlflow.MlflowClient(tracking_uri=uri)
    assert len(client.search_runs([client.get_experiment_by_name("runner").experiment_id])) == 1  # nothing logged
    assert not (tmp_path / "sweep" / "summary.json").exists()
    assert not list((tmp_path / "sweep").glob("*/report.json"))


def test_a_sweep_says_which_job_it_is_at(tmp_path):
    """Two jobs: each says its own number and the sweep's count (a first, a last; a third job adds nothing)."""
    proc = run_cli(["-m", *GSM8K, "tracking=none", "seed=0,1", f"hydra.sweep.dir={tmp_path / 'sweep'}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [line.split(",")[0] for line in proc.stdout.splitlines() if line.startswith("job ") and " of " in line] == \
        ["job 1 of 2", "job 2 of 2"]
