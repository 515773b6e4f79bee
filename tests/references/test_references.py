"""Reference lookup (TensorRT-LLM's first-match rule) and recording (round trip with provenance)."""

from __future__ import annotations

import math
import shutil
import textwrap
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from runner.contract.errors import ConfigError, ReferenceError_
from runner.contract.spec import AccuracySpec
from runner.references.recording import LOCK_NAME, record
from runner.references.store import Reference, default_reference_dir, list_specs, lookup, metric_key
from runner.stats.data.hypothesis import HypothesisParams

MMLU_DEFAULTS = HypothesisParams(alpha=0.05, beta=0.2, sigma=50.0, num_samples=4096)
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def write(dir_: Path, task: str, text: str) -> Path:
    path = dir_ / f"{task}.yaml"
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def load(path: Path):
    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))


@pytest.fixture
def ref_dir(tmp_path: Path) -> Path:
    write(
        tmp_path,
        "mmlu",
        """
        # top comment
        org/model:
          - accuracy: 50.0            # default spec
          - quant_algo: FP8
            accuracy: 49.0
            some_unrelated_key: hello
          - quant_algo: FP8           # shadowed: the entry above matches first
            accuracy: 1.0
          - quant_algo: FP8
            kv_cache_quant_algo: FP8
            accuracy: 48.5
            alpha: 0.01
            sigma: 40
            num_samples: 1000
            reference_note: measured on a smaller subset
          - dtype: float16
            accuracy: 49.5
            threshold: 45.0
          - quant_algo: NVFP4
            accuracy: 47.0
            higher_is_better: false
            beta: 0.1
          - quant_algo: INT8_BROKEN
            score: 3
        other/model:
          - accuracy: 10
        """,
    )
    write(
        tmp_path,
        "voxpopuli",
        """
        org/asr:
          - wer: 7.5
          - quant_algo: FP8
            accuracy: 8.0
        """,
    )
    return tmp_path


def test_default_reference_dir_is_project_references() -> None:
    d = default_reference_dir()
    assert d.name == "references"
    assert (d.parent / "runner" / "references" / "store.py").is_file()


def test_metric_key() -> None:
    assert metric_key("accuracy") == "accuracy"
    assert metric_key("Accuracy") == "accuracy"
    assert metric_key("WER") == "wer"
    assert metric_key("rouge1") == "rouge1"


def test_default_spec_and_dtype_default_auto(ref_dir: Path) -> None:
    ref = lookup(ref_dir, "mmlu", "accuracy", "org/model", AccuracySpec(), MMLU_DEFAULTS)
    assert isinstance(ref, Reference)
    assert ref.value == 50.0 and ref.index == 0
    assert ref.params == MMLU_DEFAULTS
    assert ref.threshold is None and ref.note is None
    assert ref.path == ref_dir / "mmlu.yaml"
    # an entry without a dtype key means dtype auto, so dtype float16 does NOT match entry 0
    ref = lookup(ref_dir, "mmlu", "accuracy", "org/model", AccuracySpec(dtype="float16"), MMLU_DEFAULTS)
    assert ref.index == 4 and ref.value == 49.5


def test_first_match_wins_and_unrelated_keys_ignored(ref_dir: Path) -> None:
    ref = lookup(ref_dir, "mmlu", "accuracy", "org/model", AccuracySpec(quant_algo="FP8"), MMLU_DEFAULTS)
    assert ref.index == 1 and ref.value == 49.0


def test_all_spec_keys_take_part(ref_dir: Path) -> None:
    # FP8 weights + FP8 KV must not stop at the FP8-only entry (its kv key defaults to None)
    spec = AccuracySpec(quant_algo="FP8", kv_cache_quant_algo="FP8")
    assert lookup(ref_dir, "mmlu", "accuracy", "org/model", spec, MMLU_DEFAULTS).index == 3
    with pytest.raises(ReferenceError_):
        lookup(ref_dir, "mmlu", "accuracy", "org/model", AccuracySpec(quant_algo="FP8", spec_dec_algo="EAGLE3"), MMLU_DEFAULTS)


