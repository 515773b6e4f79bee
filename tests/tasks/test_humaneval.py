"""HumanEval: the execution sandbox against hostile programs, the canonical solutions, the scorer."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest

from evaluators.scoring import sandbox
from evaluators.scoring.rouge import RougeScorer
from evaluators.tasks.humaneval import (HumanEvalEvaluator, build_job, build_program, drop_broken_tail,
                                        extract_code_block)
from evaluators.scoring.sandbox import Limits, run_program, run_programs
from runner.contract.errors import ConfigError, DataError
from runner.contract.task_config import DatasetConfig
from evaluators.tasks.humaneval import HumanEvalTaskConfig, SandboxConfig

rouge_f1 = RougeScorer()
FAST = Limits(timeout_s=2.0, memory_mb=256, workers=2)


def task(**kw) -> HumanEvalTaskConfig:
    base = dict(_target_="evaluators.tasks.humaneval.HumanEvalEvaluator", name="humaneval", metric="pass_at_1",
                num_samples=164, max_input_len=924, max_output_len=100, dataset=DatasetConfig(source="packaged"))
    return HumanEvalTaskConfig(**(base | kw))


def layers() -> tuple[str, ...]:
    return sandbox.isolation_layers()


# ---------------------------------------------------------------------- sandbox: ordinary programs
def test_a_clean_program_passes_and_its_output_is_returned():
    result, stdout = run_program("import math\nprint(math.gcd(12, 18))\n", FAST)
    assert result.passed and result.status == "passed"
    assert stdout.strip() == "6"


def test_a_failing_assertion_fails_with_its_error():
    result, _ = run_program("assert 1 + 1 == 3, 'arithmetic'\n", FAST)
    assert not result.passed and result.status == "failed"
    assert "AssertionError: arithmetic" in result.detail


def test_the_working_directory_is_writable_and_starts_empty():
    src = "import os\nassert os.listdir('.') == []\nopen('scratch.txt', 'w').write('ok')\nassert open('scratch.txt').read() == 'ok'\n"
    result, _ = run_program(src, FAST)
    assert result.passed, result


@pytest.mark.parametrize("exit_call", ["import sys\nsys.exit(0)", "import os\nos._exit(0)", "raise SystemExit"])
def test_exiting_before_the_tests_run_is_a_failure(exit_call):
    src = f"{exit_call}\nassert False, 'the tests would fail'\n"
    result, _ = run_program(src, FAST)
    assert not result.passed and result.status in ("exited", "failed")


# ---------------------------------------------------------------------- sandbox: hostile programs
def test_an_infinite_loop_is_stopped_within_the_limits():
    start = time.monotonic()
    result, _ = run_program("while True:\n    pass\n", FAST)
    elapsed = time.monotonic() - start
    assert not result.passed and result.status in ("timeout", "killed:SIGXCPU", "killed:SIGKILL")
    assert elapsed < FAST.timeout_s + sandbox.STARTUP_GRACE_S + 3


def test_a_sleeping_program_hits_the_wall_clock_limit():
    result, _ = run_program("import time\ntime.sleep(60)\n", Limits(timeout_s=1.0))
    assert result.status == "timeout"


def test_unbounded_allocation_fails_with_memory_error():
    src = "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 1024 * 1024))\n"
    result, _ = run_program(src, FAST)
    assert not result.passed and "MemoryError" in result.detail


FORK_BOMB = """
import os
while True:
    os.fork()
"""


def test_a_fork_bomb_is_refused():
    result, _ = run_program(FORK_BOMB, FAST)
    assert not result.passed and "os.fork is not allowed" in result.detail


def test_subprocess_and_os_system_are_refused():
    for src in ("import subprocess\nsubprocess.run(['true'])\n", "import os\nos.system('true')\n",
                "import os\nos.execv('/bin/true', ['true'])\n", "import os\nos.kill(os.getppid(), 9)\n"):
        result, _ = run_program(src, FAST)
        assert not result.passed and "not allowed" in result.detail, src


def _bounded_forks(count_file: str, token: str) -> str:
    """Forks up to 50 children that become ``sleep <token>`` and reports how many the kernel allowed (guard off)."""
    return f"""
