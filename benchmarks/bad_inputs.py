"""Replay the bad-input list of the red-team rounds (issues 20, 30, 39 and 48) through ``python -m runner`` and
count how each one ends.

Each case is one command line (``python -m runner``, or ``runner.compare`` / ``runner.extend`` for a case whose
first word is ``@compare`` / ``@extend``), run as a user runs it (a fresh process, the scripted fake backend and
``tracking=none`` where the case allows, a fresh working directory with the files the case needs).
An outcome is one of:

- ``message``: exit status != 0, an ``error:`` block naming ``where`` and no traceback, and the words
  the case expects (what the input is: "symlink loop", "sqlite:///", ...);
- ``weak``: exit status != 0 without a traceback, but the message misses where the problem is or
  what it is (a symlink loop reported as a missing file), or a file the user owned was changed;
- ``accepted``: exit status 0: the input ran as if it were fine;
- ``traceback``: a Python traceback on the terminal;
- ``code ran``: code the case's files name ran (their module writes a marker file on import), whatever the exit
  status and the output.

A case whose input is legal but hostile (a password in a URL, a control character in a sample id) has a
``check`` instead: it reads what the run left and says ``message`` when the outputs hold what they should
(no password in any file, well-formed XML, no raw escape on the terminal) and ``weak`` when they do not.

Round 5 (issue 48) adds what runs code without a tag (a task's metrics, a run directory's launch command and
environment), secrets outside a URL, waits and hangs, and the tracebacks of that round; then its last gaps: template
loops with an empty body and recursive macros, catastrophic patterns in a task's filters and ``regexes_to_ignore``
over the model's answers, and a cached TensorRT-LLM engine changed on disk (the double built from the committed
manifest, on PYTHONPATH).

Usage: ``python benchmarks/bad_inputs.py [--only SUBSTRING] [--verbose]``; prints one line per case and
the counts table docs/reliability.md quotes. Takes about two minutes on two cores (each case is a new
interpreter: the point is what a user sees).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
GSM8K_DIR = ROOT / "tests" / "data" / "gsm8k_local"
MMLU_DIR = ROOT / "tests" / "data" / "mmlu_cais"
GSM8K = ["backend=fake", "task=gsm8k", "task.dataset.source=local", f"task.dataset.local_path={GSM8K_DIR}",
         "task.num_samples=2"]
QUIET = ["tracking=none", "reference.mode=skip"]
FAST = [*GSM8K, *QUIET]
GSM8K_ROW = {"question": "What is 1 + 1?", "answer": "1 + 1 = 2\n#### 2"}
MMLU_ROW = {"question": "Which planet is closest to the Sun?", "subject": "astronomy",
            "choices": ["Venus", "Mercury", "Mars", "Earth"], "answer": 1}


@dataclass
class Case:
    name: str
    args: list[str]  # {tmp} is the case's working directory
    expect: str = ""  # words a good message holds (case-insensitive); empty: any error block
    setup: Callable[[Path], None] | None = None
    intact: list[str] = field(default_factory=list)  # files (under {tmp}) the run must leave as they were
    env: dict[str, str] = field(default_factory=dict)
    read_only: str | None = None  # a directory (under {tmp}) mounted read-only for the run (``unshare -rm``, Linux)
    small: str | None = None  # a directory (under {tmp}) mounted as a 64 KiB tmpfs for the run: a full disk
    timeout: int = 300  # seconds before the run counts as hung
    check: Callable[[Path, int, str], bool] | None = None  # (tmp, exit status, output): the outputs are right
    absent: list[str] = field(default_factory=list)  # files (under {tmp}) whose existence after the run means code ran
    module: str = "runner"  # python -m MODULE ARGS


def _write(rel: str, content: str | bytes) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return setup


def _jsonl(rel: str, *rows: dict) -> Callable[[Path], None]:
    return _write(rel, "".join(json.dumps(r) + "\n" for r in rows))


def _all(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        for step in steps:
            step(tmp)
    return setup


def _symlink_loop(tmp: Path) -> None:
    (tmp / "refs").mkdir()
    os.symlink("gsm8k.yaml", tmp / "refs" / "gsm8k.yaml")


def _huge_jsonl(tmp: Path) -> None:
    line = (json.dumps(GSM8K_ROW) + "\n").encode()
    with open(tmp / "huge.jsonl", "wb") as out:
        for _ in range(3 * 2**20 // len(line)):  # 3 MiB, over the 1 MiB limit the case sets
            out.write(line)


def _earlier_run(tmp: Path) -> None:
    subprocess.run([sys.executable, "-m", "runner", *FAST, f"cache.path={tmp}/gen.sqlite", f"hydra.run.dir={tmp}/run"],
                   cwd=tmp, env=_env({}), capture_output=True, check=True)


def _model_dirs(tmp: Path) -> None:
    for name in ("empty", "badcfg", "unknown", "custom"):
        (tmp / name).mkdir()
    (tmp / "badcfg" / "config.json").write_text("{not json")
    (tmp / "unknown" / "config.json").write_text(json.dumps({"model_type": "nosuchmodel"}))
    (tmp / "custom" / "config.json").write_text(json.dumps({"model_type": "custom", "auto_map": {
        "AutoConfig": "x.Cfg", "AutoModelForCausalLM": "x.M"}}))


PASSWORDS = ("Pw1-first-f00", "Pw2-second-b4r", "Pw3-third-n4me")
CREDENTIALS = [f"backend.default_answer=http://a:{PASSWORDS[0]}@h1:8000/v1",
               f"backend.default_answer=https://b:{PASSWORDS[1]}@h2/v1"]


def _no_password(tmp: Path, rc: int, text: str) -> bool:
    """The run ended well and no password is in any file it left, nor on the terminal."""
    files = [p for p in tmp.rglob("*") if p.is_file()]
    return rc == 0 and not any(pw.encode() in p.read_bytes() for p in files for pw in PASSWORDS) and \
        not any(pw in text for pw in PASSWORDS)


def _said_unrelated(tmp: Path, rc: int, text: str) -> bool:
    """The job ran, said that its directory holds files no job wrote, and left them as they were."""
    report = tmp / "thesis" / "report.json"
    return rc in (0, 3, 4) and report.is_file() and "no job wrote" in report.read_text() and \
        (tmp / "thesis" / "chapter1.tex").read_text() == "mine"


def _well_formed(tmp: Path, rc: int, text: str) -> bool:
    """junit.xml parses, and no raw control character reached the terminal or a report."""
    from xml.etree import ElementTree as ET

    raw = ("\x1b", "\r", "\x00")
    try:
        ET.parse(tmp / "cmp" / "junit.xml")
    except (OSError, ET.ParseError):
        return False
    written = "".join((tmp / "cmp" / name).read_text() for name in ("report.txt", "junit.xml"))
    return not any(c in text + written for c in raw)


def _control_character_runs(tmp: Path) -> None:
    ids = [f"q{i:02d}" for i in range(30)] + [f"evil\x1b[31m{i}\r\x00" for i in range(10)]
    for name, wrong in (("a", False), ("b", True)):
        run = tmp / name
        run.mkdir()
        rows = [{"sample_id": i, "prediction": "", "target": "", "meta": {}, "prompt": f"question {i}?",
                 "score": 0.0 if wrong and i.startswith("evil") else 100.0} for i in ids]
        (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (run / "config.yaml").write_text("seed: 0\ntask: {name: toy, metric: accuracy, higher_is_better: true}\n")
        (run / "report.json").write_text(json.dumps({"task": "toy", "spec": {"extra_acc_spec": "dataset=local"}}))



ARC = ROOT / "tests" / "data" / "arc_easy" / "test.jsonl"
LM_EVAL = ["backend=fake", "task=lm_eval", "task.lm_eval_task=t", "task.include_path={tmp}/tasks", *QUIET,
           "task.num_samples=2"]
MARKER_MODULE = "import pathlib\npathlib.Path(__file__).parent.parent.joinpath('marker').write_text('ran')\n\n\n" \
                "def process_docs(dataset):\n    return dataset\n"


def _lm_eval_task(name: str = "t", code: str = "", extra: str = "") -> str:
    """A task over the ARC fixture; ``code``: the tag of a ``process_docs`` naming evil.process_docs (whose module
    writes {tmp}/marker on import)."""
    return (f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {ARC}\ntest_split: test\n"
            "output_type: multiple_choice\ndoc_to_text: \"Question: {{question}}\\nAnswer:\"\n"
            "doc_to_target: \"{{choices.label.index(answerKey)}}\"\ndoc_to_choice: \"{{choices.text}}\"\n"
            "metric_list:\n  - metric: acc\n" + (f"process_docs: {code} evil.process_docs\n" if code else "") + extra)


def _tasks(files: dict[str, str | bytes], evil_in: tuple[str, ...] = ("tasks",)) -> Callable[[Path], None]:
    """Task files under {tmp} (``{tmp}`` in their text replaced), and the marker-writing module in ``evil_in``."""
    def setup(tmp: Path) -> None:
        for rel, content in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.replace("{tmp}", str(tmp)).encode())
        for rel in evil_in:
            (tmp / rel).mkdir(parents=True, exist_ok=True)
            (tmp / rel / "evil.py").write_text(MARKER_MODULE)
    return setup


def _foreign_run(tmp: Path) -> None:
    """A run directory from someone else whose saved overrides grant trust to its task's code."""
    _tasks({"tasks/t.yaml": _lm_eval_task(code="!function")})(tmp)
    (tmp / "run" / ".hydra").mkdir(parents=True)
    overrides = [o.replace("{tmp}", str(tmp)) for o in LM_EVAL] + [
        "task.trust_include_code=true", "stats.extensions=1", f"cache.path={tmp}/gen.sqlite"]
    (tmp / "run" / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (tmp / "run" / "config.yaml").write_text(
        "task: {num_samples: 2, trust_include_code: true}\nmodel: {trust_remote_code: false}\n"
        "stats: {extensions: 1, extend: []}\n")


BOMB = "metadata:\n  a0: &a0 [" + ", ".join(["lol"] * 10) + "]\n" + "".join(
    f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))
