"""Plain-text corpora for the perplexity task: where the documents come from and what they are called.

A corpus is a list of :class:`Document` in source order. Sources (``task.dataset.source``):

- ``packaged``: the Python language reference topics shipped with every CPython as
  ``pydoc_data.topics`` (the text ``help("topic")`` prints: 79 English documents on 3.11, 465k
  characters). Nothing to download and nothing outside the interpreter. Its text changes with the
  interpreter's release, so the corpus label carries a hash of the content;
- ``hub``: a Hugging Face dataset id (``DKYoon/SlimPajama-6B``, upstream's) and split;
- ``local``: a directory of ``.txt`` files (one document per file), a ``.jsonl``/``.json``/
  ``.parquet``/``.csv`` file, or a directory with ``<split>*`` files of those types (directly, in
  ``task.dataset.hub_config`` or in ``data/``, the layout of a Hub snapshot such as SlimPajama-6B).

The label names the corpus in the reference key (``extra_acc_spec``), so a perplexity measured on one
corpus is never compared with one measured on another.
"""

from __future__ import annotations

import hashlib
import platform
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evaluators.data.sources import check_source, resolve_source, split_loader
from runner.contract.errors import DataError

UPSTREAM_CORPUS = "SlimPajama-6B"
PACKAGED_NAME = "pydoc_topics"
TEXT_SUFFIXES = (".txt",)


@dataclass(frozen=True)
class Document:
    id: str  # stable across runs: "<split>/<row>", "pydoc/<topic>" or the file's relative path
    text: str


@dataclass(frozen=True)
class Corpus:
    documents: list[Document]
    label: str  # the corpus name in the reference key
    source: str  # packaged | hub | local (what `auto` resolved to)
    description: str  # for the log and the recorded reference


def content_hash(documents: list[Document]) -> str:
    digest = hashlib.sha256()
    for doc in documents:
        digest.update(doc.id.encode() + b"\0" + doc.text.encode() + b"\0")
    return digest.hexdigest()


def packaged_corpus() -> Corpus:
    """``pydoc_data.topics``, one document per topic in sorted topic order."""

    from pydoc_data.topics import topics  # lazy: a 700 kB module, read only for the packaged corpus

    docs = [Document(f"pydoc/{name}", str(topics[name])) for name in sorted(topics)]
    sha = content_hash(docs)
    return Corpus(docs, f"{PACKAGED_NAME}-{sha[:8]}", "packaged",
                  f"pydoc_data.topics of Python {platform.python_version()} ({len(docs)} topics, sha256 {sha[:16]})")


def load_corpus(config: Any) -> Corpus:
    """The documents ``config.dataset`` names, with the label ``config.corpus`` overrides."""
    ds = config.dataset
    check_source(ds)
    source = resolve_source(ds)
    if source == "packaged":
        corpus = packaged_corpus()
    elif source == "local" and ds.local_path and _txt_dir(Path(ds.local_path).expanduser()):
        corpus = _txt_corpus(Path(ds.local_path).expanduser())
    else:
        corpus = _table_corpus(config, source)
    if config.corpus:
        corpus = Corpus(corpus.documents, str(config.corpus), corpus.source, corpus.description)
    if not corpus.documents:
        raise DataError("the corpus holds no documents", where="task.dataset", given=corpus.description)
    return corpus


def _txt_dir(path: Path) -> bool:
    return path.is_dir() and any(p.suffix in TEXT_SUFFIXES for p in path.rglob("*"))


def _txt_corpus(root: Path) -> Corpus:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)
    docs = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise DataError("a text file is not valid UTF-8", where="task.dataset.local_path",
                            given=f"{path} (byte {err.start})", fix="convert it to UTF-8 or remove it") from None
        docs.append(Document(path.relative_to(root).as_posix(), text))
    return Corpus(docs, root.resolve().name, "local", f"{len(docs)} .txt files under {root.resolve()}")


def _alternatives() -> str:
    return ("use the packaged corpus (task=perplexity, task.dataset.source=packaged), or a local copy "
            "(task.dataset.source=local task.dataset.local_path=/path/to/SlimPajama-6B or a directory of .txt files)")


def _table_corpus(config: Any, source: str) -> Corpus:
    ds = config.dataset
    if source == "local" and ds.local_path and not ds.hub_config:
        local = Path(ds.local_path).expanduser()
        if local.is_dir() and (local / "data").is_dir() and not any(local.glob(f"{ds.split}*")):
            ds = replace(ds, hub_config="data")  # a Hub snapshot keeps its files under data/
    _, load = split_loader(ds, source, _alternatives())
    table = load(ds.split)
    where = f"{ds.local_path if source == 'local' else ds.hub_id} [{ds.split}]"
    column = config.text_column
    if column not in table.column_names:
        raise DataError(f"the dataset has no '{column}' column", where=where,
                        given=sorted(table.column_names), fix="set task.text_column to the column holding the text")
    docs = []
    for row, text in enumerate(table[column]):
        if text is None:
            continue
        if not isinstance(text, str):
            raise DataError(f"malformed row: '{column}' is not a string", where=f"{where}, row {row}",
                            given=repr(text)[:200], fix="fix or drop the row in the source data")
        docs.append(Document(f"{ds.split}/{row}", text))
    if source == "hub":
        name = ds.hub_id.rsplit("/", 1)[-1] if ds.hub_id.rsplit("/", 1)[-1] == UPSTREAM_CORPUS else ds.hub_id
        description = f"{ds.hub_id} [{ds.split}]"
    else:
        path = Path(ds.local_path).expanduser().resolve()
        name = path.stem if path.is_file() else path.name
        description = f"{path} [{ds.split}]"
    label = name if ds.split == "test" else f"{name}/{ds.split}"
    return Corpus(docs, label, source, description)

