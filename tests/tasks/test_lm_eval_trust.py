"""The trust rule of task=lm_eval, decided where lm-eval's YAML is read: a tag that resolves to ``!function``
(however it is spelled), an include outside the include path, a file in another encoding, an alias bomb.

Every hostile task names a module that writes a marker file when it is imported: a refusal must come
before lm-eval executes anything, so the marker must be absent after it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.contract.errors import ConfigError
from runner.job.flow import typed
from tests.conftest import ROOT, compose

ARC = ROOT / "tests" / "data" / "arc_easy" / "test.jsonl"
MODULE = '''import pathlib
pathlib.Path(r"{marker}").write_text("ran")


def process_docs(dataset):
    return dataset
'''
TASK = f"""task: {{name}}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {ARC}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{{{{{question}}}}}}}}\\nAnswer:"
doc_to_target: "{{{{{{{{choices.label.index(answerKey)}}}}}}}}"
doc_to_choice: "{{{{{{{{choices.text}}}}}}}}"
metric_list:
  - metric: acc
"""


def task(name: str, code: str = "") -> str:
    """A task over the ARC fixture; ``code``: a ``process_docs`` line (a tag naming ``evil.process_docs``)."""
    return TASK.format(name=name) + (f"process_docs: {code} evil.process_docs\n" if code else "")


def evil(directory: Path, marker: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "evil.py").write_text(MODULE.format(marker=marker))


def prepare_job(tasks: Path, tmp_path: Path, name: str, *extra: str):
    from runner.job.prepare import prepare

    return prepare(typed(compose(["task=lm_eval", f"task.lm_eval_task={name}", f"task.include_path={tasks}",
                                  "backend=fake", "tracking=none", "reference.mode=skip",
                                  f"output_dir={tmp_path / 'out'}", *extra])))


def refused(tasks: Path, tmp_path: Path, name: str, words: str, *extra: str) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        prepare_job(tasks, tmp_path, name, *extra)
    assert words in str(err.value), str(err.value)
    assert not (tmp_path / "marker").exists(), "task code ran before the refusal"
    return err.value


@pytest.fixture
def tasks(tmp_path):
    root = tmp_path / "tasks"
    evil(root, tmp_path / "marker")
    return root


@pytest.mark.parametrize("spelling", [
    "%TAG !f! !fun\n---\n{body}".replace("{body}", task("t", "!f!ction")),  # a %TAG directive
    task("t", "!fun%63tion"),  # a URI escape in the tag
    task("t", "!<!function>"),  # a verbatim tag
])
def test_a_tag_that_resolves_to_function_needs_trust_however_it_is_spelled(tasks, tmp_path, spelling):
    (tasks / "t.yaml").write_text(spelling)
    err = refused(tasks, tmp_path, "t", "would run Python code")
    assert "t.yaml" in str(err) and "trust_include_code=true" in str(err)
    prepare_job(tasks, tmp_path, "t", "task.trust_include_code=true")  # the same file with consent: its code runs
    assert (tmp_path / "marker").read_text() == "ran"


def test_a_utf16_task_file_is_read_as_lm_eval_reads_it(tasks, tmp_path):
    (tasks / "t.yaml").write_bytes(task("t", "!function").encode("utf-16"))
    refused(tasks, tmp_path, "t", "would run Python code")


def test_a_hash_in_a_quoted_string_does_not_hide_the_tag(tasks, tmp_path):
    fields = ["task: t", "dataset_path: json", f"dataset_kwargs: {{data_files: {{test: '{ARC}'}}}}",
              "test_split: test", "output_type: multiple_choice", "doc_to_text: 'Q # {{question}}'",
              "doc_to_target: 0", "doc_to_choice: '{{choices.text}}'", "metric_list: [{metric: acc}]",
              "process_docs: !function evil.process_docs"]
    (tasks / "t.yaml").write_text("{" + ", ".join(fields) + "}\n")  # one line: the tag after a quoted '#'
    refused(tasks, tmp_path, "t", "would run Python code")


@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_an_include_outside_the_include_path_is_refused_unless_allowed(tasks, tmp_path, how):
    outside = tmp_path / "outside"
    evil(outside, tmp_path / "marker")
    (outside / "base.yaml").write_text(task("base", "!function"))
    target = "../outside/base.yaml" if how == "relative" else str(outside / "base.yaml")
    (tasks / "t.yaml").write_text(f"include: {target}\ntask: t\n")
    err = refused(tasks, tmp_path, "t", "outside the include path")
    assert "base.yaml" in str(err) and "task.include_allow" in str(err)
    # allowed, the included file is read under the same rule: its code still needs trust
    refused(tasks, tmp_path, "t", "would run Python code", f"task.include_allow=[{outside}]")
    (outside / "base.yaml").write_text(task("base"))
    prepared = prepare_job(tasks, tmp_path, "t", f"task.include_allow=[{outside}]")
    assert [s.name for s in prepared.evaluator.subtasks] == ["t"]


BOMB = """metadata:
  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]