SSTI = "{{ cycler.__init__.__globals__.os.system('touch {tmp}/marker') }}"

METRIC_SCRIPT = "import pathlib\npathlib.Path(__file__).resolve().parents[{up}].joinpath('marker').write_text('ran')\n"


def _metric_task(metric: str, extra: str = "") -> Callable[[Path], None]:
    """A task whose metric lm-eval would hand to ``evaluate.load``: {tmp}/m.py and {tmp}/d/d.py write the marker."""
    def setup(tmp: Path) -> None:
        _tasks({"tasks/t.yaml": _lm_eval_task().replace("  - metric: acc\n", f"  - metric: {metric}\n{extra}")},
               ())(tmp)
        (tmp / "m.py").write_text(METRIC_SCRIPT.format(up=0))
        (tmp / "d").mkdir()
        (tmp / "d" / "d.py").write_text(METRIC_SCRIPT.format(up=1))
    return setup


def _run_dir(overrides: list[str], task_setup: Callable[[Path], None] | None = None,
             base: tuple[str, ...] = (*FAST, "stats.extensions=1")) -> Callable[[Path], None]:
    """A run directory from someone else, planned for one extension, whose saved overrides are ``base`` and
    ``overrides``."""
    def setup(tmp: Path) -> None:
        if task_setup:
            task_setup(tmp)
        (tmp / "run" / ".hydra").mkdir(parents=True)
        base_ = [*base, f"cache.path={tmp}/gen.sqlite"]
        saved = [o.replace("{tmp}", str(tmp)) for o in [*base_, *overrides]]
        (tmp / "run" / ".hydra" / "overrides.yaml").write_text("".join(f"- '{o}'\n" for o in saved))
        (tmp / "run" / "config.yaml").write_text("task: {num_samples: 2}\nmodel: {trust_remote_code: false}\n"
                                                 "stats: {extensions: 1, extend: []}\n")
    return setup


