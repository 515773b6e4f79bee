"""An extended run's looks are linked in MLflow: each is named and tagged ``look k of K`` after its task, and a
later look nests under look 1's run (``runner.extend`` passes look 1's run id to the rerun)."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow

from runner.commands.extend import first_look_run, overrides_for
from runner.tracking.trackers import FIRST_LOOK_ENV
from tests.conftest import SESSION_GENERATION_CACHE, compose


def inprocess(args: list[str], out: Path) -> None:
    """``python -m runner ARGS`` on the fake backend in this process, its overrides saved as Hydra saves them."""
    from runner.job.flow import run

    asked = [*args, "backend=fake", f"cache.path={SESSION_GENERATION_CACHE}"]
    run(compose([*asked, f"output_dir={out}"]))
    (out / ".hydra").mkdir(exist_ok=True)
    (out / ".hydra" / "overrides.yaml").write_text("".join(f"- {json.dumps(a)}\n" for a in asked))


def test_later_looks_nest_under_look_one_with_names_that_show_the_task(tmp_path, monkeypatch, sqlite_store):
    uri = sqlite_store(tmp_path / "mlflow.db")
    refs = tmp_path / "refs"
    inprocess(["task=arc_easy", "reference.mode=record", f"reference.dir={refs}", "task.num_samples=114",
               "tracking=none"], tmp_path / "record")
    look1 = tmp_path / "look1"
    inprocess(["quant=w4a16", "task=arc_easy", f"reference.dir={refs}", "reference.against=baseline",
               "stats.extensions=3", "task.num_samples=57", "tracking=mlflow", f"tracking.tracking_uri={uri}"], look1)
    first = json.loads((look1 / "report.json").read_text())["mlflow_run_id"]
    assert first and first_look_run(Path(f"{look1}-extend1")) == first == first_look_run(look1)

    monkeypatch.setenv(FIRST_LOOK_ENV, first)  # what runner.extend sets for the rerun
    inprocess([o for o in overrides_for(look1, None) if not o.startswith(("backend=", "cache.path="))],
              Path(f"{look1}-extend1"))
    client = mlflow.MlflowClient(tracking_uri=uri)
    runs = {r.data.tags["look"]: r for r in client.search_runs([client.get_experiment_by_name("runner").experiment_id])}
    assert set(runs) == {"1 of 4", "2 of 4"}
    assert runs["1 of 4"].info.run_name == "smollm2_135m/w4a16-arc_easy look 1 of 4"
    assert runs["2 of 4"].info.run_name == "smollm2_135m/w4a16-arc_easy look 2 of 4"
    assert runs["2 of 4"].data.tags["mlflow.parentRunId"] == first == runs["1 of 4"].info.run_id
    assert runs["2 of 4"].data.tags["first_look_run"] == first
