"""Passkey retrieval: the generator, the depth placement, the scorer and the sigma-0 statistics."""

from __future__ import annotations

import pytest

from evaluators.passkey import FILLER, INSTRUCTION, QUESTION, PasskeyEvaluator, first_number, nominal_length
from runner.errors import ConfigError
from runner.schema import PasskeyTaskConfig
from runner.stats import HypothesisParams, decide
from tests.conftest import compose


def task(**kw) -> PasskeyTaskConfig:
    base = dict(_target_="evaluators.passkey.PasskeyEvaluator", name="passkey_retrieval_1k", alpha=0.5, sigma=0.0,
                num_samples=20, max_input_len=1024, max_output_len=50, length=1024)
    return PasskeyTaskConfig(**(base | kw))


def test_samples_are_seeded_and_hide_their_passkey_once():
    ev = PasskeyEvaluator(task())
    a, b, c = ev.samples(20, 0), ev.samples(20, 0), ev.samples(20, 1)
    assert [(s.id, s.prompt) for s in a] == [(s.id, s.prompt) for s in b]
    assert [s.target for s in a] != [s.target for s in c] and a[0].id != c[0].id
    for s in a:
        assert len(s.target) == 5 and s.target[0] != "0" and s.target.isdigit()
        assert s.prompt.count(s.target) == 2  # "The passkey is K. Keep K in mind"
        assert s.prompt.startswith(INSTRUCTION) and s.prompt.endswith(QUESTION)
    depths = [s.meta["depth"] for s in a]
    assert min(depths) < 0.25 and max(depths) > 0.75  # spread over the text, not fixed


def test_passkey_at_start_and_at_end():
    start = PasskeyEvaluator(task(depth="start")).samples(1, 0)[0]
    end = PasskeyEvaluator(task(depth="end")).samples(1, 0)[0]
    needle = f"The passkey is {start.target}."
    assert start.prompt.startswith(INSTRUCTION + needle)
    assert end.prompt.endswith(f"Keep {end.target} in mind: it is the passkey." + QUESTION)
    middle = PasskeyEvaluator(task(depth="0.5")).samples(1, 0)[0]
    position = middle.prompt.index(f"The passkey is {middle.target}") / len(middle.prompt)
    assert 0.45 < position < 0.55


def test_prompt_length_follows_the_chars_per_token_estimate():
    for length in (256, 1024, 4096):
        ev = PasskeyEvaluator(task(length=length, max_input_len=length))
        prompt = ev.samples(1, 0)[0].prompt
        assert length * 4.0 - len(FILLER) <= len(prompt) <= length * 4.0  # fills the budget, never past it


def test_prompt_fits_the_embedded_models_input_limit():
    """Measured with SmolLM2's tokenizer: the 1k prompt stays within 1024 tokens and above 80% of it."""
    from transformers import AutoTokenizer

    from runner.assets import smollm2_checkpoint

    tok = AutoTokenizer.from_pretrained(smollm2_checkpoint())
    for s in PasskeyEvaluator(task()).samples(3, 0):
        n = len(tok(s.prompt)["input_ids"])
        assert 0.8 * 1024 < n <= 1024


@pytest.mark.parametrize("output,correct", [
    (" 48213.", True), (" 48213", True), ("48213 is the passkey", True), (" **48213**", True),
    (" 4821", False), (" 482130", False), (" 12345. Keep 48213 in mind", False), (" I do not know.", False), ("", False),
])
def test_exact_match_on_the_first_number(output, correct):
    ev = PasskeyEvaluator(task())
    sample = ev.samples(1, 0)[0]
    sample = type(sample)(sample.id, sample.prompt, "48213", sample.meta)
    scored = ev.score(sample, [output])
    assert scored.score == (100.0 if correct else 0.0)
    assert scored.meta["extracted"] == first_number(output)


def test_aggregate_is_the_mean():
    ev = PasskeyEvaluator(task())
    samples = ev.samples(4, 0)
    scored = [ev.score(s, [f" {s.target}" if i < 3 else " 0"]) for i, s in enumerate(samples)]
    assert ev.aggregate(scored) == {"accuracy": 75.0}


