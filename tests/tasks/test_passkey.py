"""Passkey retrieval: upstream's generator and prompt, the depth schedule, the scorer and the sigma-0 statistics.

Golden values come from TensorRT-LLM's examples/infinitebench/construct_synthetic_dataset.py
(build_passkey), eval_utils.create_prompt and compute_scores.get_score_one_passkey, re-done here by
hand: literal prompts for seed 0 on a 2-line filler, and a few-line re-implementation of the
generator's loops and ``random`` calls for the real levels.
"""

from __future__ import annotations

import random

import pytest

from evaluators.tasks.passkey import PasskeyEvaluator, first_number, nominal_length
from runner.contract.errors import ConfigError
from evaluators.tasks.passkey import PasskeyTaskConfig
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.numerics.ztest import decide, render, theta_of, threshold_of
from tests.conftest import compose

LINE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"
HEAD = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
        "I will quiz you about the important information.\n\n")
TAIL = "\n\nWhat is the pass key?\n\nThe pass key is"
# random.seed(0), then five random.randint(0, 9) per key: the first 20 keys upstream draws.
SEED0_KEYS = ["66048", "76475", "93824", "21948", "92411", "57815", "65938", "77840", "80160", "97535",
              "13933", "28711", "58714", "84185", "83989", "47196", "59342", "32094", "71122", "01868"]


def task(**kw) -> PasskeyTaskConfig:
    base = dict(_target_="evaluators.tasks.passkey.PasskeyEvaluator", name="passkey_retrieval_1k", alpha=0.5, sigma=0.0,
                num_samples=20, max_input_len=1024, max_output_len=6, length=1024)
    return PasskeyTaskConfig(**(base | kw))


def upstream_rows(num_noise: int, step: int, seed: int = 0) -> list[dict]:
    """build_passkey's rows, its loops and module-level random calls as it makes them."""
    noise = LINE
    answer = "The pass key is {key}. Remember it. {key} is the pass key.\n"
    state = random.getstate()
    random.seed(seed)
    rows = []
    try:
        for j in range(0, num_noise + 1, step):
            input_text = noise * j + answer + noise * (num_noise - j)
            for _ in range(5):
                key = "".join([str(random.randint(0, 9)) for _ in range(5)])
                rows.append({"input": "What is the pass key?", "context": input_text.replace("{key}", key),
                             "answer": key, "j": j})
    finally:
        random.setstate(state)
    return rows


def upstream_prompt(row: dict) -> str:
    """create_prompt's passkey template, filled."""
    return HEAD + row["context"] + "\n\n" + row["input"] + "\n\nThe pass key is"


def upstream_score(pred: str, label: str) -> bool:
    """get_score_one_passkey: the first non-empty piece of re.split("[^0-9]", pred) equals the label."""
    import re
    first = next((p for p in re.split("[^0-9]", pred) if p != ""), "")
    return label == first


def test_golden_prompts_on_a_two_line_filler():
    ev = PasskeyEvaluator(task(num_noise=2, noise_step=1))
    samples = ev.samples(15, 0)
    assert [s.target for s in samples] == SEED0_KEYS[:15]
    assert samples[0].prompt == (
        "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. I will quiz you "
        "about the important information.\n\n"
        "The pass key is 66048. Remember it. 66048 is the pass key.\n"
        "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"
        "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"
        "\n\nWhat is the pass key?\n\nThe pass key is")
    assert samples[5].prompt == (
        HEAD + LINE + "The pass key is 57815. Remember it. 57815 is the pass key.\n" + LINE + TAIL)
    assert samples[14].prompt == (
        HEAD + LINE + LINE + "The pass key is 83989. Remember it. 83989 is the pass key.\n" + TAIL)
    assert [s.meta["noise_before"] for s in samples] == [0] * 5 + [1] * 5 + [2] * 5
    with pytest.raises(ConfigError, match="task.num_samples"):
        ev.samples(16, 0)  # 3 depths x 5 keys


@pytest.mark.parametrize("name,num_noise,step", [
    ("passkey_retrieval_64k", 2610, 45), ("passkey_retrieval_128k", 5220, 90),
    ("passkey_retrieval_1k", 38, 1), ("passkey_retrieval_4k", 160, 3)])
def test_levels_reproduce_upstreams_generator(name, num_noise, step):
    t = compose([f"task={name}"]).task
    ev = PasskeyEvaluator(t)
    rows = upstream_rows(num_noise, step)[:20]
    samples = ev.samples(t.num_samples, 0)
    assert [s.target for s in samples] == [r["answer"] for r in rows] == SEED0_KEYS
    assert [s.prompt for s in samples] == [upstream_prompt(r) for r in rows]
    # Needles after 0, 1, 2, 3 steps of filler, five keys each.
    assert [s.meta["noise_before"] for s in samples] == [r["j"] for r in rows] == [k * step for k in range(4) for _ in range(5)]
    assert len({s.id for s in samples}) == 20
    assert ev.num_rows == len(upstream_rows(num_noise, step))