def test_per_entry_overrides(ref_dir: Path) -> None:
    spec = AccuracySpec(quant_algo="FP8", kv_cache_quant_algo="FP8")
    ref = lookup(ref_dir, "mmlu", "accuracy", "org/model", spec, MMLU_DEFAULTS)
    assert ref.params == HypothesisParams(alpha=0.01, beta=0.2, sigma=40.0, num_samples=1000)
    assert ref.note == "measured on a smaller subset"
    ref = lookup(ref_dir, "mmlu", "accuracy", "org/model", AccuracySpec(quant_algo="NVFP4"), MMLU_DEFAULTS)
    assert ref.params.higher_is_better is False and ref.params.beta == 0.1
    ref = lookup(ref_dir, "mmlu", "accuracy", "org/model", AccuracySpec(dtype="float16"), MMLU_DEFAULTS)
    assert ref.threshold == 45.0


def test_bad_override_names_file_and_entry(tmp_path: Path) -> None:
    write(tmp_path, "mmlu", "m:\n  - accuracy: 5\n    alpha: 1.5\n")
    with pytest.raises(ConfigError) as info:
        lookup(tmp_path, "mmlu", "accuracy", "m", AccuracySpec(), MMLU_DEFAULTS)
    msg = str(info.value)
    assert "alpha" in msg and "mmlu.yaml" in msg and "entry 0" in msg


def test_metric_named_key_and_accuracy_fallback(ref_dir: Path) -> None:
    defaults = HypothesisParams(alpha=0.05, beta=0.2, sigma=50.0, num_samples=32, higher_is_better=False)
    assert lookup(ref_dir, "voxpopuli", "WER", "org/asr", AccuracySpec(), defaults).value == 7.5
    assert lookup(ref_dir, "voxpopuli", "WER", "org/asr", AccuracySpec(quant_algo="FP8"), defaults).value == 8.0


def test_entry_without_metric_is_a_clear_error(ref_dir: Path) -> None:
    with pytest.raises(ReferenceError_) as info:
        lookup(ref_dir, "mmlu", "accuracy", "org/model", AccuracySpec(quant_algo="INT8_BROKEN"), MMLU_DEFAULTS)
    msg = str(info.value)
    assert "mmlu.yaml" in msg and "entry 6" in msg and "accuracy" in msg


def test_missing_file_error(tmp_path: Path) -> None:
    with pytest.raises(ReferenceError_) as info:
        lookup(tmp_path, "gsm8k", "accuracy", LLAMA, AccuracySpec(), MMLU_DEFAULTS)
    msg = str(info.value)
    assert str(tmp_path / "gsm8k.yaml") in msg
    assert "reference.mode=record" in msg and "python -m runner" in msg


def test_missing_model_lists_registered_models(ref_dir: Path) -> None:
    with pytest.raises(ReferenceError_) as info:
        lookup(ref_dir, "mmlu", "accuracy", "nobody/here", AccuracySpec(), MMLU_DEFAULTS)
    msg = str(info.value)
    assert "nobody/here" in msg and "org/model" in msg and "other/model" in msg
    assert "reference.mode=record" in msg


def test_no_match_lists_every_registered_spec(ref_dir: Path) -> None:
    spec = AccuracySpec(quant_algo="W4A16_AWQ", kv_cache_quant_algo="INT8")
    with pytest.raises(ReferenceError_) as info:
        lookup(ref_dir, "mmlu", "accuracy", "org/model", spec, MMLU_DEFAULTS)
    msg = str(info.value)
    assert spec.describe() in msg
    for registered in list_specs(ref_dir, "mmlu", "org/model"):
        assert registered.describe() in msg
    assert "default (dtype=auto, no quantization)" in msg
    assert "quant_algo=FP8, kv_cache_quant_algo=FP8" in msg
    assert "reference.mode=record" in msg


def test_list_specs(ref_dir: Path) -> None:
    specs = list_specs(ref_dir, "mmlu", "org/model")
    assert specs[0] == AccuracySpec()
    assert specs[1] == AccuracySpec(quant_algo="FP8")
    assert specs[4] == AccuracySpec(dtype="float16")
    assert len(specs) == 7
    assert list_specs(ref_dir, "mmlu", "nobody/here") == []
    assert list_specs(ref_dir, "absent_task", "org/model") == []


