"""``python -m runner.plan OVERRIDES`` answers "how many samples for this job", offline: on the user's own checkpoint
against its baseline before and after the baseline is recorded, and with the paired design's flags at the job's own
n, alpha and beta. Golden figures are worked by hand from the normal quantiles and the shipped entries."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from runner.commands.plan import main
from runner.commands.plan_job import planned_job

Z99, Z95, Z80 = 2.3263478740408408, 1.6448536269514722, 0.8416212335729143


@pytest.fixture
def checkpoint(tmp_path):
    """A user's own checkpoint directory (the planner reads its config.json for the identity, loads nothing)."""
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 576}))
    return folder


def test_own_checkpoint_against_its_baseline_prints_the_sample_size(checkpoint, tmp_path, capsys):
    refs = tmp_path / "refs"
    refs.mkdir()
    job = [f"model.path={checkpoint}", "task=perplexity", "quant=w4a16", "reference.against=baseline",
           f"reference.dir={refs}"]
    # no baseline recorded yet: the task's n and test all the same, and what to record (exit 1: no entry)
    assert main(job) == 1
    out, err = capsys.readouterr()
    # theta = (z(0.99) + z(0.8)) * 4.48 * sqrt(2 / 40) = 3.16797 * 1.00176 = 3.174
    assert "num_samples  40\n" in out and "theta        3.174" in out and "model        my-llama" in out
    assert "none registered yet" in out and "reference.mode=record" in err and "Traceback" not in err
    # the baseline recorded on 20 documents (an entry fixes n): the plan is that entry's
    spec = planned_job(job, missing_ok=True).spec
    assert spec.quant_algo is None  # against=baseline: the unquantized entry's key
    (refs / "perplexity.yaml").write_text(yaml.safe_dump({"my-llama": [
        {"extra_acc_spec": spec.extra_acc_spec, "perplexity": 15.0, "num_samples": 20}]}))
    assert main([*job, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    s = 4.48 * math.sqrt(2 / 20)
    assert (got["reference"], got["num_samples"], got["alpha"]) == (15.0, 20, 0.01)
    assert got["theta"] == pytest.approx((Z99 + Z80) * s, abs=1e-9)
    assert got["threshold"] == pytest.approx(15.0 + Z99 * s, abs=1e-9)  # lower is better: above the reference


def test_the_paired_design_with_overrides_plans_at_the_jobs_n(capsys):
    # the embedded model's 0-shot MMLU baseline (references/mmlu.yaml): 57 questions with per-sample 0/100 scores
    job = ["task=mmlu_0shot", "quant=w4a16", "reference.against=baseline"]
    assert main([*job, "--design", "paired", "--agreement", "0.9", "--target-theta", "5", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["num_samples"] == 57 and got["paired"]["paired_by_run"].startswith("yes")
    # the same figures as the table's row for n = 57 at the job's alpha and beta
    assert main(["--num-samples-total", "57", "--design", "paired", "--agreement", "0.9", "--target-theta", "5",
                 "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert got["paired"]["paired_theta"] == table["rows"][-1]["paired_theta"]
    assert got["paired"]["paired_min_num_samples"] == table["paired_min_num_samples"]
    # unpaired n for 5 points: ceil(2 * 50^2 * (z(0.95) + z(0.8))^2 / 5^2) = ceil(1236.5) = 1237
    assert got["min_num_samples"] == math.ceil(2 * 2500 * (Z95 + Z80) ** 2 / 25) == 1237
    # upstream's Llama-3.1-8B entry keeps no per-sample scores: the run would not pair, and the plan says so;
    # docs/planning.md's savings at 4096 and a 3-point drop: 3435 unpaired, 613 paired at agreement 0.95
    assert main(["task=mmlu", "model=llama31_8b", "quant=fp8", "--design", "paired", "--agreement", "0.95",
                 "--target-theta", "3", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["min_num_samples"], got["paired"]["paired_min_num_samples"]) == (3435, 613)
    assert got["paired"]["paired_by_run"].startswith("no: the entry keeps no per-sample scores")
    assert main([*job, "--savings", "--agreement", "0.9", "--target-theta", "5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["savings"]["paired"][0]["num_samples"] == table["paired_min_num_samples"]


def test_paired_flags_on_a_metric_not_scored_0_or_100_are_a_message(capsys):
    assert main(["task=perplexity", "quant=w4a16", "reference.against=baseline", "--design", "paired",
                 "--agreement", "0.95"]) == 1
    out, err = capsys.readouterr()
    assert "McNemar's test on a 0/100 metric" in err and "leave out --design" in err and "Traceback" not in err
    with pytest.raises(SystemExit):  # the table's numbers come from the job's config with overrides
        main(["task=perplexity", "--sigma", "3"])
    assert "task.sigma=" in capsys.readouterr().err
