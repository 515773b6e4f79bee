"""ARC-Easy (the task added to show what adding a task takes), through the real pipeline on the scripted
backend: lm-eval's prompt and continuations, acc and acc_norm decided by hand from scripted log-likelihoods."""

from __future__ import annotations

import json

from runner.job.flow import run
from tests.conftest import ROOT, compose

DATA = ROOT / "tests" / "data" / "arc_easy"
# (question, {continuation: logprob}); bytes per continuation in comments (the leading space counts)
SCRIPT = [
    # raw picks " oxygen" (A, wrong); per byte -3.0 / 7 = -0.43 < -3.5 / 15 = -0.23 picks " carbon dioxide" (B, right)
    ("Which gas do plants take in from the air?", {" oxygen": -3.0, " carbon dioxide": -3.5, " nitrogen": -9.0,
                                                   " helium": -9.0}),
    # both pick " 100 degrees Celsius" (1, right)
    ("What is the boiling point of water at sea level?", {" 100 degrees Celsius": -1.0, " 0 degrees Celsius": -5.0,
                                                          " 50 degrees Celsius": -5.0}),
    # both pick " a wooden spoon" (A, wrong)
    ("Which object is a magnet most likely to attract?", {" a wooden spoon": -1.0, " an iron nail": -8.0,
                                                         " a glass cup": -8.0, " a paper clip made of plastic": -8.0,
                                                         " a rubber band": -8.0}),
    # both pick " ice" (B, right)
    ("What do we call frozen water?", {" steam": -6.0, " ice": -0.5, " rain": -6.0, " fog": -6.0}),
]


def test_arc_easy_scores_by_loglikelihood_as_lm_eval(tmp_path):
    script = tmp_path / "script.jsonl"
    with open(script, "w") as f:
        for question, options in SCRIPT:
            for cont, lp in options.items():
                f.write(json.dumps({"context": f"Question: {question}\nAnswer:", "continuation": cont, "logprob": lp}) + "\n")
    cfg = compose(["task=arc_easy", f"task.dataset.local_path={DATA}", "task.num_samples=4", "backend=fake",
                   f"backend.script={script}", "tracking=none", "reference.mode=skip", f"output_dir={tmp_path / 'out'}"])
    out = run(cfg)
    rows = {r["sample_id"]: r for r in map(json.loads, open(tmp_path / "out" / "samples.jsonl"))}
    assert [rows[f"test/Q{i}"]["score"] for i in range(1, 5)] == [0.0, 100.0, 0.0, 100.0]
    assert [rows[f"test/Q{i}"]["meta"]["accuracy_norm"] for i in range(1, 5)] == [100.0, 100.0, 0.0, 100.0]
    assert rows["test/Q1"]["prompt"] == "Question: Which gas do plants take in from the air?\nAnswer:"
    assert out.metrics == {"accuracy": 50.0, "accuracy_norm": 75.0}


def test_the_backend_must_score_loglikelihood(tmp_path):
    import pytest

    from runner.contract.errors import ConfigError

    cfg = compose(["task=arc_easy", f"task.dataset.local_path={DATA}", "backend=fake", "backend.loglikelihood=false",
                   "tracking=none", "reference.mode=skip", f"output_dir={tmp_path / 'out'}"])
    with pytest.raises(ConfigError, match="log-likelihood"):
        run(cfg)