import os
pids = []
for _ in range(50):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.execv("/bin/sleep", ["sleep", {token!r}])
    pids.append(pid)
with open({count_file!r}, "w") as handle:
    handle.write(" ".join(map(str, pids)))
"""


def test_the_kernel_caps_processes_even_without_the_audit_hook(tmp_path):
    if "nproc" not in layers():
        pytest.skip("RLIMIT_NPROC cannot take effect here (root without a uid to drop to)")
    token = f"{300 + os.getpid() % 100}.{time.time_ns() % 10**9}"
    # The child writes the pids into its own directory, which is deleted afterwards; print them instead.
    src = _bounded_forks("pids.txt", token) + "print(open('pids.txt').read())\n"
    result, stdout = run_program(src, Limits(timeout_s=5.0), python_guard=False)
    assert result.passed, result
    pids = [int(p) for p in stdout.split()]
    assert 1 <= len(pids) <= sandbox.EXTRA_PROCESSES  # the cap, not the 50 the loop asked for
    time.sleep(0.2)
    assert _processes_with(token) == []  # every process of the job was killed after the run


def _processes_with(token: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``token``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if token.encode() in handle.read() and _state(int(name)) != "Z":
                    found.append(int(name))
        except OSError:
            continue
    return found


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def test_writing_outside_the_working_directory_is_refused(tmp_path):
    target = tmp_path / "escaped.txt"
    attempts = [
        f"open({str(target)!r}, 'w').write('x')",
        f"import os\nfd = os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT)\nos.write(fd, b'x')",
        f"import pathlib\npathlib.Path({str(target)!r}).write_text('x')",
        "open('../escaped.txt', 'w').write('x')",
        "import os\nos.symlink('/etc', 'link')\nopen('link/escaped.txt', 'w').write('x')",
        f"import os\nos.chdir({str(tmp_path)!r})\nopen('escaped.txt', 'w').write('x')",
        f"import os\nfd = os.open({str(tmp_path)!r}, os.O_RDONLY)\n"
        "os.close(os.open('escaped.txt', os.O_WRONLY | os.O_CREAT, dir_fd=fd))",
    ]
    for src in attempts:
        result, _ = run_program(src + "\n", FAST)
        assert not result.passed, src
        assert not target.exists(), src
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    for src in (f"import os\nos.remove({str(victim)!r})", f"import os\nos.rename({str(victim)!r}, 'mine.txt')",
                f"import shutil\nshutil.rmtree({str(tmp_path)!r})"):
        result, _ = run_program(src + "\n", FAST)
        assert not result.passed and victim.read_text() == "keep me", src


def test_writing_outside_is_refused_by_the_kernel_alone(tmp_path):
    if "uid" not in layers():
        pytest.skip("no unprivileged uid to drop to (not running as root)")
    target = tmp_path / "escaped.txt"
    result, _ = run_program(f"open({str(target)!r}, 'w').write('x')\n", FAST, python_guard=False)
    assert not result.passed and "PermissionError" in result.detail
    assert not target.exists()


def _listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.setblocking(False)
    return server


def _connection_arrived(server: socket.socket) -> bool:
    time.sleep(0.2)
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def test_opening_a_socket_is_refused_and_nothing_connects():
    with _listener() as server:
        port = server.getsockname()[1]
        for src in (f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n",
                    f"import socket\ns = socket.socket()\ns.connect(('127.0.0.1', {port}))\n",
                    f"import urllib.request\nurllib.request.urlopen('http://127.0.0.1:{port}/', timeout=1)\n"):
            result, _ = run_program(src, FAST)
            assert not result.passed, src
            assert not _connection_arrived(server), src


def test_the_network_namespace_alone_blocks_the_connection():
    if "netns" not in layers():
        pytest.skip("this kernel does not allow a new network namespace here")
    with _listener() as server:
        port = server.getsockname()[1]
        src = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        result, _ = run_program(src, FAST, python_guard=False)
        assert not result.passed and ("unreachable" in result.detail or "refused" in result.detail.lower())
        assert not _connection_arrived(server)


def test_ctypes_is_refused():
    result, _ = run_program("import ctypes\nctypes.CDLL(None).fork()\n", FAST)
    assert not result.passed and "ctypes" in result.detail


def test_endless_output_is_stopped_by_the_file_size_limit():
    result, _ = run_program("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", Limits(timeout_s=20.0))
    assert not result.passed and result.status in ("killed:SIGXFSZ", "failed")


def test_hostile_programs_do_not_stop_the_others():
    programs = ["while True:\n    pass\n", FORK_BOMB, "print('fine')\n", "x = [bytearray(10**9) for _ in range(99)]\n",
                "assert sum(range(10)) == 45\n"]
    results = run_programs(programs, FAST)
    assert [r.passed for r in results] == [False, False, True, False, True]


# ---------------------------------------------------------------------- the dataset's own solutions
def test_all_164_canonical_solutions_pass_in_the_sandbox():
    ev = HumanEvalEvaluator(task())
    problems = ev.load_problems()
    assert len(problems) == 164 and len({p.task_id for p in problems}) == 164
    # as the scorer runs them: the function in the worker, the tests in the trusted tester
    programs = [build_job(p.prompt, p.canonical_solution, p.test, p.entry_point, p.prompt) for p in problems]
    start = time.monotonic()
    results = run_programs(programs, Limits(timeout_s=10.0, workers=4))
    failed = [(p.task_id, r.status, r.detail) for p, r in zip(problems, results) if not r.passed]
    assert failed == []
    assert time.monotonic() - start < 120


def test_a_wrong_solution_fails_its_tests():
    ev = HumanEvalEvaluator(task())
    p = ev.load_problems()[0]  # has_close_elements
    result, _ = run_program(build_program(p.prompt, "    return False\n", p.test, p.entry_point), FAST)
    assert not result.passed and "AssertionError" in result.detail


# ---------------------------------------------------------------------- scorer
@pytest.mark.parametrize("output,code", [
    ("def f():\n    return 1\n", "def f():\n    return 1\n"),  # no fence: all of it
    ("```python\ndef f():\n    return 1\n```\n\nThis works.", "def f():\n    return 1\n"),
    ("You can write:\n\n```py\ndef f():\n    return 1\n```\nDone.", "def f():\n    return 1\n"),
    ("def f():\n    return 1\n```\n\nIt returns one.", "def f():\n    return 1\n"),  # closing fence only
    ("```\ndef f():\n    return 1\n", "def f():\n    return 1\n"),  # never closed
    ("Sure! ```python is great``` and\n```python\nx = 1\n```", "x = 1\n"),  # inline backticks are no fence
])
def test_code_block_extraction(output, code):
    assert extract_code_block(output) == code


def test_an_unfinished_tail_is_dropped_but_a_broken_function_is_kept():
    cut = "def f():\n    return 1\n\n# Example usage:\nprint(f([1, 2,"
    assert drop_broken_tail(cut) == "def f():\n    return 1\n\n# Example usage:\n"
    assert drop_broken_tail("def f():\n    return (1\n") == "def f():\n    return (1\n"  # nothing to drop
    assert drop_broken_tail("x = [\n1,\n2\n]\nprint(x") == "x = [\n1,\n2\n]\n"
    assert drop_broken_tail("def f():\n    return 1\n") == "def f():\n    return 1\n"


def test_chat_answers_with_the_canonical_function_pass_in_code_block_mode():
    """A chat-style answer (prose, a fenced block with the whole function, prose) of 20 problems."""
    ev = HumanEvalEvaluator(task(extraction="code_block", apply_chat_template=True))
    samples = ev.samples(20, 0)
    answers = [[f"Here is the function:\n\n```python\n{s.prompt}{s.target}```\n\nIt passes the examples."]
               for s in samples]
    scored = ev.score_batch(samples, answers)
    assert [s.meta["execution"] for s in scored] == ["passed"] * 20
    assert ev.extra_acc_spec() == "extraction=code_block,chat_template=true"
    # the same answers cut as completions fail: the prose is no code
    plain = HumanEvalEvaluator(task()).score_batch(samples[:3], answers[:3])
    assert [s.score for s in plain] == [0.0] * 3


def test_program_layout():
    assert build_program("def f():\n", "    return 1\n", "def check(c):\n    assert c() == 1\n", "f") == (
        "def f():\n    return 1\n\ndef check(c):\n    assert c() == 1\n\ncheck(f)\n")


def test_rouge_identity_and_disjoint():
    same = rouge_f1("return sorted(set(values))", "return sorted(set(values))")
    assert same == {"rouge1": 100.0, "rouge2": 100.0, "rougeL": 100.0, "rougeLsum": 100.0}
    assert rouge_f1("alpha beta", "gamma delta") == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0, "rougeLsum": 0.0}
    # 2 of 3 prediction unigrams in a 4-unigram reference: P = 2/3, R = 2/4, F1 = 4/7
    assert rouge_f1("return x y", "return x plus z")["rouge1"] == pytest.approx(100 * 4 / 7)


def test_scoring_executes_and_reports_rouge_on_the_whole_output():
    ev = HumanEvalEvaluator(task(sandbox=SandboxConfig(timeout_s=3.0, memory_mb=512, workers=2)))
    samples = {s.id: s for s in ev.samples(164, 0)}
    add = samples["HumanEval/53"]  # add(x, y)
    good = "    return x + y\n\n\ndef helper():\n    return 'never executed'\n"
    bad = "    return x - y\n"
    hostile = "    import os\n    while True:\n        os.fork()\n"
    scored = ev.score_batch([add, add, add], [[good], [bad], [hostile]])
    assert [s.score for s in scored] == [100.0, 0.0, 0.0]
    assert scored[0].meta["completion"] == "    return x + y\n\n"
    assert scored[0].prediction == good
    assert scored[0].meta["rouge1"] == pytest.approx(rouge_f1(good, add.target)["rouge1"])
    assert scored[2].meta["execution"] == "failed"
    agg = ev.aggregate(scored)
    assert agg["pass_at_1"] == pytest.approx(100 / 3)
    assert agg["rouge1"] == pytest.approx(sum(s.meta["rouge1"] for s in scored) / 3)
    assert agg["execution/passed"] == 1 and agg["execution/failed"] == 2


def test_hostile_completions_score_zero_and_the_run_goes_on(tmp_path):
    """Each hostile completion runs its attack, then returns the right answer: only the attack can fail it."""
    ev = HumanEvalEvaluator(task(sandbox=SandboxConfig(timeout_s=3.0, memory_mb=512, workers=2)))
    add = next(s for s in ev.samples(164, 0) if s.id == "HumanEval/53")  # add(x, y)
    target = tmp_path / "escaped.txt"
    with _listener() as server:
        port = server.getsockname()[1]
        attacks = {
            "loop": "    while True:\n        pass\n",
            "fork": "    import os\n    while True:\n        os.fork()\n",
            "memory": "    chunks = [bytearray(10**9) for _ in range(99)]\n",
            "write outside": f"    open({str(target)!r}, 'w').write('x')\n",
            "socket": f"    import socket\n    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n",
        }
        completions = [body + "    return x + y\n" for body in attacks.values()] + ["    return x + y\n"]
        scored = ev.score_batch([add] * len(completions), [[c] for c in completions])
        assert not _connection_arrived(server)
    assert [s.score for s in scored] == [0.0] * len(attacks) + [100.0], \
        {name: s.meta["execution"] for name, s in zip(attacks, scored)}
    assert not target.exists()
    assert ev.aggregate(scored)["pass_at_1"] == pytest.approx(100 / 6)


def test_rouge1_as_the_metric_scores_each_sample_by_rouge():
    ev = HumanEvalEvaluator(task(metric="rouge1", sigma=15.08))
    sample = ev.samples(1, 0)[0]
    (scored,) = ev.score_batch([sample], [[sample.target]])
    assert scored.score == 100.0 and ev.aggregate([scored])["rouge1"] == 100.0


def test_rouge_protocol_uses_upstreams_prompt_and_shuffled_subset():
    """summarize.py: inputs stripped and " n't" joined; Dataset.shuffle(0) order; the first n rows."""
    import numpy as np

    ev = HumanEvalEvaluator(task(metric="rouge1", sigma=15.08))
    raw = {s.id: s.prompt for s in HumanEvalEvaluator(task()).samples(164, 0)}
    samples = ev.samples(164, 0)
    order = np.random.default_rng(0).permutation(164)  # what Dataset.shuffle(seed=0) applies
    assert [s.id for s in samples] == [f"HumanEval/{i}" for i in order]
    assert all(s.prompt == raw[s.id].strip().replace(" n't", "n't") for s in samples)
    first = next(s for s in samples if s.id == "HumanEval/0")
    assert raw["HumanEval/0"].endswith('    """\n') and first.prompt.endswith('    """')
    assert [s.id for s in ev.samples(5, 0)] == [f"HumanEval/{i}" for i in order[:5]]
    assert [s.id for s in HumanEvalEvaluator(task()).samples(164, 0)] == [f"HumanEval/{i}" for i in range(164)]


def test_rouge_protocol_aggregates_like_evaluates_rouge_metric():
    """evaluate's rouge: rouge-score's BootstrapAggregator under np.random.seed(0) (summarize.py's metric.seed)."""
    import numpy as np
    from rouge_score import scoring

    ev = HumanEvalEvaluator(task(metric="rouge1", sigma=15.08, sandbox=SandboxConfig(timeout_s=3.0, workers=2)))
    samples = ev.samples(6, 0)
    outputs = ["    return x + y\n", "pass", samples[2].target, "for i in range(10): print(i)", "", "return None"]
    scored = ev.score_batch(samples, [[o] for o in outputs])
    agg = ev.aggregate(scored)
    rouge = RougeScorer()._scorer
    aggregator = scoring.BootstrapAggregator()
    for s, o in zip(samples, outputs):
        aggregator.add_scores(rouge.score(s.target, o))
    np.random.seed(0)
    expected = aggregator.aggregate()
    for name in ("rouge1", "rouge2", "rougeL", "rougeLsum"):
        assert agg[name] == pytest.approx(100 * expected[name].mid.fmeasure)
    assert agg["rouge1"] != pytest.approx(sum(s.meta["rouge1"] for s in scored) / 6)  # not the plain mean


def test_subset_is_seeded_and_requests_are_greedy_without_stop():
    ev = HumanEvalEvaluator(task())
    a, b, c = ev.samples(10, 0), ev.samples(10, 0), ev.samples(10, 1)
    assert [s.id for s in a] == [s.id for s in b] != [s.id for s in c]
    (req,) = ev.requests(a[0])
    assert req.prompt == a[0].prompt and req.max_tokens == 100 and req.greedy and req.stop == ()


def test_extra_acc_spec_names_protocol_changes():
    assert HumanEvalEvaluator(task()).extra_acc_spec() is None
    spec = HumanEvalEvaluator(task(max_output_len=128, stop=["\ndef"])).extra_acc_spec()
    assert spec.startswith("max_output_len=128,stop=")


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="task.sandbox.workers"):
        HumanEvalEvaluator(task(sandbox=SandboxConfig(workers=0)))
    with pytest.raises(ConfigError, match="task.metric"):
        HumanEvalEvaluator(task(metric="pass@1"))
    with pytest.raises(ConfigError, match="task.extraction"):
        HumanEvalEvaluator(task(extraction="regex"))