def _fifo(rel: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        (tmp / rel).unlink(missing_ok=True)
        os.mkfifo(tmp / rel)
    return setup


def _lock_as(kind: str) -> Callable[[Path], None]:
    """``refs/.runner-record.lock`` as a directory, a dangling symlink, a FIFO, or a symlink to a file outside."""
    def setup(tmp: Path) -> None:
        lock = tmp / "refs" / ".runner-record.lock"
        lock.parent.mkdir()
        if kind == "directory":
            lock.mkdir()
        elif kind == "FIFO":
            os.mkfifo(lock)
        else:
            (tmp / "outside").mkdir()
            if kind == "symlink out":
                (tmp / "outside" / "precious").write_text("keep me\n")
            lock.symlink_to(tmp / "outside" / "precious")
    return setup


def _other_tables(tmp: Path) -> None:
    import sqlite3

    db = sqlite3.connect(tmp / "other.sqlite")
    db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, answer TEXT)")
    db.commit()
    db.close()


SECRETS = ("Tok-launch-env-5566", "Body-key-7788", "Query-pw-9911", "Frag-tok-2233", "Pw4-dirname-c4fe",
           "sk-pastedKEYabcdefghijklmnop1234", "Jwt-query-4455", "Pg-pass-6677")


def _no_secret(tmp: Path, rc: int, text: str) -> bool:
    """No secret of :data:`SECRETS` in any file the run left nor on the terminal (any exit status)."""
    files = [p for p in tmp.rglob("*") if p.is_file()]
    return not any(s.encode() in p.read_bytes() for p in files for s in SECRETS) and not any(s in text for s in SECRETS)


def _said_dropped(tmp: Path, rc: int, text: str) -> bool:
    """runner.extend said what it dropped, and nothing it dropped took effect."""
    return "dropped" in text and "env_set" in text and not (tmp / "marker").exists() and rc in (0, 3, 4)


MMLU_LOCAL = ["backend=fake", "task=mmlu", *QUIET, "task.dataset.source=local", "task.num_fewshot=0",
              "task.num_samples=2"]
UNWRITABLE = "/proc/sys/runner-x"
MMLU_SCORED = [*MMLU_LOCAL, f"task.dataset.local_path={MMLU_DIR}", "task.scoring=loglikelihood"]


