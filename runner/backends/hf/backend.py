"""The ``hf`` backend: transformers + PyTorch on CPU or CUDA.

Throughput comes from four things, all exact (no approximation of the model):
- identical inputs are computed once (MMLU's four letter continuations share one forward pass);
- rows sharing a token prefix (the few-shot block of a task's subject) run it once; every batch
  of those rows starts from that one KV cache (runner/backends/hf/batching.py);
- batches are cut from length-sorted rows to minimise padded tokens plus a per-call cost;
- only the positions whose logits are needed go through the vocabulary projection.
Generation uses the same prefill and then a plain KV-cached decode loop, with one seeded random
generator per request so sampled outputs do not depend on how requests were batched.
"""

from __future__ import annotations

import copy
import logging
import platform
import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Optional, Sequence, TYPE_CHECKING

from runner.backends.hf import batching, guided, loaded as loaded_models
from runner.backends.models import load_failure, resolve_model_source
from runner.backends.prompting import encode_request, loglikelihood_tokens
from runner.contract.backend import Backend, Capabilities, GpuNeeds, BackendInfo, ChatFormat, TaskLimits
from runner.contract.errors import ConfigError, ModelError
from runner.contract.requests import cut_at_stop, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult
from runner.contract.spec import AccuracySpec
from runner.quant import modelopt as hf_quant

if TYPE_CHECKING:
    import torch

DTYPES = ("auto", "bfloat16", "float16", "float32")


log = logging.getLogger("runner")


@dataclass
class HFBackendConfig:
    """transformers + PyTorch, on CPU or CUDA."""

    _target_: str = "runner.backends.hf.backend.HFBackend"
    name: str = "hf"
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: str = "auto"  # auto | bfloat16 | float16 | float32
    batch_size: int = 64
    max_batch_tokens: int = 16384
    # what one forward call costs, in padded tokens: batches are cut to minimise padding + calls
    batch_call_cost_tokens: int = 64
    prefix_cache: bool = True  # run a prompt prefix shared by several rows (a few-shot block) once
    num_threads: Optional[int] = None
    attn_implementation: str = "sdpa"
    # keep the loaded (and quantized) model for the next job of this process that asks for the same one
    # (a sweep's tasks on one spec); false frees it when the job ends
    reuse_loaded_model: bool = True


def cpu_has_native_bf16() -> bool:
    """True when the CPU computes bfloat16 natively (AMX or AVX512-BF16): then bf16 is 3-4x faster."""
    try:
        with open("/proc/cpuinfo") as handle:
            flags = handle.read()
    except OSError:
        return platform.machine() == "arm64"
    return "avx512_bf16" in flags or "amx_bf16" in flags


