"""A job says how long it will take before it starts when that is more than a minute (issue 40, item 7): the dry
run's estimator (earlier runs' seconds per sample, earlier builds' calibration time) before the model loads, on the
console and in the report; simulated quantization on a CPU no run has measured yet is said as such."""

from __future__ import annotations

from types import SimpleNamespace

from runner.job import expect
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


def _job(quant_algo: str | None, backend: str = "hf", device: str = "cpu") -> SimpleNamespace:
    return SimpleNamespace(
        mode="skip", asked_num_samples=None, defaults=HypothesisParams(0.05, 0.2, 50.0, 40),
        quant=SimpleNamespace(name="w4a16" if quant_algo else "none", quant_algo=quant_algo, kv_cache_quant_algo=None),
        config=SimpleNamespace(backend=SimpleNamespace(name=backend, device=device),
                               tracking=SimpleNamespace(name="none")))


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
    monkeypatch.setattr(expect, "earlier_runs", lambda cfg, job, same_task=True:
                        ([run_(100.0, "miss"), run_(1.0, "hit"), run_(400.0, "miss"), run_(200.0, "miss")], ""))
    said = expect.expectation(_job("W4A16"))
    assert said == ("expected: about 3 min before the verdict, model loading not included: quantization ~3 min unless "
                    "the quantized model is cached (median of 3 earlier builds); set task.num_samples=N for a shorter run")