def cases() -> list[Case]:
    foreign = ["+hydra.callbacks.x._target_=builtins.open", "hydra.callbacks.sweep._target_=os.system",
               "+hydra.callbacks={x:{_target_:builtins.print}}", "+hydra.callbacks.x._target_=hydra.utils.call",
               "hydra.launcher._target_=builtins.exec", "+hydra.job_logging.handlers.h.class=builtins.open",
               "+hydra.hydra_logging.handlers={h:{class:os.system}}"]
    out = [
        # ---- the command line and composition
        Case("unknown group option", ["quant=fp9"], "fp9"),
        Case("wrong type", [*FAST, "task.num_samples=abc"], "num_samples"),
        Case("-m with --cfg", ["-m", "task=mmlu,gsm8k", "--cfg", "job"], "cannot be combined"),
        *[Case(f"foreign code {o}", [*FAST, o], "outside the project") for o in foreign],
        Case("job_logging file handler truncates F",
             [*FAST, "hydra.job_logging.handlers.file.filename={tmp}/precious.txt", "+hydra.job_logging.handlers.file.mode=w"],
             "hydra.job_logging", _write("precious.txt", "keep me\n"), intact=["precious.txt"]),
        Case("job_logging handler filename", [*FAST, "hydra.job_logging.handlers.file.filename={tmp}/other.log"],
             "hydra.job_logging"),
        # ---- unknown keys
        *[Case(f"unknown key {o}", [*FAST, o], "unknown key") for o in (
            "+foo=1", "+model.foo=1", "+quant.foo=1", "+backend.foo=1", "+tracking.foo=1", "+cache.foo=1",
            "+reference.foo=1", "+sweep.foo=1", "+report.foo=1", "+task.num_sample=16", "+task.dataset.splt=test",
            "+stats.methd=paired", "+hydra.foo=1", "+hydra.job.foo=1")],
        Case("+gate.x without a gate", [*FAST, "+gate.tasks=x"], "gate"),
        # ---- values
        *[Case(f"value {o}", [*FAST, o], o.split("=")[0]) for o in (
            "reference.mode=maybe", "reference.against=yesterday", "task.alpha=1.5", "task.max_output_len=0",
            "task.max_input_len=-1", "task.max_batch_size=0", "cache.chunk_size=0", "seed=-1", "task.num_samples=0",
            "stats.method=bogus", "stats.margin_unit=bogus", "task.metric=bogus",
            "sweep.correction=bogus", "sweep.alpha=7", "task.max_output_len=100000", "task.max_input_len=10000000")],
        Case("value task.sigma=0", [*FAST, "task.sigma=0"], "sigma"),
        Case("value backend.num_threads=-1", [*FAST[1:], "backend=hf", "backend.num_threads=-1"], "backend.num_threads"),
        Case("value task.scoring=vibes", [*MMLU_LOCAL, f"task.dataset.local_path={MMLU_DIR}", "task.scoring=vibes"],
             "task.scoring"),
        Case("value task.dataset.source=bogus", [*FAST, "task.dataset.source=bogus"], "task.dataset.source"),
        # ---- names that become paths
        *[Case(f"name {o[:40]}", [*FAST, o], o.split("=")[0]) for o in (
            "task.name=../../x", "model.name=a/b", "quant.name=.hidden", "task.name=" + "x" * 300,
            "model.hf_id='<img src=x onerror=alert(1)>'")],
        # ---- data files
        Case("data: bad JSON line", [*QUIET, *GSM8K[:3], "task.dataset.local_path={tmp}/d.jsonl"], "local_path",
             _write("d.jsonl", '{"question": "q", "answer": "#### 1"}\n{bad json\n')),
        Case("data: not UTF-8 (gsm8k)", [*QUIET, *GSM8K[:3], "task.dataset.local_path={tmp}/d.jsonl"], "UTF-8",
             _write("d.jsonl", b"\xff\xfe\x00garbage\n")),
        Case("data: not UTF-8 (mmlu)", [*MMLU_LOCAL, "task.dataset.local_path={tmp}/d.jsonl"], "UTF-8",
             _write("d.jsonl", b'{"question": "\xff\xfe", "subject": "x", "choices": ["a","b"], "answer": 0}\n')),
        Case("data: not UTF-8 (perplexity .txt)", ["backend=fake", "task=perplexity", *QUIET, "task.dataset.source=local",
                                                   "task.dataset.local_path={tmp}/txt"], "UTF-8",
             _write("txt/a.txt", b"\xff\xfe garbage")),
        Case("data: empty file", [*QUIET, *GSM8K[:3], "task.dataset.local_path={tmp}/d.jsonl"], "local_path",
             _write("d.jsonl", "")),
        Case("data: null fields", [*QUIET, *GSM8K[:3], "task.dataset.local_path={tmp}/d.jsonl"], "malformed",
             _jsonl("d.jsonl", {"question": None, "answer": None})),
        Case("data: null subject (mmlu)", [*MMLU_LOCAL, "task.dataset.local_path={tmp}/d.jsonl"], "subject",
             _jsonl("d.jsonl", MMLU_ROW, MMLU_ROW | {"subject": None})),
        Case("data: answer true (gsm8k)", [*QUIET, *GSM8K[:3], "task.dataset.local_path={tmp}/d.jsonl"], "answer",
             _jsonl("d.jsonl", GSM8K_ROW, GSM8K_ROW | {"answer": True})),
        Case("data: answer true (mmlu)", [*MMLU_LOCAL, "task.dataset.local_path={tmp}/d.jsonl"], "answer",
             _jsonl("d.jsonl", MMLU_ROW, MMLU_ROW | {"answer": True})),
        Case("data: answer out of range (mmlu)", [*MMLU_LOCAL, "task.dataset.local_path={tmp}/d.jsonl"], "answer",
             _jsonl("d.jsonl", MMLU_ROW, MMLU_ROW | {"answer": "E"})),
        Case("data: missing path", [*QUIET, *GSM8K[:3], "task.dataset.local_path={tmp}/nothing.jsonl"], "does not exist"),
        Case("data: over the size limit", [*QUIET, *GSM8K[:3], "task.dataset.local_path={tmp}/huge.jsonl",
                                           "task.dataset.max_file_mb=1"], "max_file_mb", _huge_jsonl),
        # ---- tracking
        *[Case(f"tracking {uri}", [*FAST[:-2], "tracking=mlflow", "reference.mode=skip", f"tracking.tracking_uri={uri}"], want)
          for uri, want in (("file://{tmp}/mlruns", "tracking_uri"), ("foo://x", "tracking_uri"),
                            ("sqlite:///{tmp}", "file"), ("sqlite://relative.db", "sqlite:///"))],
        Case("tracking experiment empty", [*FAST[:-2], "tracking=mlflow", "reference.mode=skip", "tracking.tracking_uri=sqlite:///{tmp}/m.db",
                                           "tracking.experiment="], "experiment"),
        # ---- output and cache paths
        Case("output_dir unwritable", [*FAST, f"output_dir={UNWRITABLE}"], "output"),
        Case("hydra.run.dir=/proc/x", [*FAST, "hydra.run.dir=/proc/x"], "hydra.run.dir"),
        Case("hydra.run.dir read-only mount", [*FAST, "hydra.run.dir={tmp}/ro/run"], "Read-only file system",
             read_only="ro"),
        Case("hydra.run.dir on sysfs", [*FAST, "hydra.run.dir=/sys/runner-x"], "hydra.run.dir"),
        Case("hydra.run.dir an earlier run", [*FAST, "hydra.run.dir={tmp}/run"], "overwrite", _earlier_run,
             intact=["run/results.json"]),
        Case("cache.path unwritable", [*FAST, f"cache.path={UNWRITABLE}/gen.sqlite"], "cache"),
        Case("cache.path not a database", [*FAST, "cache.path={tmp}/x.sqlite"], "cache", _write("x.sqlite", "garbage")),
        Case("cache.path a directory", [*FAST, "cache.path={tmp}"], "cache"),
        # ---- references
        Case("refs: directory missing", [*FAST[:-1], "reference.mode=check", "reference.dir={tmp}/nowhere"], "reference"),
        Case("refs: unregistered model", [*FAST[:-1], "reference.mode=check", "model.hf_id=org/unregistered"], "no references"),
        *[Case(f"refs: malformed {i}", [*FAST[:-1], "reference.mode=record", "reference.dir={tmp}/refs"], "reference file",
               _write("refs/gsm8k.yaml", c)) for i, c in enumerate(["gsm8k: [unclosed", "just a string", b"\xff\xfe binary"])],
        Case("refs: symlink loop (check)", [*FAST[:-1], "reference.mode=check", "reference.dir={tmp}/refs"], "symlink loop",
             _symlink_loop),
        Case("refs: symlink loop (record)", [*FAST[:-1], "reference.mode=record", "reference.dir={tmp}/refs"], "symlink loop",
             _symlink_loop),
        # ---- checkpoints (backend=hf, refused before any weight is read)
        *[Case(f"model.path {d}", ["tracking=none", "reference.mode=skip", "task=gsm8k", "task.dataset.source=local",
                                   f"task.dataset.local_path={GSM8K_DIR}", "task.num_samples=2", f"model.path={{tmp}}/{d}"],
               want, _model_dirs) for d, want in (("missing", "does not exist"), ("empty", "config.json"),
                                                  ("badcfg", "model"), ("unknown", "model type"), ("custom", "trust_remote_code"))],
        # ---- served models
        Case("openai: api_key_env holds a key", [*FAST[1:], "backend=openai", "backend.base_url=http://127.0.0.1:9/v1",
                                                 "backend.api_key_env=sk-abcdefghijklmnopqrstuvwxyz123456"],
             "api_key_env"),
        # ---- round 4 (issue 39): inputs checked before they change a verdict, no tracebacks
        *[Case(f"tolerance {' '.join(o)}", [*FAST[:-2], "task.num_samples=6", "tracking=none", "reference.dir={tmp}/refs",
                                            *o], want, _recorded)
          for o, want in ((["stats.tolerance=1000"], "range"), (["stats.tolerance=0.05"], "fraction"),
                          (["stats.tolerance=500", "stats.tolerance_unit=percent"], "whole score"),
                          (["stats.tolerance=0.05", "stats.tolerance_unit=percent"], "fraction"))],
        Case("sequential looks of 2 samples", ["backend=fake", "task=perplexity", "tracking=none", "reference.dir={tmp}/refs",
                                               "task.num_samples=12", "stats.sequential.enabled=true",
                                               "stats.sequential.looks=6"], "too few samples", _ppl_reference),
        Case("task=lm_eval without lm_eval_task", ["backend=fake", "task=lm_eval", *QUIET], "task.lm_eval_task"),
        *[Case(f"lm-eval {name}", ["backend=fake", "task=lm_eval", f"task.lm_eval_task={name}",
                                   "task.include_path={tmp}/tasks", "task.num_samples=2", *QUIET, *extra], want, _lm_tasks)
          for name, extra, want in (("unknown_key", [], "refuses the task's definition"),
                                    ("not_a_dataset", [], "could not"),
                                    ("no_bleu", ["task.metric=bleu"], "does not compute this metric"))],
        Case("report.junit a directory", [*FAST, "report.junit={tmp}"], "report.junit"),
        Case("report.markdown unwritable", [*FAST, f"report.markdown={UNWRITABLE}/r.md"], "report.markdown"),
        Case("refs: reference.dir a file", [*FAST[:-1], "reference.mode=check", "reference.dir={tmp}/refs.yaml"],
             "not a directory", _write("refs.yaml", "x: 1\n")),
        *[Case(f"compare: {name}", ["@compare", "{tmp}/a", "{tmp}/b", "--tolerance", "2", "--output-dir", "{tmp}/out"],
               want, _compare_runs(**change)) for name, change, want in (
            ("duplicated sample_id", {"b_rows": [*_ROWS, _ROWS[0] | {"score": 100.0}]}, "twice"),
            ("task: 5", {"b_config": {"task": 5}}, "task"),
            ("meta: 5", {"b_rows": [_ROWS[0] | {"meta": 5}, *_ROWS[1:]]}, "meta"),
            ("string decision", {"b_report": {"decision": "GO"}}, "decision"))],
        *[Case(f"compare: lm-eval {field}", ["@compare", "{tmp}/samples_t_2026-01-01T10-00-00.000000.jsonl",
                                             "{tmp}/samples_t_2026-01-01T10-00-00.000000.jsonl", "--tolerance", "2",
                                             "--output-dir", "{tmp}/out"], field, _lm_samples(field, value))
          for field, value in (("metrics", 5), ("arguments", "x"))],
        Case("compare: unwritable --output-dir", ["@compare", "{tmp}/a", "{tmp}/a", "--output-dir", f"{UNWRITABLE}"],
             "--output-dir", _compare_runs()),
        Case("compare: unwritable --markdown", ["@compare", "{tmp}/a", "{tmp}/a", "--tolerance", "2", "--output-dir",
                                                "{tmp}/out", "--markdown", f"{UNWRITABLE}/r.md"], "--markdown", _compare_runs()),
        *[Case(f"extend: {name}", ["@extend", "{tmp}/run", "4"], "config.yaml", _all(
            _write("run/config.yaml", text), _write("run/.hydra/overrides.yaml", "[]\n")))
          for name, text in (("unparsable config", "stats: {extensions: ["), ("incomplete config", "task: {}\n"))],
        # ---- issue 39: secrets in every output, well-formed outputs
        # (a log-likelihood task: the fake backend's default_answer is never an answer, so only config holds it)
        Case("secrets: two URL overrides with passwords", [*MMLU_SCORED, *CREDENTIALS, "report.junit={tmp}/j.xml",
                                                           "report.markdown={tmp}/m.md", "hydra.run.dir={tmp}/run"],
             check=_no_password),
        Case("secrets: a sweep of URLs with passwords", ["-m", *MMLU_SCORED, CREDENTIALS[0] + f",http://c:{PASSWORDS[2]}@h3/v1",
                                                         "report.junit={tmp}/j.xml", "hydra.sweep.dir={tmp}/sweep"],
             check=_no_password),
        Case("compare: control characters in sample ids", ["{tmp}/a", "{tmp}/b", "--tolerance", "2",
                                                            "--output-dir", "{tmp}/cmp"],
             setup=_control_character_runs, check=_well_formed, module="runner.compare"),
        # ---- lm-eval task files (issue 39): code runs only with task.trust_include_code=true on this command line
        *[Case(f"lm-eval: {what}", LM_EVAL, want, _tasks(files, evil_in), absent=["marker"]) for what, want, files, evil_in in (
            ("include ../ outside the include path", "outside the include path",
             {"tasks/t.yaml": "include: ../outside/base.yaml\ntask: t\n",
              "outside/base.yaml": _lm_eval_task("base", "!function")}, ("outside",)),
            ("include of an absolute path", "outside the include path",
             {"tasks/t.yaml": "include: {tmp}/outside/base.yaml\ntask: t\n",
              "outside/base.yaml": _lm_eval_task("base", "!function")}, ("outside",)),
            ("%TAG directive (!f!ction)", "trust_include_code",
             {"tasks/t.yaml": "%TAG !f! !fun\n---\n" + _lm_eval_task(code="!f!ction")}, ("tasks",)),
            ("URI-escaped tag (!fun%63tion)", "trust_include_code", {"tasks/t.yaml": _lm_eval_task(code="!fun%63tion")},
             ("tasks",)),
            ("UTF-16 task file", "trust_include_code", {"tasks/t.yaml": _lm_eval_task(code="!function").encode("utf-16")},
             ("tasks",)),
            ("'#' in a quoted string before the tag", "trust_include_code",
             {"tasks/t.yaml": "{" + ", ".join(["task: t", "dataset_path: json", f"dataset_kwargs: {{data_files: {{test: '{ARC}'}}}}",
                                               "test_split: test", "output_type: multiple_choice",
                                               "doc_to_text: 'Q # {{question}}'", "doc_to_target: 0",
                                               "doc_to_choice: '{{choices.text}}'", "metric_list: [{metric: acc}]",
                                               "process_docs: !function evil.process_docs"]) + "}\n"}, ("tasks",)),
            ("billion laughs in metadata", "task.yaml_max_nodes", {"tasks/t.yaml": _lm_eval_task(extra=BOMB)}, ()),
            ("prompt template reaching Python", "sandbox",
             {"tasks/t.yaml": _lm_eval_task().replace('doc_to_text: "', 'doc_to_text: "' + SSTI)},
             ()),
            ("an include cycle", "cycle", {"tasks/t.yaml": "include: u.yaml\ntask: t\n",
                                           "tasks/u.yaml": "include: t.yaml\ntask: u\n"}, ()))],
        Case("output_dir: a directory of unrelated files", [*FAST, "output_dir={tmp}/thesis"],
             setup=_write("thesis/chapter1.tex", "mine"), check=_said_unrelated),
        Case("runner.extend: a foreign run's trust_include_code", ["{tmp}/run", "2"], "does not inherit", _foreign_run,
             absent=["marker"], module="runner.extend"),
        # ---- round 5 (issue 48): code from a task's metrics, a run directory or a cache; secrets outside a URL;
        # waits and hangs; the tracebacks
        *[Case(f"lm-eval metric: {what}", LM_EVAL, want, _metric_task(metric, extra), absent=["marker"])
          for what, metric, extra, want in (
            ("a metric script path", "{tmp}/m.py", "", "trust_include_code"),
            ("a metric directory D/D.py", "{tmp}/d", "", "trust_include_code"),
            ("hf_evaluate: true", "{tmp}/d", "    hf_evaluate: true\n", "trust_include_code"),
            ("module:function", "os:system", "", "trust_include_code"),
            ("a string aggregation", "acc", "    aggregation: bogus\n", "aggregation"))],
        Case("lm-eval: process_results: os.system", LM_EVAL, "process_results",
             _tasks({"tasks/t.yaml": _lm_eval_task(extra="process_results: os.system\n")}, ()), absent=["marker"]),
        Case("lm-eval: a template loop", LM_EVAL, "renders too much",
             _tasks({"tasks/t.yaml": _lm_eval_task().replace('doc_to_text: "', 'doc_to_text: "{% for i in range(99999) %}'
                                                              '{% for j in range(99999) %}x{% endfor %}{% endfor %}')},
                    ()), timeout=60),
        Case("lm-eval: task.yaml_max_kb huge", [*LM_EVAL, "task.yaml_max_kb=99999999999999"], "task.yaml_max_kb",
             _tasks({"tasks/t.yaml": _lm_eval_task()}, ())),
        Case("runner.extend: a foreign run's metric script", ["{tmp}/run", "2"], "trust_include_code",
             _run_dir([], _metric_task("{tmp}/m.py"), (*LM_EVAL, "stats.extensions=1")), absent=["marker"],
             module="runner.extend"),
        Case("runner.extend: a foreign run's launch command", ["{tmp}/run", "2"], "backend.base_url",
             _run_dir(["backend=openai", "backend.launch.command=touch {tmp}/marker"]), absent=["marker"],
             module="runner.extend"),
        Case("runner.extend: a foreign run's env_set", ["{tmp}/run", "2"],
             setup=_run_dir(["+hydra.job.env_set.TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1", "+hydra.job.env_set.HF_HOME={tmp}/x"]),
             check=_said_dropped, module="runner.extend"),
        Case("runner.extend: config.yaml a FIFO", ["{tmp}/run", "2"], "FIFO", _all(_run_dir([]), _fifo("run/config.yaml")),
             module="runner.extend"),
        Case("runner.extend: report.json a FIFO", ["{tmp}/run", "2"], setup=_all(_run_dir([]), _fifo("run/report.json")),
             check=lambda tmp, rc, text: rc in (0, 3, 4), module="runner.extend", timeout=60),
        Case("secrets: launch.env and extra_body", [*FAST[1:-2], "backend=openai", "backend.base_url=http://127.0.0.1:9/v1",
                                                    f"+backend.launch.env.HF_TOKEN={SECRETS[0]}",
                                                    f"+backend.extra_body.api_key={SECRETS[1]}", "backend.max_retries=0",
                                                    "task.max_input_len=256", "task.max_output_len=8", "tracking=none",
                                                    "reference.mode=skip", "hydra.run.dir={tmp}/run"], check=_no_secret),
        Case("secrets: query keys and a fragment", [*MMLU_SCORED, "backend.default_answer='http://h/v1?pw="
                                                    f"{SECRETS[2]}&jwt={SECRETS[6]}#token={SECRETS[3]}'",
                                                    "report.junit={tmp}/j.xml", "hydra.run.dir={tmp}/run"], check=_no_secret),
        Case("secrets: a key pasted into api_key_env", [*FAST[1:], "backend=openai", "backend.base_url=http://127.0.0.1:9/v1",
                                                        f"backend.api_key_env={SECRETS[5]}", "hydra.run.dir={tmp}/run"],
             check=lambda tmp, rc, text: rc == 1 and "api_key_env" in text and _no_secret(tmp, rc, text)),
        Case("secrets: --cfg job", [*FAST[1:], "backend=openai", "backend.base_url=http://127.0.0.1:9/v1",
                                    f"+backend.extra_body.api_key={SECRETS[1]}", "--cfg", "job"],
             check=lambda tmp, rc, text: rc == 0 and "api_key: REDACTED" in text and _no_secret(tmp, rc, text)),
        Case("secrets: override_dirname in a directory name", ["-m", *MMLU_SCORED, f"backend.default_answer=http://u:{SECRETS[4]}@h/v1",
                                                               "hydra.sweep.dir={tmp}/sweep",
                                                               "hydra.sweep.subdir=${hydra.job.override_dirname}"],
             "directory named from the overrides"),
        Case("tracking: postgresql without its driver", [*FAST[:-2], "tracking=mlflow", "reference.mode=skip",
                                                          f"tracking.tracking_uri=postgresql://u:{SECRETS[7]}@db:5432/x"],
             "driver"),
        Case("tracking: a full MLflow disk", [*FAST[:-2], "tracking=mlflow", "reference.mode=skip",
                                              "tracking.tracking_uri=sqlite:///{tmp}/full/mlflow.db"], "MLflow store",
             small="full"),
        Case("hydra.run.dir on a full disk", [*FAST, "hydra.run.dir={tmp}/full/run"], "No space left", small="full"),
        Case("cache.path a file with other tables", [*FAST, "cache.path={tmp}/other.sqlite"], "not a generation cache",
             _other_tables),
        *[Case(f"refs: the record lock {kind}", [*FAST[:-1], "reference.mode=record", "reference.dir={tmp}/refs"],
               "not a regular file", _lock_as(kind), intact=["outside/precious"] if kind == "symlink out" else [])
          for kind in ("directory", "dangling symlink", "FIFO", "symlink out")],
        Case("value seed=2**64", [*FAST, "seed=18446744073709551616"], "seed"),
        Case("value backend.delay_s=1e300", [*FAST, "backend.delay_s=1e300"], "backend.delay_s"),
        Case("value backend.num_threads=1000", [*FAST[1:], "backend=hf", "backend.num_threads=1000"], "cores"),
        # ---- round 5's last gaps: templates that run without end, catastrophic patterns over the answers, an engine
        # changed on disk
        *[Case(f"lm-eval: {what}", LM_EVAL, "renders for too long",
               _tasks({"tasks/t.yaml": _lm_eval_task().replace('doc_to_text: "', f'doc_to_text: "{loop}')}, ()),
               timeout=90)
          for what, loop in (
            ("a template loop with an empty body", "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}"
                                                   "{% endfor %}"),
            ("a recursive macro in a template", "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
                                                "{% endmacro %}{{ f(40) }}"))],
        *[Case(f"lm-eval: a catastrophic pattern in {what}", [*LM_EVAL, ALMOST], "ran too long",
               _tasks({"tasks/t.yaml": GENERATING + extra}, ()), timeout=120)
          for what, extra in (
            ("a regex filter", "filter_list:\n  - name: letters\n    filter:\n      - function: regex\n"
                               "        regex_pattern: \"(a+)+$\"\n      - function: take_first\n"),
            ("exact_match's regexes_to_ignore", "    regexes_to_ignore: [\"(a|aa)+$\"]\n"))],
        Case("trtllm: a cached engine changed on disk", TRTLLM_JOB, setup=_changed_engine,
             env={"PYTHONPATH": "{tmp}/fake:" + str(ROOT), "RUNNER_CACHE_DIR": "{tmp}/cache"},
             check=lambda tmp, rc, text: rc == 0 and "changed on disk; building it again" in text
             and not list((tmp / "cache" / "engines").glob("*/engine/plugin.so"))),
    ]
    return out