def test_shipped_mmlu_references() -> None:
    d = default_reference_dir()
    spec = AccuracySpec(quant_algo="FP8", kv_cache_quant_algo="FP8")
    ref = lookup(d, "mmlu", "accuracy", LLAMA, spec, MMLU_DEFAULTS)
    assert ref.value == 67.87
    assert lookup(d, "mmlu", "accuracy", LLAMA, AccuracySpec(), MMLU_DEFAULTS).value == 68.17
    assert lookup(d, "mmlu", "accuracy", LLAMA, AccuracySpec(quant_algo="FP8"), MMLU_DEFAULTS).value == 67.93
    extra = AccuracySpec(quant_algo="FP8", extra_acc_spec="temperature=0.8,top_p=0.95")
    assert lookup(d, "mmlu", "accuracy", LLAMA, extra, MMLU_DEFAULTS).value == 64.62
    nvfp4_kv = AccuracySpec(quant_algo="FP8", kv_cache_quant_algo="NVFP4")
    assert lookup(d, "mmlu", "accuracy", LLAMA, nvfp4_kv, MMLU_DEFAULTS).value == 66.45
    w4a8 = AccuracySpec(quant_algo="W4A8_AWQ")
    assert lookup(d, "mmlu", "accuracy", "mistralai/Mistral-7B-Instruct-v0.3", w4a8, MMLU_DEFAULTS).value == 60.04
    awq_int8 = AccuracySpec(quant_algo="W4A16_AWQ", kv_cache_quant_algo="INT8")
    assert lookup(d, "mmlu", "accuracy", "meta-llama/Llama-3.2-1B", awq_int8, MMLU_DEFAULTS).value == 31.29
    data = load(d / "mmlu.yaml")
    assert len(data) == 52  # upstream's 51 model keys (b35ac1b) + the embedded SmolLM2
    assert sum(len(v) for k, v in data.items() if k != "HuggingFaceTB/SmolLM2-135M-Instruct") == 133


def test_shipped_smollm2_references_carry_their_per_sample_scores() -> None:
    from runner.references import samples as reference_samples

    d = default_reference_dir()
    for extra in ("dataset=packaged", "scoring=loglikelihood,dataset=packaged"):
        ref = lookup(d, "mmlu", "accuracy", "HuggingFaceTB/SmolLM2-135M-Instruct",
                     AccuracySpec(extra_acc_spec=extra), MMLU_DEFAULTS)
        assert ref.params.num_samples == 512 and ref.recorded["dataset_source"] == "packaged"
        rows = reference_samples.load_rows(d, ref.recorded["samples"], ref.recorded["samples_sha256"])
        assert len(rows) == ref.recorded["num_samples"] == 513
        assert all(r.prompt_sha256 for r in rows.values())  # pairing can check it compares the same prompts
        assert sum(r.score for r in rows.values()) / len(rows) == pytest.approx(ref.value, abs=1e-3)


# ----------------------------------------------------------------------------- record

COMMENTED = """\
# header comment stays
zeta/first-model:  # model comment
  - accuracy: 40.0   # default
  - quant_algo: FP8
    accuracy: 39.0
    alpha: 0.01      # an override that must survive
alpha/second-model:
  - accuracy: 30.0
"""


@pytest.fixture
def commented(tmp_path: Path) -> Path:
    path = tmp_path / "refs" / "mmlu.yaml"
    path.parent.mkdir()
    path.write_text(COMMENTED, encoding="utf-8")
    return path.parent


PROV = {"date": "2025-01-01", "backend": "hf", "versions": {"transformers": "5.0.0"}, "num_samples": 256}


