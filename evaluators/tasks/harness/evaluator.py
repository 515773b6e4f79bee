"""``task=lm_eval``: an lm-evaluation-harness task or group as a runner task.

lm-eval builds each document's requests (its prompt templates, few-shot sampler and chat rendering);
they are sent as our requests (``translate``) with every other task's, in bulk and through the generation
cache; lm-eval's filters and ``process_results`` score each document; the runner's statistics decide.

- One sample is one document: id ``<subtask>/<doc_id>`` (lm-eval's doc_id, its index in the evaluation
  split), meta with lm-eval's ``doc_hash``, ``prompt_hash`` and every per-document metric value.
- The per-sample score is the chosen metric's per-document value times ``scale``. For a metric lm-eval
  aggregates other than by the mean (corpus BLEU, perplexities) the task metric is lm-eval's aggregation over
  every document (``corpus_metric()``), each sample keeps the item it pools (``meta[CORPUS_ITEM]``) and the
  decision bootstraps it (runner/stats/numerics/corpus_bootstrap.py); a sample's score is then its one-document figure. lm-eval's
  own aggregates are reported beside it as ``lm_eval/<metric>`` (its scale), per subtask for a group.
- ``num_samples`` draws a seeded subset of doc ids (what lm-eval's ``samples=`` selects), split across a
  group's subtasks in proportion to their sizes; each subtask's few-shot sampler is seeded with
  ``task.fewshot_seed`` and walks the chosen documents in order, as lm-eval does.
- A rolling text (``loglikelihood_rolling``) is scored whole in lm-eval's disjoint windows of ``task.rolling_window``
  tokens (null: ``task.max_input_len``); a backend that scores no windows is refused one longer than a window.
- The reference key (``extra_acc_spec``) names the lm-eval version, a hash of the resolved task configs, the
  number of shots, the few-shot seed, the filter, a rolling task's window and the chat settings.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Sequence

from evaluators.base import Evaluator
from evaluators.deviations import chat_deviation
from evaluators.metrics import mean
from evaluators.tasks.harness.checks import load_checked, missing_metric
from evaluators.tasks.harness.corpus import corpus_metric
from evaluators.tasks.harness.loading import Subtask, check_include_path, config_hash, lm_eval_version
from evaluators.tasks.harness.patterns import bounded, filter_patterns, metric_patterns
from evaluators.tasks.harness.translate import (loglikelihood_fix, needs_loglikelihood, read_chat, record_chat,
                                                to_lm_eval, to_request)
from runner.contract.backend import Capabilities
from runner.contract.errors import ConfigError
from runner.contract.evaluator import CORPUS_ITEM, ROW, CorpusMetric, Sample, ScoredSample, row_label
from runner.contract.requests import Request, Response

# lm-eval metrics whose values are fractions of 1: shown in percent (scale 100) like our references
FRACTION_METRICS = ("acc", "acc_norm", "acc_bytes", "acc_mutual_info", "exact_match", "f1", "mcc", "brier_score",
                    "prompt_level_strict_acc", "prompt_level_loose_acc", "inst_level_strict_acc",
                    "inst_level_loose_acc", "em", "contains")
# those whose per-document value lies within [0, 1] (a Brier score reaches 2; MCC is a corpus figure)
BOUNDED_FRACTIONS = tuple(m for m in FRACTION_METRICS if m not in ("brier_score", "mcc"))


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """``n`` split across subtasks in proportion to their sizes (largest remainders, ties by name), each at
    most its size: the stratified sample sizes of a group."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    exact = {k: n * v / total for k, v in sizes.items()}
    out = {k: int(x) for k, x in exact.items()}
    for k in sorted(sizes, key=lambda k: (-(exact[k] - out[k]), k))[:n - sum(out.values())]:
        out[k] += 1
    return out


