"""A job says how long it will take before it starts when that is more than a minute (issue 40, item 7): the dry
run's estimator (earlier runs' seconds per sample, earlier builds' calibration time) before the model loads, on the
console and in the report; simulated quantization on a CPU no run has measured yet is said as such."""

from __future__ import annotations

from types import SimpleNamespace

from runner.job import calibration_time, expect
from runner.job.flow import run
from runner.stats.data.hypothesis import HypothesisParams
from tests.conftest import ROOT, compose

GSM8K = ["backend=fake", "backend.default_answer='The answer is 5'", "task=gsm8k", "task.dataset.source=local",
         f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "tracking=none", "cache=off",
         "reference.mode=skip", "task.num_samples=6"]


def test_a_job_expected_to_take_minutes_says_so_before_it_starts(tmp_path, monkeypatch):
    # 6 samples at 25 s each (the median of earlier runs): 150 s, said before the model loads and in the report
    monkeypatch.setattr(expect, "evaluation_rate", lambda cfg, job: (25.0, "median of 3 earlier runs"))
    run(compose([*GSM8K, f"output_dir={tmp_path / 'slow'}"]))
    report = (tmp_path / "slow" / "report.txt").read_text()
    assert "expected: about 2 min before the verdict, model loading not included: evaluation ~2 min for 6 samples " \
           "(25.00 s/sample, median of 3 earlier runs" in report
    # 6 samples at 5 s: 30 s, under a minute: nothing to say
    monkeypatch.setattr(expect, "evaluation_rate", lambda cfg, job: (5.0, "median of 3 earlier runs"))
    run(compose([*GSM8K, f"output_dir={tmp_path / 'quick'}"]))
    assert "expected:" not in (tmp_path / "quick" / "report.txt").read_text()


def test_the_slow_cpu_warning_is_printed_once_per_job(tmp_path, monkeypatch, capsys, caplog):
    """Said before the model loads (a log line), kept in report.txt, not printed again in the closing report."""
    monkeypatch.setattr(expect, "simulated_on_cpu", lambda job: True)
    monkeypatch.setattr(expect, "evaluation_rate", lambda cfg, job: (None, "no history (tracking=none)"))
    run(compose([*GSM8K, f"output_dir={tmp_path / 'out'}"]))
    printed = capsys.readouterr().out + "\n".join(caplog.messages)
    said = "is simulated on this CPU (fake-quantization around every linear layer)"
    assert printed.count(said) == 1, printed
    assert said in (tmp_path / "out" / "report.txt").read_text()


def _job(quant_algo: str | None, backend: str = "hf", device: str = "cpu", name: str = "w4a16") -> SimpleNamespace:
    return SimpleNamespace(
        mode="skip", asked_num_samples=None, defaults=HypothesisParams(0.05, 0.2, 50.0, 40),
        quant=SimpleNamespace(name=name if quant_algo else "none", quant_algo=quant_algo, kv_cache_quant_algo=None,
                              calib_num_samples=512, calib_max_seq_length=512),
        config=SimpleNamespace(backend=SimpleNamespace(name=backend, device=device),
                               tracking=SimpleNamespace(name="none"), cache=SimpleNamespace(enabled=False)))


def test_simulated_quantization_on_cpu_is_announced_and_its_build_time_counted(monkeypatch):
    said = expect.expectation(_job("W4A16"))
    assert said is not None and said.startswith("quant=w4a16 is simulated on this CPU")
    assert "no earlier run measured it (no history (tracking=none))" in said and "docs/own-model.md" in said
    assert expect.expectation(_job(None)) is None  # unquantized, no history: nothing known, nothing said
    assert expect.expectation(_job("W4A16", backend="fake")) is None  # a backend that does not simulate it
    assert expect.expectation(_job("W4A16", device="cuda")) is None

    def run_(calib: float, cache: str) -> SimpleNamespace:
        return SimpleNamespace(data=SimpleNamespace(metrics={"quant_calib_time_s": calib},
                                                    tags={"backend.quant_cache": cache}))

    # three earlier builds (cache misses: 100, 200, 400 s; the restore from cache does not count), median 200 s
    monkeypatch.setattr(calibration_time, "earlier_runs", lambda cfg, job, same_task=True, same_model=True:
                        ([run_(100.0, "miss"), run_(1.0, "hit"), run_(400.0, "miss"), run_(200.0, "miss")], ""))
    said = expect.expectation(_job("W4A16"))
    assert said == ("expected: about 3 min before the verdict, model loading not included: calibration ~3 min unless "
                    "the quantized model is cached (median of 3 earlier builds); set task.num_samples=N for a shorter run")


EMBEDDED_LINEAR = 30 * (2 * 576 * 9 * 64 + 2 * 576 * 3 * 64 + 3 * 576 * 1536) + 49152 * 576
"""SmolLM2-135M's linear parameters by hand from its config.json: 30 layers of q/o (576 x 576), k/v (576 x 192)
and gate/up/down (576 x 1536), and the lm_head (49152 x 576, tied to the embeddings): 134,479,872."""


