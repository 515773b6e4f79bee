"""Speculative decoding's acceptance-length gate, end to end on the TensorRT-LLM test double.

The double (tests/helpers/trtllm_double.py) queues scripted iteration records for ``LLM.get_stats`` when
the LLM was created with ``enable_iter_perf_stats``; the job reads them back through backend=trtllm_pytorch
and judges the mean acceptance length against a registered ``acceptance_length.yaml`` entry. The golden
lengths are worked out by hand from upstream's formula: (accepted draft tokens + drafting requests) /
drafting requests. Not run on a GPU here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.backends.trtllm import api as trtllm_api
from runner.backends.trtllm.speculative import AcceptanceCounts
from runner.contract.errors import ConfigError, ReferenceError_
from runner.stats.acceptance import AcceptanceGate
from runner.stats.data.verdicts import GO, NO_GO
from tests.backends.test_trtllm_backend import FakeTokenizer
from tests.conftest import compose
from tests.helpers import trtllm_double

# 3 speculative iterations: 2 + 4 + 3 = 9 accepted draft tokens over 2 + 2 + 2 = 6 drafting requests
ACCEPTED, REQUESTS = [2, 4, 3], [2, 2, 2]
LENGTH = (9 + 6) / 6  # 2.5
SPEC = "backend.speculative_config={decoding_type: Eagle, max_draft_len: 3}"


@pytest.fixture
def job_dirs(tmp_path, monkeypatch):
    monkeypatch.setattr(trtllm_api, "_load_tokenizer", lambda path, trc, rev: FakeTokenizer())
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    refs = tmp_path / "refs"
    refs.mkdir()
    # the double answers "A": accuracy 0, registered as such so that only the acceptance gate can fail
    (refs / "gsm8k.yaml").write_text("model:\n  - spec_dec_algo: Eagle\n    extra_acc_spec: fewshot_split=test\n"
                                     "    accuracy: 0.0\n    threshold_override: 0.0\n")
    (refs / "acceptance_length.yaml").write_text(
        "Scripted::at_reference:\n  ref_al: 2.5\n  min_al: 2.375\n"      # 0.95 x 2.5: 2.5 holds
        "Scripted::above_run:\n  ref_al: 2.7\n  min_al: 2.565\n"         # 0.95 x 2.7 = 2.565 > 2.5: fails
        "Scripted::ref_only:\n  ref_al: 2.6\n"                          # floor 0.95 x 2.6 = 2.47: holds
        "Scripted::unpopulated:\n  ref_al: null\n  min_al: null\n")
    calls = trtllm_double.install(trtllm_double.load(trtllm_double.manifest_paths()[0])
                                  | {"tensorrt_llm_version": "1.2.0",
                                     "iteration_stats": trtllm_double.speculative_stats(ACCEPTED, REQUESTS)})
    yield model, refs, calls
    trtllm_double.uninstall()


def run_job(model: Path, refs: Path, out: Path, *overrides: str):
    from runner.job.flow import run

    return run(compose(["backend=trtllm_pytorch", f"model.path={model}", "task=gsm8k", "task.num_samples=2",
                        "tracking=none", "cache.enabled=false", f"reference.dir={refs}", f"output_dir={out}",
                        *overrides]))


def test_the_acceptance_length_is_read_back_and_gates_the_job(job_dirs, tmp_path):
    model, refs, calls = job_dirs
    held = run_job(model, refs, tmp_path / "held", SPEC, "backend.acceptance_key=Scripted::at_reference")
    llm_args = [kw for name, kw in calls if name == "TorchLlmArgs"][0]
    assert llm_args["enable_iter_perf_stats"] is True and llm_args["speculative_config"].decoding_type == "Eagle"
    assert held.spec.spec_dec_algo == "Eagle"
    (gate,) = held.decision.gates
    assert gate.value == pytest.approx(LENGTH) and gate.threshold == pytest.approx(2.375) and gate.passed
    assert held.decision.outcome == GO and held.exit_status == 0
    report = json.loads((tmp_path / "held" / "report.json").read_text())
    assert "Acceptance-length gate (Scripted::at_reference)" in (tmp_path / "held" / "report.txt").read_text()
    assert report["decision"]["verdict"] == GO

    calls.clear()
    failed = run_job(model, refs, tmp_path / "failed", SPEC, "backend.acceptance_key=Scripted::above_run")
    (gate,) = failed.decision.gates
    assert gate.value == pytest.approx(LENGTH) and gate.threshold == pytest.approx(0.95 * 2.7) and not gate.passed
    assert failed.decision.passed  # accuracy holds: the acceptance gate alone makes it NO-GO
    assert failed.decision.outcome == NO_GO and failed.exit_status != 0
    assert "failed gate: acceptance_length" in failed.decision.verdict_line()
    tests = [t for t in failed.decision.tests() if t["name"] == "acceptance_length"]
    assert tests == [{"name": "acceptance_length", "rule": "explicit_threshold", "gate": "regression",
                      "p_value": None, "alpha": tests[0]["alpha"], "passed": False}]  # kept as is in a sweep
    assert failed.decision.metrics()["acceptance_length_passed"] == 0.0

    from runner.sweep.summary import judge

    rows = [{"_tests": json.loads((tmp_path / d / "report.json").read_text())["decision"]["tests"], "verdict": v}
            for d, v in (("held", "go"), ("failed", "no-go"))]
    judge(rows, "holm", None)  # in a sweep the gate keeps its own verdict (no multiplicity correction)
    assert [r["sweep_verdict"] for r in rows] == ["go", "no-go"]


@pytest.mark.parametrize("key,fragment,error", [
    ("Scripted::missing", "no acceptance-length entry 'Scripted::missing'", ReferenceError_),
    ("Scripted::unpopulated", "has no values yet", ReferenceError_),
])
def test_a_key_without_a_registered_length_stops_before_the_model_loads(job_dirs, tmp_path, key, fragment, error):
    model, refs, calls = job_dirs
    with pytest.raises(error, match=fragment):
        run_job(model, refs, tmp_path / "o", SPEC, f"backend.acceptance_key={key}")
    assert not [name for name, _ in calls if name == "TorchLlmArgs"]


def test_an_acceptance_key_without_speculative_decoding_is_refused(job_dirs, tmp_path):
    model, refs, calls = job_dirs
    with pytest.raises(ConfigError, match="needs speculative decoding"):
        run_job(model, refs, tmp_path / "o", "backend.acceptance_key=Scripted::at_reference")


def test_counts_follow_upstreams_formula_and_skip_iterations_without_drafts():
    counts = AcceptanceCounts()
    assert counts.length is None
    counts.add(trtllm_double.speculative_stats([2, 4], [2, 2]))
    counts.add([json.dumps({"specDecodingStats": {"numDraftTokens": 3, "numAcceptedTokens": 3,
                                                  "numRequestsWithDraftTokens": 2}})])  # JSON text, as some releases
    assert counts.length == pytest.approx((2 + 4 + 3 + 6) / 6)


def test_the_floor_is_min_al_else_95_percent_of_ref_al():
    assert AcceptanceGate("k", 2.5, 2.6, None).threshold == pytest.approx(2.47)
    assert AcceptanceGate("k", 2.5, 2.6, None).passed
    assert AcceptanceGate("k", 2.46, 2.6, None).passed is False
    kimi = AcceptanceGate("TestKimiK3::test_w4a16_mxfp4", 1.2, 1.318, 1.15)  # an entry's own floor wins
    assert kimi.threshold == 1.15 and kimi.passed
    unread = AcceptanceGate("k", None, 2.6, None)
    assert not unread.checked and unread.passed and "not checked" in unread.render()
