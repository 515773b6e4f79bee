"""The ``hf`` backend's settings (the ``backend=hf`` config group's schema): dtype, device, batch limits and the
switches of its exact fast paths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

DTYPES = ("auto", "bfloat16", "float16", "float32")


@dataclass
class HFBackendConfig:
    """transformers + PyTorch, on CPU or CUDA."""

    _target_: str = "runner.backends.hf.backend.HFBackend"
    name: str = "hf"
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: str = "auto"  # auto | bfloat16 | float16 | float32
    # rows and padded tokens of one forward call; null: chosen for the device (a CPU: 64 and 16384; a GPU: 256 rows
    # and tokens sized from its memory, with each batch's KV positions capped to fit: devices.batch_budget), then
    # measured (batch_search)
    batch_size: Optional[int] = None
    max_batch_tokens: Optional[int] = None
    # both limits null: a log-likelihood job with enough rows times a few shapes on its first rows, keeps the fastest
    # (runner/backends/hf/shape_search.py); the same answers up to the arithmetic's rounding (identical in float32)
    batch_search: bool = True
    # what one forward call costs, in padded tokens: batches are cut to minimise padding + calls
    batch_call_cost_tokens: int = 64
    prefix_cache: bool = True  # run a prompt prefix shared by several rows (a few-shot block) once
    # tokenize every prompt of a bulk call in one tokenizer call (the same ids, without a call per text)
    bulk_tokenize: bool = True
    # score each batch's log-likelihood rows with one gather and one host transfer, not torch calls per row
    batch_scoring: bool = True
    # cut generation batches counting every decode step (up to max_tokens) as a forward call, not the prefill alone:
    # fewer, wider batches. null: on CUDA only (a GPU decode step costs about the same for 1 row or 64; on a CPU it
    # grows with the rows, and rows that stopped early keep paying: the GSM8K tests took 28 s with it, 21 s without)
    decode_aware_batching: Optional[bool] = None
    # a generation batch's KV cache allocated once for all its positions (prefill and every decode step) and written
    # in place, instead of concatenated (a copy of the whole cache in every layer at every step)
    preallocated_cache: bool = True
    # CPU compute threads; null: the cores free when the job starts (runner/backends/threads.py: all cores spin-waiting
    # on a busy host answer several times slower than one)
    num_threads: Optional[int] = None
    attn_implementation: str = "sdpa"
    # keep the loaded (and quantized) model for the next job of this process that asks for the same one
    # (a sweep's tasks on one spec); false frees it when the job ends
    reuse_loaded_model: bool = True
    # a quantized spec's weight quantizers applied once to the stored weights (ModelOpt's fold_weight) instead of
    # in every forward call: the same weights, several times faster simulated quantization; false keeps them live
    fold_quantized_weights: bool = True
