"""Per-token perplexity of whole documents, as TensorRT-LLM's SlimPajama-6B task measures it.

Upstream (``accuracy_core.SlimPajama6B`` runs ``examples/summarize.py --eval_task eval_context_ppl``):
the test split is shuffled with seed 0 (``datasets``' ``Dataset.shuffle``); documents are taken in
that order, skipping those shorter than ``MIN_INPUT_LEN`` = 10000 tokens, until n = 86 are kept.
Each text is stripped (and " n't" joined to "n't") and tokenized with the model's BOS token; a longer
one keeps the BOS and its LAST 16383 tokens (summarize.py's tokenizer truncates on the left,
``examples/utils.py`` ``load_tokenizer``), which is what the hf backend scores. The length filter
is upstream's ``numel > 10000`` on those ids (BOS included), i.e. at least 10000 document tokens
for a tokenizer with a BOS token (one more for one without). A document's perplexity is ``exp`` of the mean negative log-likelihood of
its tokens, each predicted from the ones before it (``tensorrt_llm/tools/ppl.py``); the task metric
is the MEAN of the per-document perplexities (``np.mean``), lower is better.

Here the per-sample score is that per-document perplexity, so the task metric (the mean of the
per-sample scores), TensorRT-LLM's unpaired threshold and the paired test on per-sample scores
all speak about the same quantity. The corpus-level (token-weighted) perplexity and the mean
negative log-likelihood per token are reported next to it.

Token counts need the model's tokenizer: the job hands the backend's ``count_tokens`` to
:meth:`PerplexityEvaluator.use_token_counter` before asking for samples, so the minimum length is
applied in the evaluated model's tokens exactly as upstream applies it.

Differences from upstream, all below one token per document:
- the first document token is predicted from the tokenizer's BOS token, or from its EOS token
  when it has no BOS (lm-evaluation-harness' ``loglikelihood_rolling`` convention); upstream feeds
  no BOS then, and leaves the first token unscored;
- upstream also scores the one token it generates after the document (its argmax); that token is
  not part of the document and is not scored here.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from evaluators.base import Evaluator
from evaluators.data.corpus import UPSTREAM_CORPUS, Corpus, load_corpus
from evaluators.metrics import mean
from runner.contract.errors import ConfigError
from runner.contract.evaluator import LOGLIKELIHOODS, TOP_TOKENS, Sample, ScoredSample
from runner.contract.requests import Request, Response, LoglikelihoodRequest, LoglikelihoodResult
from runner.contract.task_config import TaskConfig

log = logging.getLogger("runner")

UPSTREAM_MIN_TOKENS = 10000
UPSTREAM_MAX_INPUT_LEN = 16384
COUNT_CHUNK = 64  # documents tokenized per call while looking for long-enough ones
# Every token of a byte-level (or byte-fallback) tokenizer covers at least one UTF-8 byte, so a text
# of B bytes has at most B + a few tokens (a SentencePiece prefix space, say): shorter texts are
# skipped without tokenizing them.
BYTE_SLACK = 16

TokenCounter = Callable[[Sequence[str]], list[int]]


@dataclass
class PerplexityTaskConfig(TaskConfig):
    """Per-token perplexity of whole documents (evaluators/tasks/perplexity.py)."""
    chance_level: Optional[float] = None  # no guessing level for perplexity

    metric: str = "perplexity"
    higher_is_better: bool = False
    min_tokens: int = 10000  # documents shorter than this, in the model's tokens, are skipped (upstream: 10000)
    text_column: str = "text"  # the column holding the documents (Hub and table sources)
    corpus: Optional[str] = None  # the corpus name in the reference key; None: from the source
    # the fidelity record kept per document: at every position the k most likely tokens and their log-probabilities
    # (top-1 agreement and a KL lower bound against the reference; never the score); null: none
    top_tokens: Optional[int] = 4


CONFIG = PerplexityTaskConfig
"""The task's schema, registered as ``schema_task_perplexity``."""


def normalize(text: str) -> str:
    """Upstream's preprocessing of every input text (summarize.py): strip, and " n't" -> "n't"."""
    return text.strip().replace(" n't", "n't")


def document_perplexity(logprob: float, num_tokens: int) -> float:
    """``exp(-logprob / num_tokens)``: the perplexity of one document from its total log-probability."""
    if num_tokens < 1:
        raise ValueError("a perplexity needs at least one scored token")
    return math.exp(-logprob / num_tokens)


def shuffled_order(size: int, seed: int) -> list[int]:
    """The permutation ``datasets.Dataset.shuffle(seed=seed)`` applies (numpy's default_rng)."""
    import numpy as np

    return [int(i) for i in np.random.default_rng(seed).permutation(size)]