class HarnessEvaluator(Evaluator):
    """An lm-eval task (or a group's subtasks) scored per document by lm-eval, judged by the runner."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        if config.num_fewshot is not None and config.num_fewshot < 0:
            raise ConfigError("the number of few-shot examples cannot be negative", where="task.num_fewshot",
                              given=config.num_fewshot, allowed=">= 0, or null (the task's own)")
        if config.scale is not None and not config.scale > 0:
            raise ConfigError("the scale must be a positive number", where="task.scale", given=config.scale)
        if config.rolling_window is not None and not 1 <= config.rolling_window <= config.max_input_len:
            raise ConfigError("a rolling window holds between 1 token and the task's input length", where="task.rolling_window",
                              given=f"{config.rolling_window} (task.max_input_len={config.max_input_len})",
                              allowed=f"1..{config.max_input_len}, or null (task.max_input_len)",
                              fix="raise task.max_input_len with it (lm-eval's max_length is the model's context length)")
        # lm-eval's max_length for rolling texts: no row a backend scores is longer than the task's input length
        self.rolling_window = int(config.rolling_window or config.max_input_len)
        self._capabilities: Capabilities | None = None
        if config.fewshot_as_multiturn and not config.apply_chat_template:
            raise ConfigError("few-shot turns exist only in a chat", where="task.fewshot_as_multiturn",
                              given="true with task.apply_chat_template=false", fix="set task.apply_chat_template=true")
        include = check_include_path(config.include_path, config.trust_include_code, list(config.include_allow),
                                     config.yaml_max_kb, config.yaml_max_nodes)
        self.subtasks: list[Subtask] = load_checked(config.lm_eval_task, include)
        for sub in self.subtasks:
            self._configure(sub.task)
        if len(self.subtasks) == 1 and config.cluster_key == "subtask":
            config.cluster_key = None  # one task: one cluster, nothing to cluster (a group's subtasks are clusters)
        self.output_types = sorted({s.task.OUTPUT_TYPE for s in self.subtasks})
        self.uses_loglikelihood = needs_loglikelihood(self.output_types)
        self.loglikelihood_fix = loglikelihood_fix(self.output_types, config.lm_eval_task)
        self._resolve_metric()
        # where the task files came from, not their path: a checkout elsewhere still pairs (task_hash is the protocol)
        self.source_used = "lm-eval tasks (" + ("installed" if include is None else "task.include_path") + ")"
        self._docs: dict[str, Any] = {}
        self._built: dict[str, tuple[Subtask, Any, list[Any]]] = {}
        self._seed = 0
        self._count: Any = None

    # ------------------------------------------------------------------ set-up
    def _configure(self, task: Any) -> None:
        """lm-eval's own overrides (as ``simple_evaluate`` applies them): shots, generation settings, seed."""
        if self.config.num_fewshot is not None:
            task.set_config(key="num_fewshot", value=int(self.config.num_fewshot))
        elif task.get_config("num_fewshot") is None:
            task.set_config(key="num_fewshot", value=0)
        if self.config.gen_kwargs and task.OUTPUT_TYPE == "generate_until":
            from lm_eval.utils import simple_parse_args_string

            task.set_config(key="generation_kwargs", value=simple_parse_args_string(self.config.gen_kwargs),
                            update=True)
        task.set_fewshot_seed(seed=self.config.fewshot_seed)

    def _resolve_metric(self) -> None:
        """``task.metric`` (auto: the first task's first metric) and its direction from lm-eval, written back into
        the config so the job, its reports and its reference entry see the resolved name and direction."""
        first = self.subtasks[0].task
        names = list(first.higher_is_better())
        metric = names[0] if self.config.metric == "auto" and names else self.config.metric
        for sub in self.subtasks:
            known = list(sub.task.higher_is_better())
            if metric not in known:
                raise ConfigError("the lm-eval task has no metric of this name", where="task.metric",
                                  given=f"{self.config.metric} (task {sub.name})", allowed=", ".join(known) + ", auto")
        higher = first.higher_is_better()[metric]
        self.aggregation = first.aggregation()[metric]
        self.mean_metric = getattr(self.aggregation, "__name__", "") == "mean"
        self.filter = self._resolve_filter(first)
        self.scale = float(self.config.scale or (100.0 if metric in FRACTION_METRICS else 1.0))
        self.config.metric, self.config.higher_is_better = metric, bool(higher)
        self.metric, self.higher_is_better = metric, bool(higher)
        self._corpus = None if self.mean_metric else corpus_metric(metric, self.aggregation, self.scale, _lm_value)

    def _resolve_filter(self, task: Any) -> str:
        names = [f.name for f in task._filters]
        if self.config.filter == "auto":
            return names[0]
        if self.config.filter not in names:
            raise ConfigError("the lm-eval task has no filter of this name", where="task.filter",
                              given=self.config.filter, allowed=", ".join(names) + ", auto")
        return self.config.filter

    def extra_acc_spec(self) -> str | None:
        shots = sorted({int(s.task.get_config("num_fewshot") or 0) for s in self.subtasks})
        parts = [f"lm_eval={lm_eval_version()}", f"task_hash={config_hash(self.subtasks)}",
                 f"num_fewshot={'/'.join(map(str, shots))}", f"fewshot_seed={self.config.fewshot_seed}"]
        if self.filter != "none":
            parts.append(f"filter={self.filter}")
        if "loglikelihood_rolling" in self.output_types:
            parts.append(f"rolling_window={self.rolling_window}")
        parts += chat_deviation(self.config)
        if self.config.fewshot_as_multiturn:
            parts.append("fewshot_as_multiturn=true")
        return ",".join(parts)

    def use_token_counter(self, count: Any) -> None:
        """The backend's tokenizer: rolling texts longer than one window are found before any request."""
        self._count = count

    def use_capabilities(self, capabilities: Capabilities) -> None:
        """The backend's declared capabilities: whether it scores a rolling text in several windows."""
        self._capabilities = capabilities

    def _check_rolling(self, samples: list[Sample]) -> None:
        """Refuse, before any request, rolling texts longer than ``task.rolling_window`` on a backend that scores no
        rolling windows (counted with the backend's tokenizer, special tokens excluded); shorter ones run anywhere."""
        if self._count is None or self._capabilities is None or self._capabilities.rolling_windows:
            return
        texts = [self._built[s.id][2][0].args[0] for s in samples
                 if self._built[s.id][2][0].request_type == "loglikelihood_rolling"]
        counts = [n for n in (self._count(texts) if texts else []) if n > self.rolling_window]
        if counts:
            raise ConfigError("this backend cannot score a rolling text longer than one window (lm-eval scores it "
                              "whole, in rolling windows)", where="backend / task.rolling_window",
                              given=f"{len(counts)} of {len(texts)} texts have more than {self.rolling_window} tokens "
                                    f"(the longest {max(counts)})",
                              allowed="texts of at most task.rolling_window tokens on this backend",
                              fix="use a backend that scores rolling windows (backend=hf, or an openai server with "
                                  f"prompt log-probabilities), or set task.rolling_window={max(counts)} (and "
                                  "task.max_input_len as high; a protocol change), or a smaller task.num_samples")

    # ------------------------------------------------------------------ samples
    def docs(self, sub: Subtask) -> Any:
        if sub.name not in self._docs:
            self._docs[sub.name] = sub.task.eval_docs
        return self._docs[sub.name]

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        self._seed = seed
        sizes = allocate({s.name: len(self.docs(s)) for s in self.subtasks}, num_samples)
        out = []
        for sub in self.subtasks:
            ids = self.seeded_subset(len(self.docs(sub)), sizes[sub.name], seed, f"lm_eval:{sub.name}")
            sub.task.set_fewshot_seed(seed=self.config.fewshot_seed)  # lm-eval's sampler walks the docs in order
            out += [self._build(sub, doc_id) for doc_id in ids]
        self._check_rolling(out)
        return out

    def _build(self, sub: Subtask, doc_id: int) -> Sample:
        from lm_eval.utils import hash_string

        task, doc, chat = sub.task, self.docs(sub)[doc_id], bool(self.config.apply_chat_template)
        template = record_chat if chat else None
        ctx = task.fewshot_context(doc, num_fewshot=int(task.get_config("num_fewshot") or 0),
                                   system_instruction=self.config.system_prompt, apply_chat_template=chat,
                                   fewshot_as_multiturn=self.config.fewshot_as_multiturn, chat_template=template,
                                   gen_prefix=task.doc_to_prefix(doc))
        made = task.construct_requests(doc=doc, ctx=ctx, metadata=(sub.name, doc_id, task.config.repeats),
                                       apply_chat_template=chat, chat_template=template)
        instances = made if isinstance(made, list) else [made]
        sample_id = f"{sub.name}/{doc_id}"
        self._built[sample_id] = (sub, doc, instances)
        doc_text = json.dumps(doc, indent=2, default=str, ensure_ascii=False)
        # the sample id (doc index) pairs a run with its reference; the row is what a person looks up
        meta = {"subtask": sub.name, "doc_id": doc_id, "doc_hash": hash_string(doc_text),
                "prompt_hash": hash_string(str(instances[0].arguments[0])), ROW: row_label(doc, doc_id)}
        prompt, chat_turns = str(instances[0].args[0]), read_chat(str(instances[0].args[0]))
        if chat_turns is not None:  # the turns the backend renders with the model's chat template
            prompt = "\n\n".join(f"[{role}] {content}" for role, content in chat_turns[0])
        return Sample(sample_id, prompt, _target(task, doc), meta)

    def _instances(self, sample: Sample) -> tuple[Subtask, Any, list[Any]]:
        if sample.id not in self._built:  # a sample made elsewhere (a resumed pool): build it in the same order
            raise ConfigError("an lm-eval sample was asked for before its task built it", where="task=lm_eval",
                              given=sample.id, fix="draw the samples with samples() first")
        return self._built[sample.id]

    # ------------------------------------------------------------------ requests and scoring
    def requests(self, sample: Sample) -> list[Request]:
        _, _, instances = self._instances(sample)
        out: list[Request] = []
        for inst in instances:
            for k in range(inst.repeats or 1):
                seed = zlib.crc32(f"{self._seed}:{sample.id}:{inst.idx}:{k}".encode())
                out.append(to_request(inst, self.config.max_output_len, seed, self.rolling_window))
        return out

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        return self.score_batch([sample], [responses])[0]

    def score_batch(self, samples: Sequence[Sample], responses: Sequence[Sequence[Response]]) -> list[ScoredSample]:
        """Answers into lm-eval's instances, the task's filters over them, then ``process_results`` per document."""
        by_subtask: dict[str, list[Any]] = {}
        for sample, answers in zip(samples, responses):
            sub, _, instances = self._instances(sample)
            pos = 0
            for inst in instances:
                k = inst.repeats or 1
                inst.resps = [to_lm_eval(inst.request_type, a) for a in answers[pos:pos + k]]
                inst.filtered_resps = {}
                pos += k
            by_subtask.setdefault(sub.name, []).extend(instances)
        for sub in self.subtasks:
            if sub.name in by_subtask:
                named = filter_patterns(sub.task.config)
                for ensemble in sub.task._filters:
                    with bounded(sub.name, f"filter_list {ensemble.name}", named.get(ensemble.name, []),
                                 len(by_subtask[sub.name])):
                        ensemble.apply(by_subtask[sub.name])
        return [self._scored(sample) for sample in samples]

    def _scored(self, sample: Sample) -> ScoredSample:
        sub, doc, instances = self._instances(sample)
        with bounded(sub.name, "metric_list (regexes_to_ignore)", metric_patterns(sub.task.config), 1):
            values = sub.task.process_results(doc, [inst.filtered_resps[self.filter] for inst in instances])
        if self.metric not in values:
            raise missing_metric(self.metric, values, sub.name)
        raw = values[self.metric]
        one = raw if self.mean_metric else self.aggregation([raw])
        meta = dict(sample.meta) | {"lm_eval": {k: _plain(v) for k, v in values.items()}, "filter": self.filter}
        if not self.mean_metric:
            meta[CORPUS_ITEM] = _plain(raw)
        if instances[0].request_type == "generate_until":
            meta["response"] = instances[0].resps[0]  # the text before the filter
        return ScoredSample(sample.id, sample.prompt, _prediction(sub.task, doc, instances, self.filter), sample.target,
                            self.scale * float(one), meta)

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """The metric (the mean per-sample score, or the corpus figure of a metric lm-eval aggregates otherwise) and
        lm-eval's own aggregates, per subtask for a group."""
        if not scored:
            return {self.metric: float("nan")}
        corpus = self.corpus_metric()
        out = {self.metric: corpus.compute([s.meta[CORPUS_ITEM] for s in scored]) if corpus
               else mean(s.score for s in scored)}
        groups: dict[str, list[ScoredSample]] = {}
        for s in scored:
            groups.setdefault(s.meta["subtask"], []).append(s)
        for name, members in groups.items():
            sub = next(x for x in self.subtasks if x.name == name)
            for metric, fn in sub.task.aggregation().items():
                values = [_lm_value(s.meta["lm_eval"][metric]) for s in members if metric in s.meta["lm_eval"]]
                if values:
                    value = float(fn(values))
                    out[f"lm_eval/{metric}" if len(self.subtasks) == 1 else f"lm_eval/{name}/{metric}"] = value
        return out

    def corpus_metric(self) -> CorpusMetric | None:
        """A metric lm-eval aggregates other than by the mean (corpus BLEU, perplexities): lm-eval's aggregation
        over every document's value, times the scale (``corpus``: with its additive form where it has one); the
        decision bootstraps it."""
        return self._corpus

    def score_bounds(self) -> tuple[float, float] | None:
        """A per-document fraction of 1 (accuracy, exact match, F1) lies within 0 and the scale; other metrics'
        ranges are not known here."""
        return (0.0, self.scale) if self.mean_metric and self.metric in BOUNDED_FRACTIONS else None

    def chance_level(self, samples: Sequence[Sample]) -> float | None:
        """Multiple choice scored by accuracy: 100 / options; else the configured level."""
        if self.output_types == ["multiple_choice"] and self.metric in ("acc", "acc_norm") and samples:
            return mean(self.scale / len(self._instances(s)[0].task.doc_to_choice(self._instances(s)[1])) for s in samples)
        return self.config.chance_level