GENERATING = (f"task: t\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {ARC}\ntest_split: test\n"
              "output_type: generate_until\ndoc_to_text: \"Question: {{question}}\\nAnswer:\"\n"
              "doc_to_target: \"{{answerKey}}\"\ngeneration_kwargs:\n  until: [\"\\n\"]\n  max_gen_toks: 8\n"
              "metric_list:\n  - metric: exact_match\n")
ALMOST = "backend.default_answer=" + "a" * 40 + "b"  # (a+)+$ backtracks for hours over it in Python's re
TRTLLM_JOB = ["backend=trtllm", "model.path={tmp}/model", *FAST[1:]]


def _changed_engine(tmp: Path) -> None:
    """The TensorRT-LLM double (built from the committed manifest) on PYTHONPATH, an engine built into the cache by
    one run, then a file added to it (a library TensorRT-LLM would load)."""
    sys.path.insert(0, str(ROOT))
    from tests.helpers import trtllm_double

    manifest = trtllm_double.load(trtllm_double.manifest_paths()[0]) | {"tensorrt_llm_version": "1.2.0"}
    trtllm_double.write_package(manifest, tmp / "fake")
    model = tmp / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}))
    from runner.files.assets import smollm2_checkpoint

    for name in ("tokenizer.json", "tokenizer_config.json"):  # the embedded model's tokenizer: the runner reads it
        (model / name).write_bytes((smollm2_checkpoint() / name).read_bytes())
    (model / "model.safetensors").write_bytes(b"\0" * 4096)
    env = _env({"PYTHONPATH": f"{tmp}/fake:{ROOT}", "RUNNER_CACHE_DIR": f"{tmp}/cache"})
    subprocess.run([sys.executable, "-m", "runner", *[a.replace("{tmp}", str(tmp)) for a in TRTLLM_JOB],
                    f"hydra.run.dir={tmp}/first"], cwd=tmp, env=env, capture_output=True, check=True)
    (engine,) = (tmp / "cache" / "engines").glob("*/engine")
    (engine / "plugin.so").write_bytes(b"\x7fELF")