class PerplexityEvaluator(Evaluator):
    """Samples are documents; the per-sample score is the document's per-token perplexity."""

    uses_loglikelihood = True
    # What the job says when the backend cannot score log-likelihoods (the TensorRT-LLM backends here).
    loglikelihood_fix = ("use backend=hf: perplexity needs the log-probability of every document token, "
                         "which this backend does not return; there is no generate-only form of this task")

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        if config.higher_is_better:
            raise ConfigError("perplexity is a lower-is-better metric", where="task.higher_is_better",
                              given=config.higher_is_better, allowed="false")
        if config.min_tokens < 1:
            raise ConfigError("the minimum document length must be at least one token", where="task.min_tokens",
                              given=config.min_tokens, allowed=">= 1")
        if config.max_input_len < 2:
            raise ConfigError("a document needs at least two tokens to be scored", where="task.max_input_len",
                              given=config.max_input_len, allowed=">= 2")
        if config.apply_chat_template or config.system_prompt:
            raise ConfigError("perplexity is measured on raw documents, never wrapped in a chat template",
                              where="task.apply_chat_template / task.system_prompt",
                              given=f"{config.apply_chat_template} / {config.system_prompt!r}",
                              allowed="false / null")
        self._corpus: Corpus | None = None
        self._count: TokenCounter | None = None

    # ------------------------------------------------------------------ protocol
    def corpus(self) -> Corpus:
        if self._corpus is None:
            self._corpus = load_corpus(self.config)
            self.source_used = f"{self._corpus.source}: {self._corpus.description}"
        return self._corpus

    def extra_acc_spec(self) -> str | None:
        """What differs from upstream's protocol: the corpus, the minimum length, the window."""
        parts = []
        label = self.corpus().label
        if label != UPSTREAM_CORPUS:
            parts.append(f"corpus={label}")
        if self.config.min_tokens != UPSTREAM_MIN_TOKENS:
            parts.append(f"min_tokens={self.config.min_tokens}")
        if self.config.max_input_len != UPSTREAM_MAX_INPUT_LEN:
            parts.append(f"max_input_len={self.config.max_input_len}")
        return ",".join(parts) or None

    def use_token_counter(self, counter: TokenCounter) -> None:
        """The backend's tokenizer, to apply ``min_tokens`` in the evaluated model's tokens."""
        self._count = counter

    # ------------------------------------------------------------------ samples
    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        """The first ``num_samples`` documents, in seeded shuffled order, of at least ``min_tokens`` tokens."""
        if self._count is None:
            raise ConfigError("task=perplexity selects documents by their length in the model's tokens, "
                              "and this backend cannot count tokens", where="backend",
                              fix="use backend=hf")
        docs = self.corpus().documents
        minimum = self.config.min_tokens
        candidates = []
        for index in shuffled_order(len(docs), seed):
            text = normalize(docs[index].text)
            if len(text.encode("utf-8")) + BYTE_SLACK >= minimum:
                candidates.append((docs[index].id, text))
        samples: list[Sample] = []
        for start in range(0, len(candidates), COUNT_CHUNK):
            chunk = candidates[start:start + COUNT_CHUNK]
            for (doc_id, text), count in zip(chunk, self._count([t for _, t in chunk])):
                if count >= minimum:
                    samples.append(Sample(id=doc_id, prompt=text, target="", meta={"doc_tokens": int(count)}))
                    if len(samples) == num_samples:
                        return samples
        log.warning("only %d of %d documents of %s have at least %d tokens (%d asked for)",
                    len(samples), len(docs), self.corpus().label, minimum, num_samples)
        return samples

    # ------------------------------------------------------------------ requests and scoring
    def requests(self, sample: Sample) -> list[Request]:
        return [LoglikelihoodRequest(context="", continuation=sample.prompt, top_tokens=self.config.top_tokens or None)]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        (result,) = responses
        assert isinstance(result, LoglikelihoodResult)
        ppl = document_perplexity(result.logprob, result.num_tokens)
        doc_tokens = sample.meta.get("doc_tokens", result.num_tokens)
        meta = {"doc_tokens": doc_tokens, "tokens_scored": result.num_tokens, "nll_sum": -result.logprob,
                "truncated": result.num_tokens < doc_tokens, LOGLIKELIHOODS: [result.logprob]}
        if result.top_tokens is not None:
            meta[TOP_TOKENS] = result.top_tokens
        return ScoredSample(sample.id, sample.prompt, f"{ppl:.4f}", "", ppl, meta)

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """Mean per-document perplexity (the metric), plus the corpus-level (token-weighted) figures."""
        if not scored:
            return {self.metric: float("nan")}
        tokens = sum(s.meta["tokens_scored"] for s in scored)
        nll = sum(s.meta["nll_sum"] for s in scored)
        return {
            self.metric: mean(s.score for s in scored),
            "perplexity_token_weighted": math.exp(nll / tokens),
            "nll_per_token": nll / tokens,
            "tokens_scored": float(tokens),
            "documents_truncated": float(sum(1 for s in scored if s.meta["truncated"])),
        }