def test_another_seed_draws_other_keys_at_the_same_depths():
    ev = PasskeyEvaluator(task())
    a, b = ev.samples(20, 0), ev.samples(20, 1)
    assert [s.target for s in b] == [r["answer"] for r in upstream_rows(38, 1, seed=1)[:20]]
    assert [s.target for s in a] != [s.target for s in b]
    assert [s.id for s in a] == [s.id for s in b] and [s.meta for s in a] == [s.meta for s in b]


def test_depth_overrides_keep_the_key_stream():
    start = PasskeyEvaluator(task(depth="start")).samples(6, 0)
    end = PasskeyEvaluator(task(depth="end")).samples(6, 0)
    half = PasskeyEvaluator(task(depth="0.5")).samples(6, 0)
    uniform = PasskeyEvaluator(task(depth="uniform")).samples(20, 0)
    for samples in (start, end, half, uniform):
        assert [s.target for s in samples] == SEED0_KEYS[:len(samples)]
    assert start[5].prompt.startswith(HEAD + "The pass key is 57815.")
    assert end[5].prompt.endswith("57815 is the pass key.\n" + TAIL)
    assert half[5].prompt == upstream_prompt({"context": LINE * 19 + "The pass key is 57815. Remember it. 57815 is "
                                              "the pass key.\n" + LINE * 19, "input": "What is the pass key?"})
    depths = [s.meta["depth"] for s in uniform]
    assert min(depths) < 0.25 and max(depths) > 0.75  # spread over the text


def test_prompt_fits_the_embedded_models_input_limit():
    """Measured with SmolLM2's tokenizer (25 tokens per filler line): the 1k and 4k levels fit their limit."""
    from transformers import AutoTokenizer

    from runner.files.assets import smollm2_checkpoint

    tok = AutoTokenizer.from_pretrained(smollm2_checkpoint())
    for name, limit in (("passkey_retrieval_1k", 1024), ("passkey_retrieval_4k", 4096)):
        t = compose([f"task={name}"]).task
        for s in PasskeyEvaluator(t).samples(2, 0):
            n = len(tok(s.prompt)["input_ids"])
            assert 0.95 * limit < n <= limit


@pytest.mark.parametrize("output,target", [
    (" 66048.", "66048"), (" 66048", "66048"), ("66048 is the pass key", "66048"), (" **66048**", "66048"),
    (" 6604", "66048"), (" 660480", "66048"), (" 12345. Remember 66048", "66048"), (" I do not know.", "66048"),
    ("", "66048"), (" 66,048", "66048"), (" 01868.", "01868"), (" 1868", "01868"),
    ("\u0663 66048", "66048"),  # an Arabic-Indic digit is not in [0-9]: upstream skips it
])
def test_scoring_follows_first_int_match(output, target):
    ev = PasskeyEvaluator(task())
    sample = ev.samples(1, 0)[0]
    sample = type(sample)(sample.id, sample.prompt, target, sample.meta)
    scored = ev.score(sample, [output])
    assert scored.score == (100.0 if upstream_score(output, target) else 0.0)
    assert scored.meta["extracted"] == first_number(output)


def test_scoring_probe_values():
    assert [upstream_score(o, "66048") for o in (" 66048.", " 6604", "\u0663 66048", " 66,048")] == [True, False, True, False]
    assert first_number("\u0663 66048") == "66048" and first_number("none") == ""


def test_aggregate_is_the_mean():
    ev = PasskeyEvaluator(task())
    samples = ev.samples(4, 0)
    scored = [ev.score(s, [f" {s.target}" if i < 3 else " 0"]) for i, s in enumerate(samples)]
    assert ev.aggregate(scored) == {"accuracy": 75.0}


def test_requests_are_greedy_with_upstreams_six_new_tokens():
    ev = PasskeyEvaluator(task())
    (req,) = ev.requests(ev.samples(1, 0)[0])
    assert req.greedy and req.max_tokens == 6 and req.stop == () and req.truncation == "left"