_ROWS = [{"sample_id": f"s{i}", "score": s, "prompt": f"q{i}"} for i, s in enumerate((0.0, 100.0, 100.0, 0.0))]


def _compare_runs(b_rows: list | None = None, b_config: dict | None = None,
                  b_report: dict | None = None) -> Callable[[Path], None]:
    config = {"task": {"name": "gsm8k", "metric": "accuracy"}, "seed": 0}
    return _all(_jsonl("a/samples.jsonl", *_ROWS), _write("a/config.yaml", json.dumps(config)),
                _jsonl("b/samples.jsonl", *(b_rows or _ROWS)), _write("b/config.yaml", json.dumps(b_config or config)),
                _write("b/report.json", json.dumps(b_report or {})))


def _lm_samples(field: str, value: object) -> Callable[[Path], None]:
    rows = [{"doc_id": i, "metrics": ["acc"], "acc": 1.0, "arguments": {}} for i in range(2)]
    rows[1][field] = value
    return _jsonl("samples_t_2026-01-01T10-00-00.000000.jsonl", *rows)


def _recorded(tmp: Path) -> None:
    subprocess.run([sys.executable, "-m", "runner", *FAST[:-2], "task.num_samples=6", "tracking=none",
                    "reference.mode=record", f"reference.dir={tmp}/refs", f"cache.path={tmp}/gen.sqlite",
                    f"hydra.run.dir={tmp}/rec"], cwd=tmp, env=_env({}), capture_output=True, check=True)


