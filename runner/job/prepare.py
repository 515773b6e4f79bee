"""Step 1, before any model loads: check the config, build the task, backend and tracker, and check what
can fail without the model (capabilities, libraries, the tracking store, the caches, the output
directory), so a mistake costs the user no compute."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.backends.identity import check_architecture, check_lengths
from runner.backends.models import resolve_model_source
from runner.cache import generations
from runner.config.schemas import RunnerConfig
from runner.contract.backend import Capabilities, ChatFormat, TaskLimits
from runner.contract.build import build
from runner.contract.errors import ConfigError
from runner.contract.evaluator import Evaluator
from runner.contract.reasoning import check_sampling, sampled, template_kwargs
from runner.files.paths import check_hub_id, check_name
from runner.job.noise import FLOOR_MODES
from runner.job.state import Job
from runner.references import acceptance, store as references
from runner.stats.settings import validate as validate_stats
from runner.stats.data.hypothesis import HypothesisParams, check_params
from runner.job.warn import warn

REFERENCE_MODES = ("check", "record", "skip")
REFERENCE_AGAINST = ("spec", "baseline")
REFERENCE_NOISE = ("none", "replicate")


def prepare(config: RunnerConfig) -> Job:
    """Build and check everything that needs no model."""
    ref = config.reference
    for what, key, value, allowed in (("mode", "reference.mode", ref.mode, REFERENCE_MODES),
                                      ("target", "reference.against", ref.against, REFERENCE_AGAINST),
                                      ("noise measure", "reference.noise", ref.noise, REFERENCE_NOISE),
                                      ("floor", "reference.floor", ref.floor, FLOOR_MODES)):
        if value not in allowed:
            raise ConfigError(f"unknown reference {what}", where=key, given=value, allowed=", ".join(allowed))
    if ref.replicate_samples is not None and ref.replicate_samples < 2:
        raise ConfigError("the A/A replicate needs at least 2 samples", where="reference.replicate_samples",
                          given=ref.replicate_samples, allowed="an integer >= 2, or null (all the recording's samples)")
    if ref.noise != "none" and ref.mode != "record":
        raise ConfigError("reference.noise measures the A/A replicate of a recording", where="reference.noise",
                          given=f"{ref.noise} with reference.mode={ref.mode}", allowed="none, unless reference.mode=record",
                          fix="add reference.mode=record, or measure two existing runs with python -m runner.compare "
                              "RUN_A RUN_B --aa")
    task, model, quant = config.task, config.model, config.quant
    for where, name in (("task.name", task.name), ("model.name", model.name), ("quant.name", quant.name)):
        check_name(name, where)
    if model.path:
        resolve_model_source(model.name, model.hf_id, model.path, None)  # a missing directory, before anything else
    elif model.hf_id is not None:  # with a path, the id is read from the checkpoint (and escaped where shown)
        check_hub_id(model.hf_id, "model.hf_id")
    check_architecture(model)
    check_lengths(model, task.max_input_len, task.max_output_len)
    validate_stats(config.stats)
    # built first: a task whose metric and direction come from its definition (task=lm_eval) writes them into
    # the config before the statistics read them
    evaluator = build(task, "task")
    check_params(task.alpha, task.beta, task.sigma, task.num_samples, task.higher_is_better, where="task")
    check_corpus_looks(evaluator, config.stats, task.name)
    defaults = HypothesisParams(task.alpha, task.beta, task.sigma, task.num_samples, task.higher_is_better)
    limits = TaskLimits(task.max_input_len, task.max_output_len, task.max_batch_size, task.guided_decoding)
    check_sampling(task.sampling)
    chat = ChatFormat(task.apply_chat_template, task.system_prompt, template_kwargs(task.chat_template_kwargs))
    backend = build(config.backend, "backend", model=model, quant=quant, limits=limits, chat=chat)
    if evaluator.uses_loglikelihood and not backend.capabilities.loglikelihood:
        raise ConfigError("this backend cannot score log-likelihood requests", where=f"backend={config.backend.name}",
                          given=f"task={task.name} with log-likelihood scoring",
                          fix="; or ".join(f for f in (evaluator.loglikelihood_fix, backend.capabilities.loglikelihood_fix) if f))
    check_reasoning_capabilities(task, backend.capabilities, config.backend.name)
    evaluator.use_capabilities(backend.capabilities)  # what only the samples can tell is refused when they are drawn
    backend.preflight()
    tracker = build(config.tracking, "tracking")
    tracker.check()
    generations.preflight(config.cache)
    ref_dir = references.reference_dir(ref.dir, task.name, model.hf_id, ref.mode == "record", model.embedded is not None)
    if ref.mode != "skip":
        references.preflight(ref_dir, task.name, model.hf_id, writing=ref.mode == "record")
    if ref.mode == "check" and backend.acceptance_key:
        acceptance.entry(ref_dir, backend.acceptance_key)  # a missing entry stops the job before the model loads
    out_dir = prepare_output_dir(Path(config.output_dir))
    job = Job(config, task, model, quant, evaluator, backend, tracker, out_dir, ref_dir, defaults, limits, chat)
    crowded = unrelated_entries(out_dir)
    if crowded:
        note = (f"the output directory {out_dir} already holds {len(crowded)} entr{'y' if len(crowded) == 1 else 'ies'} "
                f"no job wrote ({', '.join(crowded[:5])}{', ...' if len(crowded) > 5 else ''}): the job's files are "
                f"written beside them; give a directory of its own with output_dir=DIR")
        warn(job, note)
    if model.trust_remote_code:
        note = (f"model.trust_remote_code=true: Python code shipped with the checkpoint ({model.path or model.hf_id}) "
                "runs in this process; use it only for checkpoints you trust")
        warn(job, note)
    return job


def check_reasoning_capabilities(task: Any, capabilities: Capabilities, backend_name: str) -> None:
    """Refuse, before any request, sampling or chat-template arguments the backend declares it cannot honour."""
    where = f"backend={backend_name}"
    if sampled(task.sampling) and not capabilities.sampling:
        raise ConfigError("this backend cannot sample (it answers greedily only)", where=where,
                          given=f"task.sampling.temperature={task.sampling.temperature}",
                          fix="use a backend that samples (hf, trtllm_pytorch, openai), or leave task.sampling unset")
    if task.chat_template_kwargs and task.apply_chat_template and not capabilities.chat_template_kwargs:
        raise ConfigError("this backend cannot pass keyword arguments to a chat template", where=where,
                          given=f"task.chat_template_kwargs={dict(task.chat_template_kwargs)}",
                          fix="use a backend with a chat template (hf, trtllm_pytorch, openai), or drop "
                              "task.chat_template_kwargs")
    if task.chat_template_kwargs and not task.apply_chat_template:
        raise ConfigError("chat-template arguments need the chat template", where="task.chat_template_kwargs",
                          given=dict(task.chat_template_kwargs), fix="set task.apply_chat_template=true, or drop them")


def check_corpus_looks(evaluator: Evaluator, stats: Any, task: str) -> None:
    """A corpus metric is decided by the bootstrap once, on every sample; repeated looks have no boundaries for it."""
    corpus = evaluator.corpus_metric()
    kind = "stats.sequential.enabled=true" if stats.sequential.enabled else \
        f"stats.extensions={stats.extensions}" if stats.extensions else None
    if corpus is not None and kind is not None:
        raise ConfigError("repeated looks are not available for a corpus metric", where=kind,
                          given=f"task={task} with metric {corpus.name} (aggregated over the corpus, decided by a "
                                "bootstrap)", allowed="one look: stats.sequential.enabled=false, stats.extensions=0",
                          fix="run one fixed look, or choose a metric that is a mean per sample (task.metric)")


JOB_ENTRIES = frozenset({".hydra", "config.yaml", "report.txt", "report.json", "results.json", "samples.jsonl",
                         "failure.json", "runner.log", "junit.xml", "summary.md"})
"""What a job writes into its output directory (a rerun or a resumed job finds them there)."""


def unrelated_entries(out_dir: Path) -> list[str]:
    """Entries of the output directory that no job wrote, sorted (a directory of unrelated files is said)."""
    return sorted(p.name for p in out_dir.iterdir() if p.name not in JOB_ENTRIES and not p.name.endswith(".log")
                  and not (p.name.startswith("replicate-") and p.name.endswith(".jsonl")))  # the A/A passes' samples


def prepare_output_dir(out_dir: Path) -> Path:
    """The job's output directory, created and checked writable before any model loads."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ConfigError("the output directory cannot be written", where="output_dir (hydra.run.dir)",
                          given=f"{out_dir} ({err.strerror or err})",
                          fix="choose a writable place with output_dir=DIR or hydra.run.dir=DIR") from None
    return out_dir