def test_requests_are_greedy_with_upstreams_output_length():
    ev = PasskeyEvaluator(task())
    (req,) = ev.requests(ev.samples(1, 0)[0])
    assert req.greedy and req.max_tokens == 50 and req.stop == ()


def test_levels_compose_with_upstreams_parameters():
    for name, length in (("passkey_retrieval_1k", 1024), ("passkey_retrieval_4k", 4096),
                         ("passkey_retrieval_64k", 65536), ("passkey_retrieval_128k", 131072)):
        t = compose([f"task={name}"]).task
        assert (t.name, t.length, t.max_input_len) == (name, length, length)
        assert (t.alpha, t.beta, t.sigma, t.num_samples, t.max_output_len) == (0.5, 0.2, 0.0, 20, 50)
        assert PasskeyEvaluator(t).extra_acc_spec() is None
    generic = compose(["task=passkey_retrieval", "task.length=2048"]).task
    assert PasskeyEvaluator(generic).extra_acc_spec() == "length=2048"


def test_extra_acc_spec_names_deviations_from_the_level():
    assert nominal_length("passkey_retrieval_64k") == 65536 and nominal_length("passkey_retrieval") is None
    spec = PasskeyEvaluator(task(length=512, depth="end", passkey_digits=7, max_output_len=16)).extra_acc_spec()
    assert spec == "length=512,passkey_digits=7,depth=end,max_output_len=16"


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="task.length"):
        PasskeyEvaluator(task(length=2048))  # longer than max_input_len 1024
    with pytest.raises(ConfigError, match="task.depth"):
        PasskeyEvaluator(task(depth="middle"))
    with pytest.raises(ConfigError, match="task.depth"):
        PasskeyEvaluator(task(depth="1.5"))
    with pytest.raises(ConfigError, match="task.passkey_digits"):
        PasskeyEvaluator(task(passkey_digits=0))


def test_sigma_zero_puts_the_threshold_at_the_reference():
    params = HypothesisParams(alpha=0.5, beta=0.2, sigma=0.0, num_samples=20)
    assert params.theta == 0.0 and params.threshold(99.0) == 99.0
    passed, failed = decide(100.0, 99.0, params), decide(95.0, 99.0, params)
    assert passed.passed and passed.margin == pytest.approx(1.0) and passed.p_value == 1.0
    assert not failed.passed and failed.margin == pytest.approx(-4.0) and failed.p_value == 0.0
    assert decide(99.0, 99.0, params).passed  # equal to the reference passes
    assert "threshold" in failed.render()


@pytest.mark.e2e
def test_end_to_end_record_then_check_logs_to_mlflow(tmp_path, mlflow_server, monkeypatch):
    """The embedded model on 2 short prompts: record, check (threshold = reference), read MLflow back."""
    import json

    from mlflow.tracking import MlflowClient

    from runner.job import run

    monkeypatch.chdir(tmp_path)
    refs = tmp_path / "refs"
    common = ["task=passkey_retrieval", "task.length=256", "task.max_input_len=256", "task.num_samples=2",
              "task.max_output_len=8", "cache=off", f"reference.dir={refs}",
              f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=e2e-passkey"]
    recorded = run(compose([*common, "reference.mode=record", f"output_dir={tmp_path / 'rec'}"]))
    assert recorded.exit_status == 0 and recorded.spec.extra_acc_spec == "length=256,max_output_len=8"
    checked = run(compose([*common, f"output_dir={tmp_path / 'chk'}"]))
    assert checked.exit_status == 0 and checked.score == recorded.score
    verdict = checked.decision.verdict
    assert verdict.threshold == pytest.approx(verdict.reference) and verdict.theta == 0.0

    metrics = MlflowClient(tracking_uri=mlflow_server).get_run(checked.run_id).data.metrics
    assert metrics["accuracy"] == checked.score and metrics["num_evaluated"] == 2 and metrics["passed"] == 1.0
    rows = [json.loads(line) for line in open(tmp_path / "chk" / "samples.jsonl")]
    assert len(rows) == 2 and all(r["score"] in (0.0, 100.0) and r["target"].isdigit() for r in rows)
