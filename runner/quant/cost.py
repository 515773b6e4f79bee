"""What building a quantized model costs on a CPU, said before it is paid.

Calibration runs the model forward over the calibration tokens (max calibration: FP8, INT8 SmoothQuant, KV-cache
scales) or, for AWQ, searches each layer's scales over them (about ten candidate scales a batch). Either way its
time grows about linearly in tokens x the parameters of the linear layers, so a rate in seconds per token per
parameter measured once carries to another model and another calibration size. The priors below were measured
with the embedded 135M model (134.5 M linear parameters, lm_head included) on a 2-core AMD EPYC
(docs/own-model.md, "What CPU runs cost"); each build that runs logs its own rate, and later estimates use the
median of the logged ones (:func:`rate_from_runs`), so the figure follows the host it runs on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from runner.quant.algos import AWQ_ALGOS, needs_calibration
from runner.quant.calibration import calib_num_samples

PRIOR_S_PER_TOKEN_PARAM = {"max": 2.0e-11, "awq": 2.2e-10}
"""Seconds per calibration token per linear parameter on a 2-core CPU: max calibration 43 s for 64 x 256 tokens
(idle host; 14 min for 512 x 512 on a host at load 8: 2.4e-11), AWQ 474 s for 32 x 512 tokens (bfloat16)."""


def kind(quant: Any) -> str:
    """The calibration's kind: ``awq`` (a scale search) or ``max`` (forward passes that record ranges)."""
    return "awq" if quant.quant_algo in AWQ_ALGOS else "max"


def calibration_tokens(quant: Any) -> int:
    """The most tokens the spec calibrates on: its samples (AWQ: at most 32) x ``calib_max_seq_length``."""
    return calib_num_samples(quant) * int(quant.calib_max_seq_length)


def linear_parameters(config: Mapping[str, Any]) -> int | None:
    """Parameters of a decoder's linear layers (attention, MLP, lm_head) from its ``config.json``; None for a
    config without the usual fields (the cost is then not estimated)."""
    try:
        hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
        inner, vocab, heads = int(config["intermediate_size"]), int(config["vocab_size"]), int(config["num_attention_heads"])
    except (KeyError, TypeError, ValueError):
        return None
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    return layers * (attention + 3 * hidden * inner) + vocab * hidden


def model_parameters(location: str) -> int | None:
    """:func:`linear_parameters` of the checkpoint at ``location`` (a local directory); None when it is not one."""
    path = Path(location).expanduser() / "config.json"
    try:
        return linear_parameters(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def rate_from_runs(metrics: Iterable[Mapping[str, float]]) -> tuple[float | None, int]:
    """The median seconds per token per parameter of earlier builds (their ``quant_calib_time_s``,
    ``quant_calib_tokens`` and ``quant_model_params`` metrics), and how many there were."""
    rates = sorted(m["quant_calib_time_s"] / (m["quant_calib_tokens"] * m["quant_model_params"]) for m in metrics
                   if m.get("quant_calib_tokens") and m.get("quant_model_params") and "quant_calib_time_s" in m)
    return (rates[len(rates) // 2] if rates else None), len(rates)


def calibration_seconds(quant: Any, params: int | None, measured: float | None = None, runs: int = 0) -> tuple[float | None, str]:
    """Seconds the spec's calibration is expected to take on a CPU, and where the figure comes from; None (with why)
    for a spec that does not calibrate or a model whose size is unknown. ``measured``: a rate from earlier builds
    (:func:`rate_from_runs`), which wins over the prior."""
    if not needs_calibration(quant):
        return None, "no calibration (weights only)"
    if params is None:
        return None, "the model's size is unknown before it loads (no local config.json)"
    tokens = calibration_tokens(quant)
    rate = measured if measured is not None else PRIOR_S_PER_TOKEN_PARAM[kind(quant)]
    source = (f"the median rate of {runs} earlier build{'s' if runs != 1 else ''} on this host" if measured is not None
              else f"a prior measured on a 2-core CPU, refined by each build")
    return rate * tokens * params, (f"{calib_num_samples(quant)} x {quant.calib_max_seq_length} calibration tokens, "
                                    f"{params / 1e6:.0f} M parameters, {source}")