def test_record_updates_matching_entry_in_place(commented: Path) -> None:
    path = record(commented, "mmlu", "accuracy", "zeta/first-model", AccuracySpec(quant_algo="FP8"), 41.234567, PROV)
    text = path.read_text(encoding="utf-8")
    assert "# header comment stays" in text
    assert "# model comment" in text and "# default" in text and "# an override that must survive" in text
    assert text.index("zeta/first-model") < text.index("alpha/second-model")  # order kept, not sorted
    data = load(path)
    entries = data["zeta/first-model"]
    assert len(entries) == 2
    assert entries[1]["accuracy"] == 41.2346  # rounded to 4 decimals
    assert entries[1]["alpha"] == 0.01
    assert entries[1]["recorded"] == PROV
    assert list(entries[1]) == ["quant_algo", "accuracy", "alpha", "recorded"]
    assert entries[0] == {"accuracy": 40.0}
    # the updated entry reads back, with its override, and 'recorded' is ignored by lookup
    ref = lookup(commented, "mmlu", "accuracy", "zeta/first-model", AccuracySpec(quant_algo="FP8"), MMLU_DEFAULTS)
    assert ref.value == 41.2346 and ref.params.alpha == 0.01 and ref.index == 1


def test_record_replaces_previous_provenance(commented: Path) -> None:
    spec = AccuracySpec()
    record(commented, "mmlu", "accuracy", "alpha/second-model", spec, 31.0, {"date": "a", "mlflow_run_id": "r1"})
    path = record(commented, "mmlu", "accuracy", "alpha/second-model", spec, 32.0, {"date": "b"})
    entries = load(path)["alpha/second-model"]
    assert entries == [{"accuracy": 32.0, "recorded": {"date": "b"}}]


def test_record_appends_only_non_default_spec_keys(commented: Path) -> None:
    spec = AccuracySpec(quant_algo="FP8", kv_cache_quant_algo="FP8")  # no exact match: FP8-only entry differs
    path = record(commented, "mmlu", "accuracy", "zeta/first-model", spec, 38.5, PROV, extra={"num_samples": 256})
    entries = load(path)["zeta/first-model"]
    assert len(entries) == 3
    assert entries[2] == {
        "quant_algo": "FP8",
        "kv_cache_quant_algo": "FP8",
        "accuracy": 38.5,
        "num_samples": 256,
        "recorded": PROV,
    }
    assert list(entries[2])[:3] == ["quant_algo", "kv_cache_quant_algo", "accuracy"]
    ref = lookup(commented, "mmlu", "accuracy", "zeta/first-model", spec, MMLU_DEFAULTS)
    assert ref.index == 2 and ref.value == 38.5 and ref.params.num_samples == 256
    assert "# header comment stays" in path.read_text(encoding="utf-8")


def test_record_new_model_key(commented: Path) -> None:
    path = record(commented, "mmlu", "accuracy", "HuggingFaceTB/SmolLM2-135M-Instruct", AccuracySpec(), 27.123, PROV)
    data = load(path)
    assert list(data) == ["zeta/first-model", "alpha/second-model", "HuggingFaceTB/SmolLM2-135M-Instruct"]
    assert data["HuggingFaceTB/SmolLM2-135M-Instruct"] == [{"accuracy": 27.123, "recorded": PROV}]


def test_record_into_missing_file(tmp_path: Path) -> None:
    ref_dir = tmp_path / "new" / "refs"
    spec = AccuracySpec(dtype="float32")
    prov = {"date": "2025-01-01", "path": Path("/x/y"), "tags": ("a", "b")}
    path = record(ref_dir, "mmlu", "accuracy", "some/model", spec, 25.0, prov)
    assert path == ref_dir / "mmlu.yaml"
    assert load(path) == {
        "some/model": [{"dtype": "float32", "accuracy": 25.0, "recorded": {"date": "2025-01-01", "path": "/x/y", "tags": ["a", "b"]}}]
    }
    assert path.read_text(encoding="utf-8").startswith("#")
    assert lookup(ref_dir, "mmlu", "accuracy", "some/model", spec, MMLU_DEFAULTS).value == 25.0
    assert not [p for p in ref_dir.iterdir() if p.name not in ("mmlu.yaml", LOCK_NAME)]  # no temp files left behind


def test_record_metric_key_for_other_metrics(tmp_path: Path) -> None:
    path = record(tmp_path, "voxpopuli", "WER", "org/asr", AccuracySpec(), 7.123456789, {"date": "d"})
    assert load(path) == {"org/asr": [{"wer": 7.1235, "recorded": {"date": "d"}}]}