class HFBackend(Backend):
    """transformers causal LM. Construct cheaply; load on ``__enter__``."""

    name = "hf"
    capabilities = Capabilities(loglikelihood=True, token_counter=True, per_request_seeds=True)

    @classmethod
    def gpu_needs(cls, config: Any) -> GpuNeeds:
        return GpuNeeds(device_key=True, per_job=1)

    def __init__(self, config: Any, model: Any, quant: Any, limits: TaskLimits,
                 chat: ChatFormat = ChatFormat(), progress: bool = True) -> None:
        if config.dtype not in DTYPES:
            raise ConfigError("unknown dtype for the hf backend", where="backend.dtype",
                              given=config.dtype, allowed=", ".join(DTYPES))
        if not (config.device in ("auto", "cpu", "cuda") or config.device.startswith("cuda:")):
            raise ConfigError("unknown device", where="backend.device", given=config.device,
                              allowed="auto, cpu, cuda, cuda:N")
        if config.batch_size < 1 or config.max_batch_tokens < 1 or config.batch_call_cost_tokens < 0:
            raise ConfigError("batch limits must be positive (the call cost non-negative)",
                              where="backend.batch_size / backend.max_batch_tokens / backend.batch_call_cost_tokens",
                              given=f"{config.batch_size} / {config.max_batch_tokens} / {config.batch_call_cost_tokens}")
        if hf_quant.is_quantized(quant):
            hf_quant.validate_spec(quant)  # simulated with ModelOpt on entry (runner/quant/modelopt.py)
        guided.validate(limits.guided_decoding, "hf", guided.HF_LIBRARIES)
        self.config = config
        self.model_config = model
        self.quant = quant
        self.limits = limits
        self.chat = chat
        self.progress = progress
        self._model: Any = None
        self._tokenizer: Any = None
        self._info: BackendInfo | None = None
        self._guided = guided.NONE
        self._held: loaded_models.LoadedModel | None = None
        self._load_key = ""
        self._constraints: guided.JsonConstraints | None = None

    # ------------------------------------------------------------------ lifecycle
    def preflight(self) -> None:
        """Before any other work: a quantized spec needs ModelOpt, and NVFP4 needs a visible GPU."""
        if not hf_quant.is_quantized(self.quant):
            return
        hf_quant.import_modelopt()
        if hf_quant.cuda_reasons(self.quant):
            import torch

            hf_quant.check_device(self.quant, self._resolve_device(torch).type)

    def __enter__(self) -> "HFBackend":
        import torch
        import transformers

        transformers.logging.disable_progress_bar()
        transformers.logging.set_verbosity_error()
        if self.config.num_threads:
            torch.set_num_threads(self.config.num_threads)
        device = self._resolve_device(torch)
        if hf_quant.is_quantized(self.quant):
            hf_quant.check_device(self.quant, device.type)
        source = resolve_model_source(self.model_config.name, self.model_config.hf_id,
                                      self.model_config.path, self.model_config.embedded)
        self._load_key = loaded_models.load_key(source.location, self.model_config.revision,
                                                self.model_config.trust_remote_code, self.quant, self.config.dtype,
                                                str(device), self.config.attn_implementation)
        held = loaded_models.take(self._load_key) if self.config.reuse_loaded_model else None
        reused = held is not None
        if held is None:
            held = self._load(source, device)
        else:
            log.info("reusing the model this process loaded for the previous job (same files, spec and dtype)")
        self._held = held
        model, tokenizer, dtype, native = held.model, held.tokenizer, held.dtype, held.native
        quant_algo, kv_algo, versions, details = held.quant_algo, held.kv_cache_quant_algo, held.versions, held.details
        self._model, self._tokenizer, self._device = model, tokenizer, device
        self._guided = guided.resolve_hf(self.limits.guided_decoding)
        dtype_name = self._spec_dtype(dtype, native)
        self._info = BackendInfo(
            name=self.name,
            spec=AccuracySpec(dtype=dtype_name, quant_algo=quant_algo, kv_cache_quant_algo=kv_algo),
            device=str(device) if device.type == "cpu" else f"{device} ({torch.cuda.get_device_name(device)})",
            model_path=source.location,
            versions={"torch": torch.__version__, "transformers": transformers.__version__,
                      "python": platform.python_version()} | versions,
            details={"torch_dtype": str(dtype).removeprefix("torch."), "checkpoint_dtype": str(native).removeprefix("torch."),
                     "model_source": source.kind, "threads": str(torch.get_num_threads()),
                     "guided_decoding": self._guided, "loaded": "reused" if reused else "fresh"} | details,
        )
        return self

    def _load(self, source: Any, device: Any) -> loaded_models.LoadedModel:
        """Load the checkpoint and, for a quantized spec, quantize it (ModelOpt, simulated)."""
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        kwargs = dict(revision=self.model_config.revision, trust_remote_code=self.model_config.trust_remote_code)
        try:
            hf_config = AutoConfig.from_pretrained(source.location, **kwargs)
            tokenizer = AutoTokenizer.from_pretrained(source.location, **kwargs)
            native = getattr(hf_config, "dtype", None) or getattr(hf_config, "torch_dtype", None) or torch.float32
            native = getattr(torch, native) if isinstance(native, str) else native
            dtype = self._resolve_dtype(torch, native, device)
            model = AutoModelForCausalLM.from_pretrained(
                source.location, dtype=dtype, attn_implementation=self.config.attn_implementation, **kwargs)
        except (ModelError, MemoryError, KeyboardInterrupt):
            raise
        except Exception as err:  # the checkpoint is the user's input: say what is wrong with it
            raise load_failure(err, self.model_config.name, source.kind, source.location) from None
        model.to(device).eval()
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token_id = tokenizer.eos_token_id
        quant_cfg = getattr(hf_config, "quantization_config", None)
        quant_algo = None
        if quant_cfg:
            quant_algo = str(quant_cfg.get("quant_algo") or quant_cfg.get("quant_method")) if isinstance(quant_cfg, dict) \
                else str(getattr(quant_cfg, "quant_method", "unknown"))
        kv_algo, versions, details = None, {}, {}
        if hf_quant.is_quantized(self.quant):
            done = hf_quant.quantize(model, tokenizer, self.quant, source.location, self.model_config.revision,
                                     dtype, device, self.progress)
            model = done.model
            quant_algo, kv_algo = done.spec.quant_algo, done.spec.kv_cache_quant_algo
            versions, details = done.versions, done.details
        return loaded_models.LoadedModel(model, tokenizer, dtype, native, quant_algo, kv_algo, versions, details)

    def __exit__(self, *exc: object) -> None:
        if self.config.reuse_loaded_model and self._held is not None and exc[0] is None:
            loaded_models.keep(self._load_key, self._held)
        else:
            loaded_models.forget()
        self._held = None
        self._model = None
        self._tokenizer = None

    def info(self) -> BackendInfo:
        if self._info is None:
            raise RuntimeError("info() is available once the backend has been entered")
        return self._info

    @property
    def loaded(self) -> tuple[Any, Any]:
        """The loaded (for a quantized spec: quantized) model and its tokenizer; ``runner.quantize`` exports them."""
        if self._model is None:
            raise RuntimeError("the model is available once the backend has been entered")
        return self._model, self._tokenizer

    def _resolve_device(self, torch: Any) -> "torch.device":
        wanted = self.config.device
        if wanted == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if wanted.startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError("CUDA was asked for but no GPU is visible", where="backend.device",
                              given=wanted, fix="use backend.device=cpu (or auto)")
        return torch.device(wanted)

    def _spec_dtype(self, dtype: Any, native: Any) -> str:
        """The dtype as a reference key: ``auto`` unless the user chose a dtype other than the checkpoint's.

        ``backend.dtype=auto`` is one protocol on every host: the checkpoint's precision, widened to
        float32 on a CPU without bfloat16 arithmetic (an exact upcast of the weights, chosen for speed).
        Keying that host-dependent choice would make the shipped references, recorded on a
        bfloat16-capable CPU, unreachable on any other; the dtype actually computed in is reported
        as ``torch_dtype`` and keys the generation cache."""
        if self.config.dtype == "auto" or dtype == native:
            return "auto"
        return str(dtype).removeprefix("torch.")

    def _resolve_dtype(self, torch: Any, native: Any, device: Any) -> Any:
        if self.config.dtype != "auto":
            return getattr(torch, self.config.dtype)
        if device.type == "cuda" or native == torch.float32:
            return native
        return torch.bfloat16 if cpu_has_native_bf16() else torch.float32

    # ------------------------------------------------------------------ the shared forward pass
    def _plan(self, rows: list[list[int]], indices: list[int], keep: Sequence[int]) -> list[batching.Group]:
        limits = batching.Limits(max_rows=min(self.config.batch_size, self.limits.max_batch_size),
                                 max_tokens=self.config.max_batch_tokens,
                                 call_cost_tokens=self.config.batch_call_cost_tokens,
                                 share_prefix=self.config.prefix_cache)
        return batching.plan(rows, indices, keep, limits)

    def _run_prefix(self, tokens: list[int]) -> Any:
        """The KV cache of ``tokens`` (one row), shared by every batch of its group."""
        import torch
        from transformers import DynamicCache

        cache = DynamicCache(config=self._model.config)
        head = torch.tensor([tokens], device=self._device)
        self._model(input_ids=head, cache=cache, use_cache=True, logits_to_keep=1)
        return cache

    def _batch_cache(self, prefix_cache: Any, rows: int) -> Any:
        """A cache for ``rows`` rows starting from the shared prefix.

        Plain dynamic layers get a broadcast view of the prefix: they never write into their
        tensors (each forward concatenates into new ones, the only copy made), so the prefix
        cache stays intact for the group's next batch. Other layer kinds get a repeated copy."""

        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        if all(type(layer) is DynamicLayer for layer in prefix_cache.layers):
            cache = DynamicCache(config=self._model.config)
            for mine, shared in zip(cache.layers, prefix_cache.layers):
                mine.lazy_initialization(shared.keys, shared.values)
                mine.keys = shared.keys.expand(rows, -1, -1, -1)
                mine.values = shared.values.expand(rows, -1, -1, -1)
            return cache
        cache = copy.deepcopy(prefix_cache)
        cache.batch_repeat_interleave(rows)
        return cache

    def _prefill(self, rows: list[list[int]], keep: int, prefix: int = 0,
                 prefix_cache: Any = None) -> tuple[Any, Any, Any, Any]:
        """Run ``rows`` (a batch) and return logits of the last ``keep`` positions per row.

        Rows are left-padded. With ``prefix``, their first ``prefix`` tokens (identical in every
        row) are already in ``prefix_cache`` and only the rest is run. Returns
        (logits[B, keep, V], cache, attention_mask[B, T], next_position[B]).
        """
        import torch
        from transformers import DynamicCache

        device = self._device
        tails = [r[prefix:] for r in rows]
        width = max(len(t) for t in tails)
        pad = self._tokenizer.pad_token_id
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), prefix + width), dtype=torch.long)
        mask[:, :prefix] = 1
        positions = torch.zeros((len(rows), width), dtype=torch.long)
        for i, tail in enumerate(tails):
            n = len(tail)
            ids[i, width - n:] = torch.tensor(tail)
            mask[i, prefix + width - n:] = 1
            positions[i, width - n:] = torch.arange(prefix, prefix + n)
        ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
        if prefix:
            cache = self._batch_cache(prefix_cache, len(rows))
        else:
            cache = DynamicCache(config=self._model.config)
        # without padding the mask is all ones: leaving it out lets attention take its causal fast path
        padded = any(len(t) < width for t in tails)
        out = self._model(input_ids=ids, attention_mask=mask if padded or prefix else None, position_ids=positions,
                          cache=cache, use_cache=True, logits_to_keep=keep)
        next_position = positions[:, -1] + 1
        return out.logits, cache, mask, next_position

    def _progress(self, total: int, desc: str) -> Any:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit="req", disable=not self.progress, file=sys.stderr,
                    dynamic_ncols=True, mininterval=1.0)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, special tokens excluded (tasks that select documents by length)."""
        return [len(ids) for ids in self._tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    # ------------------------------------------------------------------ log-likelihood
    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        import torch

        # One forward pass per distinct input; each request reads its continuation's positions.
        by_input: dict[tuple[int, ...], list[tuple[int, list[int]]]] = defaultdict(list)
        for i, req in enumerate(requests):
            seq, scored = loglikelihood_tokens(self._tokenizer, self.chat, req.context, req.continuation,
                                               self.limits.max_input_len, self.limits.max_output_len)
            by_input[tuple(seq[:-1])].append((i, scored))
        inputs = list(by_input)
        rows = [list(x) for x in inputs]
        keeps = [max(len(cont) for _, cont in by_input[x]) for x in inputs]
        results: list[LoglikelihoodResult | None] = [None] * len(requests)
        bar = self._progress(len(requests), "loglikelihood")
        with torch.inference_mode():
            for group in self._plan(rows, list(range(len(inputs))), keeps):
                shared = self._run_prefix(rows[group.batches[0][0]][:group.prefix]) if group.prefix else None
                for batch in group.batches:
                    keep = max(keeps[k] for k in batch)
                    logits, *_ = self._prefill([rows[k] for k in batch], keep, group.prefix, shared)
                    logprobs = torch.log_softmax(logits.float(), dim=-1)
                    for b, k in enumerate(batch):
                        for req_index, cont in by_input[inputs[k]]:
                            span = logprobs[b, keep - len(cont):]
                            target = torch.tensor(cont, device=span.device)
                            picked = span.gather(-1, target[:, None]).squeeze(-1)
                            greedy = bool((span.argmax(-1) == target).all())
                            results[req_index] = LoglikelihoodResult(float(picked.sum()), greedy, len(cont))
                            bar.update(1)
        bar.close()
        return [r for r in results if r is not None]

    # ------------------------------------------------------------------ generation
    def generate(self, requests: Sequence[GenerationRequest]) -> list[str]:
        import torch

        for req in requests:
            if not req.greedy and req.seed is None:
                raise ConfigError("a sampled request needs an explicit seed", where="generation request",
                                  given=f"temperature={req.temperature}, seed=None")
        outputs: list[str] = [""] * len(requests)
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, req in enumerate(requests):
            groups[req.sampling_key()].append(i)
        encoded: list[list[int]] = []
        for req in requests:
            encoded.append(encode_request(self._tokenizer, self.chat, req, self.limits.max_input_len))
        bar = self._progress(len(requests), "generate")
        with torch.inference_mode():
            for indices in groups.values():
                params = requests[indices[0]]
                for group in self._plan(encoded, indices, [1] * len(encoded)):
                    shared = self._run_prefix(encoded[group.batches[0][0]][:group.prefix]) if group.prefix else None
                    for batch in group.batches:
                        texts = self._generate_batch([encoded[i] for i in batch], [requests[i] for i in batch],
                                                     params, group.prefix, shared)
                        for i, text in zip(batch, texts):
                            outputs[i] = text
                        bar.update(len(batch))
        bar.close()
        return outputs

    def _generate_batch(self, rows: list[list[int]], reqs: list[GenerationRequest],
                        params: GenerationRequest, prefix: int = 0, shared: Any = None) -> list[str]:
        import torch

        tokenizer = self._tokenizer
        eos = set(_as_list(tokenizer.eos_token_id)) | set(_as_list(getattr(self._model.generation_config, "eos_token_id", None)))
        max_new = min(params.max_tokens, self.limits.max_output_len)
        generators = None
        if not params.greedy:
            generators = [torch.Generator(device=self._device).manual_seed(int(r.seed)) for r in reqs]
        logits, cache, mask, position = self._prefill(rows, 1, prefix, shared)
        produced: list[list[int]] = [[] for _ in rows]
        done = [False] * len(rows)
        enforcers = self._enforcers(reqs, eos, logits.shape[-1])
        for step in range(max_new):
            step_logits = logits[:, -1, :]
            if enforcers is not None:
                step_logits = guided.mask_logits(step_logits, enforcers, produced, done)
            nxt = self._pick(step_logits, params, generators)
            for i, token in enumerate(nxt.tolist()):
                if done[i]:
                    continue
                if token in eos:
                    done[i] = True
                    continue
                produced[i].append(token)
                if params.stop and _hits_stop(tokenizer.decode(produced[i][-16:]), params.stop):
                    done[i] = True
            if all(done) or step == max_new - 1:
                break
            mask = torch.cat([mask, torch.ones((len(rows), 1), dtype=mask.dtype, device=mask.device)], dim=1)
            out = self._model(input_ids=nxt[:, None], attention_mask=mask, position_ids=position[:, None],
                              cache=cache, use_cache=True, logits_to_keep=1)
            logits, position = out.logits, position + 1
        texts = [tokenizer.decode(p, skip_special_tokens=True) for p in produced]
        return [cut_at_stop(t, params.stop) for t in texts]

    def _enforcers(self, reqs: list[GenerationRequest], eos: set[int], vocab_size: int) -> list[Any] | None:
        """One schema filter per row that carries a json_schema (None when guided decoding is off or unused)."""
        if self._guided == guided.NONE or not any(r.json_schema for r in reqs):
            return None
        if self._constraints is None:
            self._constraints = guided.JsonConstraints(self._tokenizer, eos, vocab_size)
        return [self._constraints.enforcer(r.json_schema) if r.json_schema else None for r in reqs]

    @staticmethod
    def _pick(logits: Any, params: GenerationRequest, generators: list[Any] | None) -> Any:
        import torch

        if generators is None:
            return logits.argmax(-1)
        scores = logits.float() / float(params.temperature)
        if params.top_k:
            kth = torch.topk(scores, min(params.top_k, scores.shape[-1]), dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        if params.top_p is not None and params.top_p < 1.0:
            sorted_probs, sorted_idx = probs.sort(dim=-1, descending=True)
            drop = sorted_probs.cumsum(-1) - sorted_probs > params.top_p
            sorted_probs = sorted_probs.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, sorted_idx, sorted_probs)
        picks = [torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(generators)]
        return torch.cat(picks)


def _as_list(value: Any) -> list[int]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _hits_stop(text: str, stops: tuple[str, ...]) -> bool:
    return any(s in text for s in stops)