def test_malformed_row_names_source_and_row(tmp_path):
    row = {"task_id": "X/0", "prompt": "def f():\n", "canonical_solution": "    return 1\n",
           "test": "def check(c):\n    pass\n", "entry_point": "f"}
    data = tmp_path / "test.jsonl"
    data.write_text(json.dumps(row) + "\n" + json.dumps(row | {"entry_point": "not a name"}) + "\n")
    ev = HumanEvalEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(data))))
    with pytest.raises(DataError) as info:
        ev.samples(2, 0)
    assert "row 1" in str(info.value) and "entry_point" in str(info.value)


def test_unreachable_hub_names_the_alternatives():
    ev = HumanEvalEvaluator(task(dataset=DatasetConfig(source="hub", hub_id="openai/openai_humaneval")))
    with pytest.raises(DataError) as info:
        ev.samples(2, 0)
    assert "source=packaged" in str(info.value) and "local_path" in str(info.value)


# ---------------------------------------------------------------------- references and end to end
def test_upstream_rouge_references_are_never_read_as_pass_at_1():
    from runner.contract.errors import ReferenceError_
    from runner.references.store import default_reference_dir, lookup
    from runner.contract.spec import AccuracySpec
    from runner.stats.data.hypothesis import HypothesisParams

    defaults = HypothesisParams(0.002, 0.2, 50.0, 164)
    with pytest.raises(ReferenceError_, match="no value for metric 'pass_at_1'"):
        lookup(default_reference_dir(), "humaneval", "pass_at_1", "bigcode/santacoder", AccuracySpec(), defaults)
    ref = lookup(default_reference_dir(), "humaneval", "rouge1", "bigcode/santacoder", AccuracySpec(), defaults)
    assert ref.value == 31.688 and ref.params.sigma == 15.08