def test_the_calibration_is_estimated_from_its_size_the_models_and_a_rate_before_it_is_paid(monkeypatch):
    from runner.files.assets import smollm2_checkpoint
    from runner.quant import cost

    assert EMBEDDED_LINEAR == 134_479_872
    assert cost.model_parameters(str(smollm2_checkpoint())) == EMBEDDED_LINEAR
    # fp8 at its defaults, 512 x 512 tokens, no earlier build anywhere: the prior, 2e-11 s per token-parameter
    monkeypatch.setattr(calibration_time, "model_size", lambda job: EMBEDDED_LINEAR)
    said = expect.expectation(_job("FP8", name="fp8"))
    assert said is not None and said.startswith("expected: about 12 min before the verdict")  # 705 s
    assert "calibration ~12 min unless the quantized model is cached (512 x 512 calibration tokens, 134 M parameters, " \
           "a prior measured on a 2-core CPU, refined by each build)" in said
    # one earlier build of another model on this host measured 3e-11: that rate wins over the prior
    build = SimpleNamespace(data=SimpleNamespace(tags={"backend.quant_cache": "miss"}, metrics={
        "quant_calib_time_s": 3e-11 * 1000 * 2e6, "quant_calib_tokens": 1000.0, "quant_model_params": 2e6}))

    def history(cfg, job, same_task=True, same_model=True):
        return ([] if same_model else [build]), ""

    monkeypatch.setattr(calibration_time, "earlier_runs", history)
    said = expect.expectation(_job("FP8", name="fp8"))
    assert said.startswith("expected: about 18 min") and "the median rate of 1 earlier build on this host" in said
    # AWQ: at most 32 samples, and a scale search (2.2e-10): 32 x 512 x 134.5 M x 2.2e-10 = 485 s
    monkeypatch.setattr(calibration_time, "earlier_runs", lambda *a, **k: ([], ""))
    seconds, words = calibration_time.quantization_seconds(_job("W4A16_AWQ", name="w4a16_awq"))
    assert round(seconds) == 485 and words.startswith("32 x 512 calibration tokens")


def test_the_dry_run_and_the_planner_say_the_calibration(tmp_path):
    """Both through their commands' entry points in this process (what they print, the status they return): a dry
    run prints its lines where the command line would, and loads no model."""
    from runner.commands.plan import main as plan_main
    from tests.conftest import run_in_process
    from tests.helpers.in_process import call_main

    dry = run_in_process(["quant=fp8", "task=perplexity", "dry_run=true", "tracking=none", "reference.mode=skip",
                          f"output_dir={tmp_path / 'dry'}"], tmp_path)
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "calibration: ~12 min unless the quantized model is cached (512 x 512 calibration tokens, 134 M" in dry.stdout
    plan = call_main(plan_main, ["quant=int8_sq", "task=perplexity", "reference.against=baseline"], tmp_path)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert "calibration  ~12 min on a CPU before the first run of quant=int8_sq (512 x 512" in plan.stdout


def test_near_chance_is_said_when_recorded_and_at_every_look():
    """The extension recipe's old example: MMLU recorded at 25.44 (chance 25) warned only at look 2, whose theta
    happened to be defined; a reference within the tolerance of chance is said at record time and every look."""
    from runner.stats.numerics.scale import near_chance

    said = near_chance(25.44, 2.75, 25.0, True)
    assert said is not None and "only 0.44 points above the task's chance level (25)" in said
    assert near_chance(51.75, 3.607, 25.0, True) is None  # ARC-Easy's embedded reference: room to spare
    assert "not below" in near_chance(30.0, 3.0, 28.0, False)  # lower is better: the ceiling mirrored


def test_a_job_answered_wholly_from_the_cache_is_not_announced_as_slow(monkeypatch):
    assert expect.expectation(_job("W4A16")) is not None  # simulated on the CPU, nothing cached: said
    monkeypatch.setattr(expect, "answered_from_cache", lambda job, n: True)
    assert expect.expectation(_job("W4A16")) is None  # every answer stored: nothing slow is left
    monkeypatch.setattr(calibration_time, "model_size", lambda job: EMBEDDED_LINEAR)
    said = expect.expectation(_job("FP8", name="fp8"))  # the build may still be due: only it is said
    assert said.startswith("expected: about 12 min") and "evaluation" not in said


def test_worse_but_within_tolerance_at_margin_zero_names_the_margin_knob():
    from runner.stats.conclusion import margin_note
    from runner.stats.data.tolerance import Tolerance

    both = SimpleNamespace(both_shown=True, gate="regression", margin=0.0, tolerance=Tolerance(3.607, "theta"))
    said = margin_note(both)
    assert said is not None and "stats.margin=M" in said and "stats.gate=noninferiority" in said and "3.607" in said
    assert margin_note(SimpleNamespace(both_shown=True, gate="regression", margin=1.0, tolerance=both.tolerance)) is None
    assert margin_note(SimpleNamespace(both_shown=False, gate="regression", margin=0.0, tolerance=both.tolerance)) is None
