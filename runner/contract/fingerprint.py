"""Where a score was measured: the host fingerprint written with every recorded entry and every run.

A model that did not change can still score differently on another processor, in another compute dtype, with
other batches, threads, kernels or parallel degree. The fingerprint names those settings so that a report can say
where the reference was measured, where this run was, and what differs. It is flat text (``key: value``) so it
goes unchanged into YAML, JSON and tracker tags.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping

from runner.contract.backend import BackendInfo

FIELDS = ("backend", "processor", "device", "gpus", "compute_dtype", "threads", "batch_budget", "tensor_parallel",
          "pipeline_parallel", "attention", "concurrency", "server", "torch", "transformers", "tensorrt_llm",
          "modelopt")
"""The fingerprint's keys, in the order a report lists them; a backend fills those that apply to it."""
VERSIONS = ("torch", "transformers", "tensorrt_llm", "modelopt")
"""The library versions taken from :attr:`BackendInfo.versions`."""
ANSWER_NEUTRAL = ("batch_budget",)
"""Keys whose difference changes no computed value by design on the backends that report it; still shown."""


def processor() -> str:
    """The CPU this process runs on, as the kernel names it, with its logical core count."""
    name = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    name = name or platform.processor() or platform.machine() or "unknown"
    return f"{name}, {os.cpu_count() or 0} cores"


def fingerprint(info: BackendInfo, fields: Mapping[str, str]) -> dict[str, str]:
    """The fingerprint of a loaded backend: what it reports (``info``, and the backend's own ``fields``: compute
    dtype, threads, batch budget, parallel degree...) with the host's processor; empty values are left out."""
    found = {"backend": info.name, "processor": processor(), "device": info.device}
    found |= {key: str(info.versions[key]) for key in VERSIONS if info.versions.get(key)}
    found |= {str(k): str(v) for k, v in fields.items() if v not in (None, "")}
    return {key: found[key] for key in FIELDS if key in found} | {k: v for k, v in found.items() if k not in FIELDS}


def differences(reference: Mapping[str, str], run: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """``(key, reference's value, run's value)`` for every key either side names and the two disagree on, in
    :data:`FIELDS` order; a key one side lacks reads ``-`` there."""
    keys = [k for k in FIELDS if k in reference or k in run] + sorted(
        (set(reference) | set(run)) - set(FIELDS))
    return [(k, str(reference.get(k, "-")), str(run.get(k, "-"))) for k in keys
            if str(reference.get(k, "-")) != str(run.get(k, "-"))]


def describe(fp: Mapping[str, str]) -> str:
    """One line: the device (or processor), compute dtype, threads, batch budget, parallel degree and versions."""
    parts = [fp.get("device", "?")]
    if "cpu" in parts[0] and fp.get("processor"):
        parts[0] = f"{parts[0]} ({fp['processor']})"
    named = {"compute_dtype": "", "threads": "threads ", "batch_budget": "batches ", "tensor_parallel": "tp ",
             "pipeline_parallel": "pp ", "attention": "attention ", "concurrency": "concurrency ", "server": "server "}
    parts += [f"{label}{fp[k]}" for k, label in named.items() if fp.get(k)]
    parts += [f"{k} {fp[k]}" for k in VERSIONS if fp.get(k)]
    return f"{fp.get('backend', '?')}: " + ", ".join(parts)


def describe_differences(diffs: list[tuple[str, str, str]]) -> str:
    """``compute_dtype float32 -> bfloat16; threads 16 -> 2``, or ``nothing`` when the two agree."""
    return "; ".join(f"{k} {a} -> {b}" for k, a, b in diffs) or "nothing"