def _ppl_reference(tmp: Path) -> None:
    (tmp / "refs").mkdir()
    (tmp / "refs" / "perplexity.yaml").write_text(
        "HuggingFaceTB/SmolLM2-135M-Instruct:\n  - extra_acc_spec: corpus=pydoc_topics-32e8236b,min_tokens=256,"
        "max_input_len=512\n    perplexity: 1.0078\n    num_samples: 37\n")


def _lm_tasks(tmp: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.helpers.lm_eval_tasks import write_tasks

    tasks = write_tasks(tmp)
    arc = (tasks / "arc_local.yaml").read_text()
    (tasks / "unknown_key.yaml").write_text(arc.replace("task: arc_local", "task: unknown_key") + "bogus_key: 1\n")
    (tasks / "not_a_dataset.yaml").write_text(arc.replace("task: arc_local", "task: not_a_dataset")
                                              .replace("dataset_path: json", "dataset_path: /etc/hostname"))
    (tasks / "no_bleu.yaml").write_text(arc.replace("task: arc_local", "task: no_bleu")
                                        .replace("metric: acc_norm", "metric: bleu"))


def _env(extra: dict[str, str]) -> dict[str, str]:
    return os.environ | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                         "MLFLOW_TRACKING_URI": ""} | extra


def classify(case: Case, tmp: Path, rc: int, text: str, before: dict[str, bytes]) -> str:
    if any((tmp / rel).exists() for rel in case.absent):
        return "code ran"
    if "Traceback (most recent call last)" in text:
        return "traceback"
    if rc == 0:
        return "accepted"
    changed = [rel for rel, data in before.items() if not (tmp / rel).exists() or (tmp / rel).read_bytes() != data]
    clear = "error:" in text and "where:" in text and case.expect.lower() in text.lower()
    if case.name.startswith(("unknown group", "wrong type")):
        clear = case.expect in text  # Hydra's own composition errors carry no where/fix block
    return "message" if clear and not changed else "weak"


