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

import logging
import platform
from collections import defaultdict
from dataclasses import replace
from typing import Any, Iterator, Sequence, TYPE_CHECKING

from runner.backends import rolling, threads as compute_threads, token_counts
from runner.backends.configured import ConfiguredBackend
from runner.backends.hf.config import DTYPES, HFBackendConfig
from runner.backends.hf import batching, devices, forward, guided, sampling, scoring, shape_search, \
    loaded as loaded_models
from runner.backends.models import load_failure, resolve_model_source
from runner.backends.prompting import encode_requests_cut
from runner.contract import stopping
from runner.contract.backend import Capabilities, GpuNeeds, BackendInfo, ChatFormat, Perturbation, TaskLimits
from runner.contract.errors import ConfigError, ModelError
from runner.contract.indicators import Generated, GenerationFacts
from runner.contract.requests import GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, cut_at_stop
from runner.contract.spec import AccuracySpec
from runner.quant import modelopt as hf_quant

if TYPE_CHECKING:
    import torch



log = logging.getLogger("runner")


class HFBackend(ConfiguredBackend):
    """transformers causal LM. Construct cheaply; load on ``__enter__``."""

    name = "hf"
    capabilities = Capabilities(loglikelihood=True, token_counter=True, per_request_seeds=True, rolling_windows=True)
    # the same token ids either way; the same model either way (kept for the next job or loaded again)
    answer_neutral_settings = ("bulk_tokenize", "reuse_loaded_model")

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
        if (config.batch_size is not None and config.batch_size < 1) or config.batch_call_cost_tokens < 0 or (
                config.max_batch_tokens is not None and config.max_batch_tokens < 1):
            raise ConfigError("batch limits must be positive or null (the call cost non-negative)",
                              where="backend.batch_size / backend.max_batch_tokens / backend.batch_call_cost_tokens",
                              given=f"{config.batch_size} / {config.max_batch_tokens} / {config.batch_call_cost_tokens}")
        if hf_quant.is_quantized(quant):
            hf_quant.validate_spec(quant)  # simulated with ModelOpt on entry (runner/quant/modelopt.py)
        guided.validate(limits.guided_decoding, "hf", guided.HF_LIBRARIES)
        super().__init__(config, model, quant, limits, chat, progress)
        self._model: Any = None
        self._tokenizer: Any = None
        self._guided = guided.NONE
        self._held: loaded_models.LoadedModel | None = None
        self._load_key = ""
        self._budget: devices.BatchBudget | None = None
        self._device_key = ""
        self._measured = False  # the batch shape was measured (or remembered) for this job

    # ------------------------------------------------------------------ lifecycle
    def preflight(self) -> None:
        """Before any other work: a quantized spec needs ModelOpt, and NVFP4 needs a visible GPU."""
        if not hf_quant.is_quantized(self.quant):
            return
        hf_quant.check_modelopt_installed()
        if hf_quant.cuda_reasons(self.quant):
            import torch

            hf_quant.check_device(self.quant, self._resolve_device(torch).type)

    def __enter__(self) -> "HFBackend":
        import torch
        import transformers

        transformers.logging.disable_progress_bar()
        transformers.logging.set_verbosity_error()
        device = self._resolve_device(torch)
        threads = ""
        if device.type == "cpu" or self.config.num_threads:
            choice = compute_threads.choose(self.config.num_threads)
            torch.set_num_threads(choice.threads)
            threads = choice.describe()
            log.info("compute threads: %s", threads)
        if hf_quant.is_quantized(self.quant):
            hf_quant.check_device(self.quant, device.type)
        source = resolve_model_source(self.model_config.name, self.model_config.hf_id,
                                      self.model_config.path, self.model_config.embedded)
        self._load_key = loaded_models.load_key(source.location, self.model_config.revision,
                                                self.model_config.trust_remote_code, self.quant, self.config.dtype,
                                                str(device), self.config.attn_implementation,
                                                self.config.fold_quantized_weights)
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
        self._threads = torch.get_num_threads()  # the count alone: where it came from is logged, not compared
        self._guided = guided.resolve_hf(self.limits.guided_decoding)
        dtype_name = devices.spec_dtype(self.config.dtype, dtype, native)
        self._budget = devices.batch_budget(torch, device, model, dtype, self.config.batch_size,
                                            self.config.max_batch_tokens)
        self._device_key = shape_search.device_key(torch, device)
        if self.config.batch_size or self.config.max_batch_tokens:
            log.info("batch shape: %s; backend.batch_size / max_batch_tokens given, so not measured",
                     self._budget.describe())
        self._info = BackendInfo(
            name=self.name,
            spec=AccuracySpec(dtype=dtype_name, quant_algo=quant_algo, kv_cache_quant_algo=kv_algo),
            device=str(device) if device.type == "cpu" else f"{device} ({torch.cuda.get_device_name(device)})",
            model_path=source.location,
            versions={"torch": torch.__version__, "transformers": transformers.__version__,
                      "python": platform.python_version()} | versions,
            details={"torch_dtype": str(dtype).removeprefix("torch."), "checkpoint_dtype": str(native).removeprefix("torch."),
                     "model_source": source.kind, "threads": threads or str(torch.get_num_threads()),
                     "guided_decoding": self._guided, "loaded": "reused" if reused else "fresh",
                     "batch_budget": self._budget.describe()} | details,
        )
        return self

    def host_fields(self) -> dict[str, str]:
        """The compute dtype ``auto`` chose, threads, the batch budget, attention kernels and the GPUs visible."""
        info = self.info()
        fields = {"compute_dtype": info.details.get("torch_dtype", ""), "threads": str(self._threads),
                  "batch_budget": info.details.get("batch_budget", ""), "attention": self.config.attn_implementation}
        if self._device.type == "cuda":
            import torch

            fields["gpus"] = str(torch.cuda.device_count())
        return fields

    def perturbations(self) -> list[Perturbation]:
        """Batch size 1 against the batches chosen, and the other dtype ``auto`` chooses on another host."""
        held = self._held
        assert held is not None and self._budget is not None, "perturbations are known once the backend is entered"
        out = [Perturbation("batch_size=1", (("batch_size", 1),))] if self._budget.rows > 1 else []
        other = devices.other_auto_dtype(held.dtype, held.native)
        return out + ([Perturbation(f"dtype={other}", (("dtype", other),))] if other else [])

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
            dtype = devices.resolve_dtype(torch, self.config.dtype, native, device)
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
                                     dtype, device, self.progress, fold=self.config.fold_quantized_weights)
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

    @property
    def loaded(self) -> tuple[Any, Any]:
        """The loaded (for a quantized spec: quantized) model and its tokenizer; ``runner.quantize`` exports them."""
        if self._model is None:
            raise RuntimeError("the model is available once the backend has been entered")
        return self._model, self._tokenizer

    def _resolve_device(self, torch: Any) -> "torch.device":
        return devices.resolve_device(torch, self.config.device)

    # ------------------------------------------------------------------ the shared forward pass
    def _plan(self, rows: list[list[int]], indices: list[int], keep: Sequence[int],
              decode_steps: int = 0, shape: shape_search.Shape | None = None) -> list[batching.Group]:
        """Groups and batches of ``rows``; a generation batch also makes ``decode_steps`` decode calls.
        ``shape``: rows and tokens of a call other than the budget's (a shape on trial)."""
        budget = self._budget
        assert budget is not None, "batches are planned once the backend has been entered"
        rows_cap, tokens = (shape.rows, shape.tokens) if shape else (budget.rows, budget.tokens)
        limits = batching.Limits(max_rows=min(rows_cap, self.limits.max_batch_size),
                                 max_tokens=tokens,
                                 call_cost_tokens=self.config.batch_call_cost_tokens,
                                 decode_calls=decode_steps if self._decode_aware() else 0,
                                 share_prefix=self.config.prefix_cache,
                                 max_cache_tokens=budget.cache_tokens, cache_growth=decode_steps)
        return batching.plan(rows, indices, keep, limits)

    def _loglikelihood_groups(self, rows: list[list[int]], keeps: Sequence[int]) -> Iterator[batching.Group]:
        """The planned groups of a log-likelihood call, with the batch shape measured on its first rows when
        the user set no limit and no earlier job of this process measured it (shape_search)."""
        indices, lengths, budget = list(range(len(rows))), [len(r) for r in rows], self._budget
        key = (self._device_key, self._load_key, shape_search.task_shape(lengths))
        if not self.config.batch_search or self._measured or self.config.batch_size or self.config.max_batch_tokens:
            yield from self._plan(rows, indices, keeps)
            return
        if (known := shape_search.remembered(*key)) is not None:
            self._use_shape(known, f"measured by an earlier job, {key[2]}")
        candidates = shape_search.candidates(self._device.type, budget.rows, budget.tokens)
        sizes = shape_search.trial_sizes(candidates, lengths, self.limits.max_batch_size)
        if known is not None or sizes is None:
            yield from self._plan(rows, indices, keeps)
            return

        def chosen(best: shape_search.Trial, trials: list[shape_search.Trial]) -> None:
            shape_search.remember(*key, best.shape)
            self._use_shape(best.shape, f"measured, {key[2]}")
            self._info.details["batch_search"] = shape_search.describe(best, trials)
            log.info("batch shape: %s", self._info.details["batch_search"])

        yield from shape_search.searched_groups(indices, lengths, candidates, sizes,
                                                lambda chunk, shape: self._plan(rows, chunk, keeps, shape=shape),
                                                chosen, sync=lambda: forward.sync(self._device))

    def _use_shape(self, shape: shape_search.Shape, source: str) -> None:
        """Plan this job's later batches under ``shape`` (the KV positions cap, if any, stays)."""
        assert self._budget is not None and self._info is not None
        self._budget = devices.BatchBudget(shape.rows, shape.tokens, self._budget.cache_tokens, source)
        self._measured = True
        self._info.details["batch_budget"] = self._budget.describe()

    def _decode_aware(self) -> bool:
        chosen = self.config.decode_aware_batching
        return self._device.type == "cuda" if chosen is None else bool(chosen)

    def _run_prefix(self, tokens: list[int]) -> Any:
        """The KV cache of ``tokens`` (one row), shared by every batch of its group."""
        return forward.run_prefix(self._model, self._device, tokens)

    def _prefill(self, rows: list[list[int]], keep: int, prefix: int = 0, prefix_cache: Any = None,
                 capacity: int = 0) -> tuple[Any, Any, Any, Any]:
        """(logits of the last ``keep`` positions, cache, attention mask, next position) of a batch."""
        return forward.prefill(self._model, self._device, self._tokenizer.pad_token_id, rows, keep, prefix, prefix_cache,
                               capacity)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, special tokens excluded (tasks that select documents by length)."""
        return token_counts.count_with(self._tokenizer, texts)

    def tokenizer_counter(self) -> token_counts.TokenCounter:
        """The same counts from the checkpoint's tokenizer alone (a dry run: no weights loaded)."""
        m = self.model_config
        source = resolve_model_source(m.name, m.hf_id, m.path, m.embedded)
        return token_counts.tokenizer_counter(source.location, m.revision, m.trust_remote_code)

    # ------------------------------------------------------------------ log-likelihood
    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """Every request's rows (a rolling request's lm-eval windows, else one sequence: ``runner.backends.rolling``)
        scored together; one forward pass per distinct input, each row reads its scored positions."""
        import torch

        table = rolling.Rows.of(self._tokenizer, self.chat, requests, self.limits.max_input_len,
                                self.limits.max_output_len, self.config.bulk_tokenize)
        by_input: dict[tuple[int, ...], list[tuple[int, list[int]]]] = defaultdict(list)
        for r, (seq, scored) in enumerate(table.rows):
            by_input[tuple(seq[:-1])].append((r, scored))
        inputs = list(by_input)
        rows = [list(x) for x in inputs]
        keeps = [max(len(cont) for _, cont in by_input[x]) for x in inputs]
        answered: dict[int, LoglikelihoodResult] = {}
        bar = self.bar(len(requests), "loglikelihood")
        left = list(table.counts)  # rows still unanswered, per request
        if 0 in left:  # an empty rolling text: nothing to compute
            bar.update(left.count(0))
        score = scoring.batch_scores if self.config.batch_scoring else scoring.row_scores

        def read(batch: list[int], keep: int, logprobs: Any) -> None:
            """A batch's answers read back to the host (on a GPU: where the host waits for that batch)."""
            scored = [(row, b, keep - len(cont), cont) for b, k in enumerate(batch) for row, cont in by_input[inputs[k]]]
            results = score(logprobs, scored)
            wanted = [(j, k) for j, (row, *_) in enumerate(scored) if (k := requests[table.owner[row]].top_tokens)]
            if wanted:  # the fidelity record a request asked for
                records = scoring.top_records(logprobs, [scored[j] for j, _ in wanted], [k for _, k in wanted])
                for (j, _), record in zip(wanted, records):
                    results[j] = replace(results[j], top_tokens=record)
            for (row, *_), result in zip(scored, results):
                answered[row] = result
                left[table.owner[row]] -= 1
                if not left[table.owner[row]]:
                    bar.update(1)

        try:
            with torch.inference_mode():
                # each batch is read after the next one is launched, so that on a GPU the host builds and queues
                # the next batch while the device computes this one (on a CPU every call runs to its end anyway)
                pending: tuple[list[int], int, Any] | None = None
                for group in self._loglikelihood_groups(rows, keeps):
                    shared = self._run_prefix(rows[group.batches[0][0]][:group.prefix]) if group.prefix else None
                    for batch in group.batches:
                        keep = max(keeps[k] for k in batch)
                        logits, *_ = self._prefill([rows[k] for k in batch], keep, group.prefix, shared)
                        launched = (batch, keep, torch.log_softmax(logits.float(), dim=-1))
                        if pending is not None:
                            read(*pending)
                        pending = launched
                if pending is not None:
                    read(*pending)
        except BaseException as err:  # a stop (SIGTERM/SIGINT) or a failed batch: the generation cache keeps these
            stopping.keep_answered(err, table.combine(answered))
            raise
        finally:
            bar.close()
        results = table.combine(answered)
        return [results[i] for i in range(len(requests))]

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
        encoded, cut = encode_requests_cut(self._tokenizer, self.chat, requests, self.limits.max_input_len,
                                           self.config.bulk_tokenize)
        bar = self.bar(len(requests), "generate")
        done: list[int] = []
        try:
            with torch.inference_mode():
                for indices in groups.values():
                    params = requests[indices[0]]
                    steps = min(params.max_tokens, self.limits.max_output_len) - 1
                    for group in self._plan(encoded, indices, [1] * len(encoded), steps):
                        shared = self._run_prefix(encoded[group.batches[0][0]][:group.prefix]) if group.prefix else None
                        for batch in group.batches:
                            texts, hit = self._generate_batch([encoded[i] for i in batch],
                                                              [requests[i] for i in batch], params, group.prefix, shared)
                            for i, text, at_limit in zip(batch, texts, hit):
                                outputs[i] = Generated(text, GenerationFacts(input_cut=cut[i], hit_limit=at_limit))
                            done += batch
                            bar.update(len(batch))
        except BaseException as err:  # a stop (SIGTERM/SIGINT) or a failed batch: the generation cache keeps these
            stopping.keep_answered(err, {i: outputs[i] for i in done})
            raise
        finally:
            bar.close()
        return outputs

    def _generate_batch(self, rows: list[list[int]], reqs: list[GenerationRequest],
                        params: GenerationRequest, prefix: int = 0, shared: Any = None) -> tuple[list[str], list[bool]]:
        """Each row's text, and whether it stopped at the token limit (no end-of-sequence token or stop string)."""
        import torch

        tokenizer = self._tokenizer
        eos = set(sampling.as_list(tokenizer.eos_token_id)) | set(sampling.as_list(getattr(self._model.generation_config, "eos_token_id", None)))
        max_new = min(params.max_tokens, self.limits.max_output_len)
        generators = None
        if not params.greedy:
            generators = [torch.Generator(device=self._device).manual_seed(int(r.seed)) for r in reqs]
        capacity = max(len(r) for r in rows) + max_new if self.config.preallocated_cache else 0
        logits, cache, mask, position = self._prefill(rows, 1, prefix, shared, capacity)
        filled = mask.shape[1]
        mask = torch.cat([mask, mask.new_ones((len(rows), max_new))], dim=1)  # every position: steps take views
        produced: list[list[int]] = [[] for _ in rows]
        done = [False] * len(rows)
        enforcers = self._enforcers(reqs, eos, logits.shape[-1])
        for step in range(max_new):
            step_logits = logits[:, -1, :]
            if enforcers is not None:
                step_logits = guided.mask_logits(step_logits, enforcers, produced, done)
            nxt = sampling.pick(step_logits, params, generators)
            for i, token in enumerate(nxt.tolist()):
                if done[i]:
                    continue
                if token in eos:
                    done[i] = True
                    continue
                produced[i].append(token)
                if params.stop and sampling.hits_stop(tokenizer.decode(produced[i][-16:]), params.stop):
                    done[i] = True
            if all(done) or step == max_new - 1:
                break
            filled += 1
            out = self._model(input_ids=nxt[:, None], attention_mask=mask[:, :filled], position_ids=position[:, None],
                              cache=cache, use_cache=True, logits_to_keep=1)
            logits, position = out.logits, position + 1
        texts = [tokenizer.decode(p, skip_special_tokens=True) for p in produced]
        return [cut_at_stop(t, params.stop) for t in texts], [not d for d in done]

    def _enforcers(self, reqs: list[GenerationRequest], eos: set[int], vocab_size: int) -> list[Any] | None:
        """One schema filter per row that carries a json_schema (None when guided decoding is off or unused)."""
        if self._guided == guided.NONE or not any(r.json_schema for r in reqs):
            return None
        assert self._held is not None, "generation runs inside the backend's context"
        key = (tuple(sorted(eos)), vocab_size)
        constraints = self._held.json_constraints.get(key)
        if constraints is None:
            constraints = self._held.json_constraints[key] = guided.JsonConstraints(self._tokenizer, eos, vocab_size)
        return [constraints.enforcer(r.json_schema) if r.json_schema else None for r in reqs]