""" + "".join(f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))


def test_a_billion_laughs_task_is_refused_quickly(tmp_path):
    """In a child process bounded in memory and time: before the limit, lm-eval's dump_config expands 10^9 nodes."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "t.yaml").write_text(task("t") + BOMB)
    script = ("import sys, resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30));"
              "from tests.tasks.test_lm_eval_trust import prepare_job; from pathlib import Path;"
              "from runner.contract.errors import ConfigError\n"
              "try:\n prepare_job(Path(sys.argv[1]), Path(sys.argv[2]), 't').evaluator.extra_acc_spec()\n"
              "except ConfigError as err:\n print(err)\n")
    try:
        proc = subprocess.run([sys.executable, "-c", script, str(tasks), str(tmp_path)], cwd=ROOT, timeout=60,
                              capture_output=True, text=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        pytest.fail("loading the task ran for 60 s")
    assert "aliases" in proc.stdout and "task.yaml_max_nodes" in proc.stdout, proc.stdout + proc.stderr[-2000:]


def foreign_run(tmp_path: Path, *consent: str) -> Path:
    """A run directory handed over by someone else: its saved overrides grant consent to run its task's code."""
    import yaml

    tasks = tmp_path / "tasks"
    evil(tasks, tmp_path / "marker")
    (tasks / "t.yaml").write_text(task("t", "!function"))
    run_dir = tmp_path / "foreign"
    (run_dir / ".hydra").mkdir(parents=True, exist_ok=True)
    overrides = ["task=lm_eval", "task.lm_eval_task=t", f"task.include_path={tasks}", *consent, "backend=fake",
                 "tracking=none", "reference.mode=skip", "stats.extensions=1", "task.num_samples=2",
                 f"cache.path={tmp_path / 'gen.sqlite'}"]
    (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (run_dir / "config.yaml").write_text(yaml.safe_dump({
        "task": {"num_samples": 2, "trust_include_code": "task.trust_include_code=true" in consent, "include_allow": []},
        "model": {"trust_remote_code": False}, "stats": {"extensions": 1, "extend": []}}))
    return run_dir


def test_runner_extend_never_inherits_trust_from_a_run_directory(tmp_path):
    run_dir = foreign_run(tmp_path, "task.trust_include_code=true")
    proc = subprocess.run([sys.executable, "-m", "runner.extend", str(run_dir), "2"], cwd=tmp_path, timeout=300,
                          capture_output=True, text=True,
                          env=os.environ | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert "does not inherit consent" in proc.stderr and "--trust-include-code" in proc.stderr, proc.stderr
    assert not (tmp_path / "marker").exists()


def test_runner_extend_takes_consent_from_its_own_command_line_only(tmp_path):
    from runner.commands.extend import Consent, overrides_for

    # saved without consent: the rerun is composed with false appended, and its task files are refused before
    # anything of theirs runs
    with pytest.raises(ConfigError, match=r"would run Python code \(!function\)"):
        overrides_for(foreign_run(tmp_path), 2)
    assert not (tmp_path / "marker").exists()
    granted = overrides_for(foreign_run(tmp_path, "task.trust_include_code=true"), 2, Consent(trust_include_code=True))
    assert granted.count("task.trust_include_code=true") == 1 and "model.trust_remote_code=false" in granted
    assert not any(o.startswith("task.include_allow=") and o != "task.include_allow=[]" for o in granted)


def test_a_prompt_template_cannot_reach_python(tmp_path):
    """A template is a plain string, no tag: lm-eval renders it in Jinja, whose globals reach ``os``."""
    from runner.job.flow import run

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    hostile = "{{ cycler.__init__.__globals__.os.system('touch " + str(tmp_path / "marker") + "') }}"
    (tasks / "t.yaml").write_text(task("t").replace("doc_to_text: \"Question:", f"doc_to_text: \"{hostile}Question:"))
    with pytest.raises(ConfigError, match="sandbox") as err:
        run(compose(["task=lm_eval", "task.lm_eval_task=t", f"task.include_path={tasks}", "backend=fake",
                     "tracking=none", "reference.mode=skip", f"output_dir={tmp_path / 'out'}", "task.num_samples=2"]))
    assert "doc_to_text" in str(err.value) or "template" in str(err.value)
    assert not (tmp_path / "marker").exists()


METRIC_SCRIPT = '''import pathlib
pathlib.Path(r"{marker}").write_text("ran")
'''


@pytest.mark.parametrize("form", ["file", "directory", "directory, hf_evaluate", "unregistered name, hf_evaluate"])
def test_a_metric_lm_eval_would_load_with_evaluate_needs_trust(tmp_path, form):
    """lm-eval hands a metric missing from its registry to ``evaluate.load``, which imports a local script (a file,
    or a directory D holding D/D.py): code without a tag, refused before anything is imported."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    script = tmp_path / "m" / "m.py"
    script.parent.mkdir()
    script.write_text(METRIC_SCRIPT.format(marker=tmp_path / "marker"))
    name = {"file": str(script), "directory": str(script.parent), "directory, hf_evaluate": str(script.parent),
            "unregistered name, hf_evaluate": "acc"}[form]
    metric = f"  - metric: {name}\n" + ("    hf_evaluate: true\n" if "hf_evaluate" in form else "")
    (tasks / "t.yaml").write_text(task("t").replace("  - metric: acc\n", metric))
    err = refused(tasks, tmp_path, "t", "would run Python code")
    assert name in str(err) and "trust_include_code=true" in str(err)


@pytest.mark.parametrize("line, words", [
    ("process_results: os.system\n", "process_results"),
    ("filter_list:\n  - name: f\n    filter:\n      - function: os:system\n", "filter function"),
    ("metric_list:\n  - metric: acc\n    aggregation: os:system\n", "aggregation"),
])
def test_a_name_lm_eval_would_drop_is_refused_whatever_the_trust(tmp_path, line, words):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    body = task("t")
    (tasks / "t.yaml").write_text((body.split("metric_list:")[0] if "metric_list" in line else body) + line)
    for extra in ((), ("task.trust_include_code=true",)):
        err = refused(tasks, tmp_path, "t", "does not have", *extra)
        assert words in str(err)


def test_a_module_function_metric_with_trust_is_refused_offline(tmp_path):
    """With consent, a metric that is not a local script would be fetched from the Hub: offline, a message."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "t.yaml").write_text(task("t").replace("metric: acc", "metric: os:system"))
    refused(tasks, tmp_path, "t", "neither registered nor a local metric script", "task.trust_include_code=true")
    err = refused(tasks, tmp_path, "t", "would run Python code")
    assert "os:system" in str(err)


def run_task(tmp_path: Path, tasks: Path, *extra: str):
    from runner.job.flow import run

    return run(compose(["task=lm_eval", "task.lm_eval_task=t", f"task.include_path={tasks}", "backend=fake",
                        "tracking=none", "reference.mode=skip", f"output_dir={tmp_path / 'out'}", "task.num_samples=2",
                        f"cache.path={tmp_path / 'gen.sqlite'}", *extra]))


@pytest.mark.parametrize("body, words", [
    ("xxxxxxxx", "renders too much"),  # the loop repeats its output: stopped by the output's size
    ("", "renders for too long"),  # it emits nothing: stopped by the time bound alone
])
def test_a_template_loop_is_bounded_in_output_and_time(tmp_path, monkeypatch, body, words):
    from evaluators.tasks.harness import templates

    if not body:  # the output case keeps the 10 s bound: its 2^20 characters come first even on a loaded host
        monkeypatch.setattr(templates, "TEMPLATE_MAX_S", 1.0)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    loop = "{% for i in range(99999) %}{% for j in range(99999) %}" + body + "{% endfor %}{% endfor %}"
    (tasks / "t.yaml").write_text(task("t").replace("doc_to_text: \"Question:", f"doc_to_text: \"{loop}Question:"))
    start = time.monotonic()
    with pytest.raises(ConfigError, match=words) as err:
        run_task(tmp_path, tasks)
    assert time.monotonic() - start < 60
    assert "task t: template doc_to_text" in str(err.value), str(err.value)  # the task and the field
    assert ("at most 1 s" if not body else "characters") in str(err.value)


@pytest.mark.parametrize("template", [
    "{% set r = range(99999)|list %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}",  # a loop over a list
    "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",  # 2^40 calls
    "{{ ('a' * 40 + '!')|regex_replace('(a|a)+$', '') }}",  # lm-eval's regex_replace filter, Python's re
])
def test_a_template_that_runs_without_end_is_stopped(monkeypatch, template):
    import lm_eval.utils

    from evaluators.tasks.harness import templates

    templates.sandbox_templates()
    monkeypatch.setattr(templates, "TEMPLATE_MAX_S", 0.5)
    start = time.monotonic()
    with pytest.raises(ConfigError, match="renders for too long"):
        lm_eval.utils.apply_template(template, {"question": "q"})
    assert time.monotonic() - start < 10
    assert lm_eval.utils.apply_template("Q: {{question|regex_replace('-', '+')}}", {"question": "a-b"}) == "Q: a+b"


@pytest.mark.parametrize("template, words", [
    ("{{ 9 ** 999999999 }}", "too large"),  # one step of the interpreter: checked before it runs, never folded
    ("{{ 'x' * 100000000 }}", "too large"),
    ("{{ range(10000000) }}", "asks for too much"),  # the sandbox's range limit, a message
])
def test_a_template_value_too_large_is_refused_before_it_is_computed(template, words):
    import lm_eval.utils

    from evaluators.tasks.harness import templates

    templates.sandbox_templates()
    start = time.monotonic()
    with pytest.raises(ConfigError, match=words):
        lm_eval.utils.apply_template(template, {})
    assert time.monotonic() - start < 5


GENERATING = f"""task: t
dataset_path: json
dataset_kwargs:
  data_files:
    test: {ARC}
test_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\nAnswer:"
doc_to_target: "{{{{answerKey}}}}"
generation_kwargs:
  until: ["\n"]
  max_gen_toks: 8
metric_list:
  - metric: exact_match
"""


@pytest.mark.parametrize("extra, part", [
    ("filter_list:\n  - name: letters\n    filter:\n      - function: regex\n        regex_pattern: \"(a+)+$\"\n"
     "      - function: take_first\n", "filter_list letters"),
    ("filter_list:\n  - name: mc\n    filter:\n      - function: multi_choice_regex\n        regex_pattern: \"(Z)\"\n"
     "        regexes_to_ignore: [\"(a|a)+$\"]\n      - function: take_first\n", "filter_list mc"),
    ("    regexes_to_ignore: [\"(a|aa)+$\"]\n", "metric_list (regexes_to_ignore)"),
])
def test_a_catastrophic_pattern_over_the_answers_is_stopped(tmp_path, monkeypatch, extra, part):
    """``(a+)+$`` over 40 a's and a 'b' takes hours in Python's re (lm-eval's own filter and exact_match): the task's
    regular expressions run within a bound per answer, and the message names the task, the filter and the pattern."""
    import sqlite3

    from evaluators.tasks.harness import patterns

    monkeypatch.setattr(patterns, "PATTERN_MAX_S", 0.5)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "t.yaml").write_text(GENERATING + extra)
    start = time.monotonic()
    with pytest.raises(ConfigError, match="ran too long over the model's answers") as err:
        run_task(tmp_path, tasks, "backend.default_answer=" + "a" * 40 + "b")
    assert time.monotonic() - start < 60
    assert f"lm-eval task t: {part}" in str(err.value) and "+$'" in str(err.value), str(err.value)
    with sqlite3.connect(tmp_path / "gen.sqlite") as db:  # the answers were kept: a rerun asks nothing again
        assert db.execute("select count(*) from responses").fetchone()[0] == 2