def test_levels_compose_with_upstreams_parameters():
    for name, length in (("passkey_retrieval_1k", 1024), ("passkey_retrieval_4k", 4096),
                         ("passkey_retrieval_64k", 65536), ("passkey_retrieval_128k", 131072)):
        t = compose([f"task={name}"]).task
        assert (t.name, t.length, t.max_input_len, t.depth) == (name, length, length, "upstream")
        assert (t.alpha, t.beta, t.sigma, t.num_samples, t.max_output_len) == (0.5, 0.2, 0.0, 20, 6)
        assert PasskeyEvaluator(t).extra_acc_spec() is None
    generic = compose(["task=passkey_retrieval", "task.length=2048", "task.max_input_len=2048"]).task
    ev = PasskeyEvaluator(generic)
    assert ev.extra_acc_spec() == "length=2048" and (ev.num_noise, ev.noise_step) == ((2048 - 128) // 25, 1)


def test_extra_acc_spec_names_deviations_from_the_level():
    assert nominal_length("passkey_retrieval_64k") == 65536 and nominal_length("passkey_retrieval") is None
    spec = PasskeyEvaluator(task(length=512, max_input_len=1024, depth="end", passkey_digits=7,
                                 max_output_len=16)).extra_acc_spec()
    assert spec == "length=512,passkey_digits=7,depth=end,max_output_len=16"
    assert PasskeyEvaluator(task(num_noise=20, noise_step=2)).extra_acc_spec() == "num_noise=20,noise_step=2"
    assert PasskeyEvaluator(task(num_noise=38, noise_step=1)).extra_acc_spec() is None  # the level's own values
    assert PasskeyEvaluator(task(apply_chat_template=True)).extra_acc_spec() == "chat_template=true"


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="task.length"):
        PasskeyEvaluator(task(length=2048))  # longer than max_input_len 1024
    with pytest.raises(ConfigError, match="task.depth"):
        PasskeyEvaluator(task(depth="middle"))
    with pytest.raises(ConfigError, match="task.depth"):
        PasskeyEvaluator(task(depth="1.5"))
    with pytest.raises(ConfigError, match="task.passkey_digits"):
        PasskeyEvaluator(task(passkey_digits=0))
    with pytest.raises(ConfigError, match="task.num_noise"):
        PasskeyEvaluator(task(num_noise=0))
    with pytest.raises(ConfigError, match="task.noise_step"):
        PasskeyEvaluator(task(noise_step=0))
    with pytest.raises(ConfigError, match="task.num_samples"):
        PasskeyEvaluator(task()).samples(196, 0)  # 39 depths x 5 keys = 195 rows


def test_sigma_zero_puts_the_threshold_at_the_reference():
    params = HypothesisParams(alpha=0.5, beta=0.2, sigma=0.0, num_samples=20)
    assert theta_of(params) == 0.0 and threshold_of(params, 99.0) == 99.0
    passed, failed = decide(100.0, 99.0, params), decide(95.0, 99.0, params)
    assert passed.passed and passed.room == pytest.approx(1.0) and passed.p_value == 1.0
    assert not failed.passed and failed.room == pytest.approx(-4.0) and failed.p_value == 0.0
    assert decide(99.0, 99.0, params).passed  # equal to the reference passes
    assert "threshold" in render(failed)


@pytest.mark.e2e
def test_end_to_end_record_then_check_logs_to_mlflow(tmp_path, mlflow_server, monkeypatch, two_layer_checkpoint):
    """The embedded model cut to 2 layers (``model.path``) on 2 short prompts: record, check (threshold =
    reference), read MLflow back. The job around the model is checked, not its answers (the prompts and the
    scorer are checked above against upstream's)."""
    import json

    from mlflow.tracking import MlflowClient

    from runner.job.flow import run

    monkeypatch.chdir(tmp_path)
    refs = tmp_path / "refs"
    common = ["task=passkey_retrieval", f"model.path={two_layer_checkpoint}", "task.length=256",
              "task.max_input_len=256", "task.num_samples=2",
              "task.max_output_len=8", "cache=off", f"reference.dir={refs}",
              f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=e2e-passkey"]
    recorded = run(compose([*common, "reference.mode=record", f"output_dir={tmp_path / 'rec'}"]))
    assert recorded.exit_status == 0 and recorded.spec.extra_acc_spec == "length=256,max_output_len=8"
    checked = run(compose([*common, f"output_dir={tmp_path / 'chk'}"]))
    assert checked.exit_status in (0, 4) and checked.score == recorded.score
    verdict = checked.decision.verdict
    assert verdict.threshold == pytest.approx(verdict.reference) and verdict.theta == 0.0

    metrics = MlflowClient(tracking_uri=mlflow_server).get_run(checked.run_id).data.metrics
    assert metrics["accuracy"] == checked.score and metrics["num_evaluated"] == 2 and metrics["passed"] == 1.0
    rows = [json.loads(line) for line in open(tmp_path / "chk" / "samples.jsonl")]
    assert len(rows) == 2 and all(r["score"] in (0.0, 100.0) and r["target"].isdigit() for r in rows)