def test_record_rejects_conflicting_extra_and_nan(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        record(tmp_path, "mmlu", "accuracy", "m", AccuracySpec(), 1.0, {}, extra={"quant_algo": "FP8"})
    with pytest.raises(ValueError):
        record(tmp_path, "mmlu", "accuracy", "m", AccuracySpec(), math.nan, {})


def test_record_on_copy_of_shipped_file_keeps_upstream_entries(tmp_path: Path) -> None:
    shutil.copy(default_reference_dir() / "mmlu.yaml", tmp_path / "mmlu.yaml")
    before = load(tmp_path / "mmlu.yaml")
    record(tmp_path, "mmlu", "accuracy", "example/new-model", AccuracySpec(), 30.0, PROV)
    after = load(tmp_path / "mmlu.yaml")
    assert {k: v for k, v in after.items() if k in before} == before
    text = (tmp_path / "mmlu.yaml").read_text(encoding="utf-8")
    assert "TensorRT-LLM" in text.splitlines()[0] or "TensorRT-LLM" in "".join(text.splitlines()[:3])
    # upstream-style indentation is preserved
    assert "meta-llama/Llama-3.1-8B-Instruct:\n  - accuracy: 68.17\n  - spec_dec_algo: Eagle\n    accuracy: 68.20\n" in text


BETWEEN = """\
first/model:
  - accuracy: 40.0   # default
  # introduces the FP8 entry
  - quant_algo: FP8
    accuracy: 41
# introduces the second model

second/model:
  - accuracy: 30.0
# end of file
"""


def test_record_keeps_comments_between_blocks_in_place(tmp_path: Path) -> None:
    path = tmp_path / "mmlu.yaml"
    path.write_text(BETWEEN, encoding="utf-8")
    record(tmp_path, "mmlu", "accuracy", "first/model", AccuracySpec(), 40.5, {"date": "d"})  # grow entry 0
    record(tmp_path, "mmlu", "accuracy", "first/model", AccuracySpec(dtype="float16"), 39.5, {"date": "d"})  # append
    record(tmp_path, "mmlu", "accuracy", "new/model", AccuracySpec(), 20.0, {"date": "d"})  # new model key
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()

    def at(fragment: str) -> int:
        return next(i for i, line in enumerate(lines) if fragment in line)

    assert at("accuracy: 40.5") < at("date: d") < at("# introduces the FP8 entry") < at("quant_algo: FP8")
    assert at("dtype: float16") < at("# introduces the second model") < at("second/model:")
    assert at("new/model:") < at("# end of file")
    assert "accuracy: 40.5   # default" in text
    data = load(path)
    assert [e.get("dtype", "auto") for e in data["first/model"]] == ["auto", "auto", "float16"]
    assert data["first/model"][0] == {"accuracy": 40.5, "recorded": {"date": "d"}}


def test_recording_into_a_file_of_comments_only_keeps_them(tmp_path):
    (tmp_path / "t.yaml").write_text("# what this file holds\n# and how entries are recorded\n")
    record(tmp_path, "t", "accuracy", "org/m", AccuracySpec(), 50.0, {"date": "2026-11-23"})
    text = (tmp_path / "t.yaml").read_text()
    assert text.startswith("# what this file holds\n# and how entries are recorded\n") and "org/m:" in text


def _record_many(ref_dir: str, writer: int, count: int) -> None:
    for i in range(count):
        record(ref_dir, "mmlu", "accuracy", f"writer{writer}/model{i}", AccuracySpec(), 50.0 + i, {"writer": writer})


def test_two_processes_recording_into_one_directory_keep_every_entry(tmp_path: Path) -> None:
    """Each process reads the file, adds its entry and writes it back; under the lock none is lost."""
    import multiprocessing

    context = multiprocessing.get_context("fork")  # ruamel is imported already: each child starts at once
    writers = [context.Process(target=_record_many, args=(str(tmp_path), w, 12)) for w in range(2)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(60)
    assert [p.exitcode for p in writers] == [0, 0]
    data = YAML(typ="safe").load((tmp_path / "mmlu.yaml").read_text())
    assert sorted(data) == sorted(f"writer{w}/model{i}" for w in range(2) for i in range(12))
    assert [e["accuracy"] for e in data["writer1/model7"]] == [57.0]
