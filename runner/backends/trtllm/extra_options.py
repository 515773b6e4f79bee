"""``backend.extra_llm_api_options``: keyword arguments passed through to TensorRT-LLM's ``LLM``.

As ``trtllm-eval --extra_llm_api_options`` does, the option is a YAML file (a path) or a mapping whose
keys are ``LLM`` arguments (``sampler_type``, ``cuda_graph_config``, ``speculative_config``...). What
the runner derives from the config (the model, the spec, the task's limits, the parallel layout,
guided decoding) stays the runner's: such keys are refused, so the reference key cannot drift from
what runs. ``kv_cache_config`` entries are merged into the runner's KV cache settings (except
``dtype``, which the quant spec sets). ``speculative_config`` becomes the decoding config TensorRT-LLM
expects and its ``decoding_type`` the effective spec's ``spec_dec_algo``, as upstream's accuracy suite
keys its references. Every option given is recorded in ``BackendInfo.details`` (report, MLflow tags).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import yaml
from omegaconf import DictConfig, OmegaConf

from runner.contract.errors import ConfigError

WHERE = "backend.extra_llm_api_options"
# LLM arguments the runner sets from the config, with where to set them instead.
RUNNER_OWNED = {
    "model": "model.path", "tokenizer": "model.path", "revision": "model.revision", "dtype": "backend dtype (auto)",
    "trust_remote_code": "model.trust_remote_code", "tensor_parallel_size": "backend.tensor_parallel_size",
    "pipeline_parallel_size": "backend.pipeline_parallel_size", "quant_config": "quant=<option>",
    "calib_config": "quant.calib_*", "build_config": "task limits and backend.max_num_tokens",
    "max_batch_size": "task.max_batch_size", "max_num_tokens": "backend.max_num_tokens",
    "max_seq_len": "task.max_input_len / max_output_len", "max_input_len": "task.max_input_len",
    "guided_decoding_backend": "task.guided_decoding", "skip_tokenizer_init": "(the runner tokenizes)",
}


def load(value: Any) -> dict[str, Any]:
    """The options as a plain dict: None/empty -> {}; a path -> its YAML mapping; a mapping as is."""
    if value is None or value == "" or value == {}:
        return {}
    if isinstance(value, (str, Path)):

        path = Path(value).expanduser()
        if not path.is_file():
            raise ConfigError("the extra LLM API options file does not exist", where=WHERE, given=str(path),
                              fix="point it at a YAML file of LLM arguments, or give a mapping")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise ConfigError("the extra LLM API options file is not valid YAML", where=WHERE,
                              given=f"{path}: {err}".splitlines()[0]) from None
    else:

        data = OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("extra LLM API options must be a mapping of LLM arguments", where=WHERE,
                          given=type(data).__name__)
    owned = sorted(set(data) & set(RUNNER_OWNED))
    if owned:
        raise ConfigError("these LLM arguments are set by the runner from the config", where=WHERE, given=", ".join(owned),
                          fix="; ".join(f"{k}: set {RUNNER_OWNED[k]}" for k in owned))
    kv = data.get("kv_cache_config")
    if kv is not None and (not isinstance(kv, dict) or "dtype" in kv):
        raise ConfigError("kv_cache_config must be a mapping without dtype (the quant spec sets the KV cache dtype)",
                          where=f"{WHERE}.kv_cache_config", given=json.dumps(kv, default=str)[:200],
                          fix="use a quant option with kv_cache_quant_algo (e.g. quant=fp8_kv)")
    spec = data.get("speculative_config")
    if spec is not None and not (isinstance(spec, dict) and spec.get("decoding_type")):
        raise ConfigError("speculative_config must be a mapping with a decoding_type", where=f"{WHERE}.speculative_config",
                          given=json.dumps(spec, default=str)[:200],
                          allowed="decoding_type: Eagle, MTP, NGram, Draft_Target, ... (TensorRT-LLM's names)")
    return dict(data)


def split(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(kv_cache_config entries, the other LLM arguments)``."""
    rest = {k: v for k, v in options.items() if k != "kv_cache_config"}
    return dict(options.get("kv_cache_config") or {}), rest


def llm_kwargs(options: dict[str, Any]) -> dict[str, Any]:
    """The non-KV arguments as ``LLM`` takes them: ``speculative_config`` built with TensorRT-LLM's own
    ``DecodingBaseConfig.from_dict`` (the conversion ``trtllm-eval`` applies to the same YAML)."""
    _, rest = split(options)
    spec = rest.get("speculative_config")
    if isinstance(spec, dict):
        from tensorrt_llm.llmapi.llm_args import DecodingBaseConfig

        rest["speculative_config"] = DecodingBaseConfig.from_dict(dict(spec))
    return rest


def spec_dec_algo(options: dict[str, Any]) -> Optional[str]:
    """The requested speculative decoding algorithm (``decoding_type``), or None."""
    spec = options.get("speculative_config")
    return str(spec["decoding_type"]) if isinstance(spec, dict) else None


def details(options: dict[str, Any], source: Any) -> dict[str, str]:
    """What the report and MLflow tags record about the options."""
    if not options:
        return {}
    out = {"extra_llm_api_options": json.dumps(options, sort_keys=True, default=str)}
    if isinstance(source, (str, Path)):
        out["extra_llm_api_options_file"] = str(Path(source).expanduser())
    return out