def _target(task: Any, doc: Any) -> str:
    """The answer in the form the prediction takes: a multiple-choice target (lm-eval's choice index, or several)
    as the choice's text, as :func:`_prediction` names the chosen one; other targets as lm-eval gives them."""
    target = task.doc_to_target(doc)
    if task.OUTPUT_TYPE != "multiple_choice":
        return str(target)
    choices = task.doc_to_choice(doc)

    def text(t: Any) -> str:
        indexed = isinstance(t, int) and not isinstance(t, bool) and 0 <= t < len(choices)
        return str(choices[t]) if indexed else str(t)
    return " | ".join(text(t) for t in target) if isinstance(target, list) else text(target)


def _prediction(task: Any, doc: Any, instances: list[Any], filter_name: str) -> str:
    """What a person reads: the (filtered) text, the most likely choice, or the log-likelihood."""
    kind, first = instances[0].request_type, instances[0].filtered_resps[filter_name]
    if kind == "generate_until":
        return first if isinstance(first, str) else str(first)
    if task.OUTPUT_TYPE == "multiple_choice":
        choices = task.doc_to_choice(doc)
        lls = [inst.filtered_resps[filter_name][0] for inst in instances[:len(choices)]]
        return str(choices[lls.index(max(lls))])
    return f"{first[0] if isinstance(first, tuple) else first:.4f}"


def _plain(value: Any) -> Any:
    """A per-document value as JSON keeps it (tuples as lists, numpy numbers as Python numbers)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value


def _lm_value(value: Any) -> Any:
    """A stored per-document value back in lm-eval's shape (lists were tuples)."""
    return tuple(value) if isinstance(value, list) else value
