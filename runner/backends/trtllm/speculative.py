"""Speculative decoding on TensorRT-LLM's PyTorch backend: the config as the LLM API takes it, and the
acceptance length read back from the LLM's iteration statistics.

``backend.speculative_config`` is the mapping ``LLM(speculative_config=...)`` takes through
``DecodingBaseConfig.from_dict`` (``decoding_type``, ``max_draft_len``, ``speculative_model_dir``...), the
same as ``backend.extra_llm_api_options.speculative_config`` (one of the two, not both). With it the
backend asks for ``enable_iter_perf_stats=True`` and, after each ``generate``, drains ``llm.get_stats()``:
every iteration record whose ``specDecodingStats`` has ``numDraftTokens > 0`` adds its
``numAcceptedTokens`` and ``numRequestsWithDraftTokens``. The mean acceptance length is
``(accepted + steps) / steps`` with steps the summed request count, the formula of upstream's
``compute_acceptance_length`` (``tests/integration/defs/accuracy/accuracy_core.py``): each request that
drafted in an iteration emits its accepted draft tokens plus the one token the target model adds.
Not run on a GPU here: tested against the TensorRT-LLM test double (tests/helpers/trtllm_double.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

from omegaconf import DictConfig, OmegaConf

from runner.contract.errors import ConfigError

STATS_TIMEOUT_S = 2  # upstream's get_stats(timeout=2)


def merge(options: dict[str, Any], speculative_config: Any) -> dict[str, Any]:
    """``options`` with ``backend.speculative_config`` as its ``speculative_config`` (refused when both set it)."""
    if speculative_config is None or speculative_config == {}:
        return options
    spec = OmegaConf.to_container(speculative_config, resolve=True) if isinstance(speculative_config, DictConfig) \
        else speculative_config
    if "speculative_config" in options:
        raise ConfigError("the speculative config is given twice", where="backend.speculative_config",
                          given="backend.speculative_config and backend.extra_llm_api_options.speculative_config",
                          fix="keep one of them")
    if not (isinstance(spec, dict) and spec.get("decoding_type")):
        raise ConfigError("speculative_config must be a mapping with a decoding_type", where="backend.speculative_config",
                          given=json.dumps(spec, default=str)[:200],
                          allowed="decoding_type: Eagle, MTP, NGram, Draft_Target, ... (TensorRT-LLM's names)")
    return options | {"speculative_config": dict(spec)}


def _records(stats: Iterable[Any]) -> list[dict[str, Any]]:
    out = []
    for stat in stats or ():
        if isinstance(stat, str):  # some releases hand the records over as JSON text
            stat = json.loads(stat)
        if isinstance(stat, dict):
            out.append(stat)
    return out


@dataclass
class AcceptanceCounts:
    """Accepted draft tokens and drafting requests summed over the speculative iterations seen so far."""

    accepted: int = 0
    steps: int = 0

    def add(self, stats: Iterable[Any]) -> None:
        for stat in _records(stats):
            spec = stat.get("specDecodingStats") or {}
            if spec.get("numDraftTokens", 0) > 0:
                self.accepted += int(spec.get("numAcceptedTokens", 0))
                self.steps += int(spec.get("numRequestsWithDraftTokens", 0))

    @property
    def length(self) -> float | None:
        return (self.accepted + self.steps) / self.steps if self.steps else None


def read_stats(llm: Any) -> list[Any]:
    """The iteration records the LLM has queued since the last call (``get_stats`` drains them)."""
    return list(llm.get_stats(timeout=STATS_TIMEOUT_S) or [])