@pytest.mark.e2e
def test_end_to_end_record_then_check_logs_to_mlflow(tmp_path, mlflow_server, monkeypatch, two_layer_checkpoint):
    """2 packaged problems: record, check against it, read MLflow back. On the embedded model's first 2 layers
    (``model.path``): the test is about the record, the sandboxed execution, the check and what is logged, which any
    model's completions exercise, at a fraction of the embedded model's generation time."""
    from mlflow.tracking import MlflowClient

    from runner.job.flow import run
    from tests.conftest import compose

    monkeypatch.chdir(tmp_path)
    refs = tmp_path / "refs"
    common = ["task=humaneval", f"model.path={two_layer_checkpoint}", "task.num_samples=2", "task.max_output_len=32", f"reference.dir={refs}",
              f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=e2e-humaneval"]
    recorded = run(compose([*common, "reference.mode=record", f"output_dir={tmp_path / 'rec'}"]))
    assert recorded.exit_status == 0 and recorded.spec.extra_acc_spec == "max_output_len=32"
    assert "pass_at_1:" in (refs / "humaneval.yaml").read_text()
    # the check reads the recorded run's completions back from the generation cache, as a user's rerun does: the
    # model generates once, and the check, its decision and MLflow run as after any rerun
    checked = run(compose([*common, f"output_dir={tmp_path / 'chk'}"]))
    assert checked.exit_status in (0, 4) and checked.score == recorded.score
    assert json.loads((tmp_path / "chk" / "report.json").read_text())["generation_cache"]["hits"] == 2
    assert checked.decision is not None and checked.decision.passed

    metrics = MlflowClient(tracking_uri=mlflow_server).get_run(checked.run_id).data.metrics
    for key in ("pass_at_1", "rouge1", "rouge2", "rougeL", "rougeLsum", "score", "unpaired_threshold", "num_evaluated"):
        assert key in metrics, key
    assert metrics["num_evaluated"] == 2 and metrics["score"] == metrics["pass_at_1"]
    assert not any(k.startswith("execution/") for k in metrics)  # breakdowns are one table, not columns
    client = MlflowClient(tracking_uri=mlflow_server)
    table = json.loads(open(client.download_artifacts(checked.run_id, "breakdown.json")).read())
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    assert sum(r["value"] for r in rows if r["group"] == "execution") == 2
    rows = [json.loads(line) for line in open(tmp_path / "chk" / "samples.jsonl")]
    assert len(rows) == 2 and all(r["score"] in (0.0, 100.0) for r in rows)
    assert all(r["meta"]["execution"] and "completion" in r["meta"] and r["sample_id"].startswith("HumanEval/") for r in rows)