def run_case(case: Case, verbose: bool) -> str:
    with tempfile.TemporaryDirectory(prefix="bad-input-") as name:
        tmp = Path(name)
        if case.setup:
            case.setup(tmp)
        before = {rel: (tmp / rel).read_bytes() for rel in case.intact}
        args = [a.replace("{tmp}", name) for a in case.args]
        if case.module == "runner" and not any(a.startswith("cache.path") for a in args):
            args.append(f"cache.path={name}/gen.sqlite")
        if "--cfg" in args:
            args = [a for a in args if not a.startswith("cache.path")]
        module = {"@compare": "runner.compare", "@extend": "runner.extend"}.get(args[0] if args else "", case.module)
        if args and args[0] in ("@compare", "@extend"):
            args = args[1:]
        if module != "runner":
            args = [a for a in args if not a.startswith("cache.path")]
        command = [sys.executable, "-m", module, *args]
        if case.read_only:
            (tmp / case.read_only).mkdir()
            command = ["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o ro none "$1" && shift && exec "$@"', "sh",
                       str(tmp / case.read_only), *command]
        if case.small:
            (tmp / case.small).mkdir()
            command = ["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=64k none "$1" && shift && exec "$@"',
                       "sh", str(tmp / case.small), *command]
        try:
            proc = subprocess.run(command, cwd=tmp, env=_env({k: v.replace("{tmp}", name) for k, v in case.env.items()}),
                                  capture_output=True, text=True, timeout=case.timeout)
            rc, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            rc, text = 124, "timed out"
        outcome = classify(case, tmp, rc, text, before)
        if case.check is not None and outcome not in ("traceback", "code ran"):
            outcome = "message" if case.check(tmp, rc, text) else "weak"
        if verbose and outcome != "message":
            print("\n".join("    " + line for line in text.strip().splitlines()[-12:]))
        return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run only the cases whose name holds this text")
    parser.add_argument("--verbose", action="store_true", help="print the end of the output of every case not a message")
    args = parser.parse_args()
    counts = {"message": 0, "weak": 0, "accepted": 0, "traceback": 0, "code ran": 0}
    start = time.monotonic()
    for case in cases():
        if args.only and args.only not in case.name:
            continue
        outcome = run_case(case, args.verbose)
        counts[outcome] += 1
        print(f"{outcome:10} {case.name}", flush=True)
    total = sum(counts.values())
    print(f"\n{total} cases in {time.monotonic() - start:.0f} s\n\n| outcome | cases |\n|---|---|")
    for outcome, count in counts.items():
        print(f"| {outcome} | {count} |")


if __name__ == "__main__":
    main()
