"""CNN/DailyMail summarization as TensorRT-LLM's accuracy suite runs it.

Prompt: the article followed by `` TL;DR:`` (stripped, with `` n't`` joined to its word, as
upstream does), generated greedily up to ``max_output_len`` tokens. Subset: upstream's, i.e. the
first n rows after ``Dataset.shuffle(seed)``. Score: ROUGE from the ``rouge-score`` package
(Google's reimplementation of ROUGE-1.5.5, the library behind the `evaluate` metric upstream uses),
F-measure x 100 against the reference highlights.

Per-sample score: ROUGE-1 F x 100 (the ROUGE variant ``task.metric`` names). Task metric ``rouge1``: the mean of the per-sample scores.
Upstream reports the `evaluate` metric's aggregate, the median of 1000 bootstrap resamples of that
same mean (``BootstrapAggregator``, ``mid``), which is random to a few hundredths; the plain mean is its
deterministic centre and keeps the hypothesis test and the paired test on the very numbers averaged.
ROUGE-2, ROUGE-L and ROUGE-Lsum are aggregated the same way and logged next to it.

Truncation (``task.truncation``): upstream tokenizes with ``truncate_prompt_tokens=max_input_len``
and a tokenizer that truncates on the left, so a long article loses its BEGINNING (the BOS token
and the `` TL;DR:`` cue stay): ``article_start``, the default. ``article_end`` drops the article's
end instead (news articles put the key facts first) and still keeps the cue; it is a different
protocol and goes into ``extra_acc_spec``.
"""

from __future__ import annotations

from typing import Any, Sequence

from evaluators.base import Request, Response, Sample, ScoredSample
from evaluators.hf_shuffle import shuffled_rows
from evaluators.hub_or_local import check_source, load_rows
from runner.backends.base import GenerationRequest
from runner.errors import ConfigError, DataError

TRUNCATIONS = ("article_start", "article_end")
CUE = " TL;DR:"
ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


def prompt_body(article: str) -> str:
    """The article as upstream puts it before the cue: leading space stripped, " n't" joined."""
    return article.lstrip().replace(" n't", "n't")


class RougeScorer:
    """ROUGE-1/2/L/Lsum F-measures (0-100) of one prediction against one reference, via ``rouge-score``.

    ``rouge-score`` lower-cases, keeps [a-z0-9] tokens, and (for Lsum) splits summaries on newlines.
    """

    def __init__(self, use_stemmer: bool = False) -> None:
        import logging

        from rouge_score import rouge_scorer

        logging.getLogger("absl").setLevel(logging.WARNING)  # rouge-score announces its default tokenizer at INFO
        self._scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer)

    def __call__(self, prediction: str, reference: str) -> dict[str, float]:
        scores = self._scorer.score(reference, prediction)  # rouge-score takes (target, prediction)
        return {name: 100.0 * scores[name].fmeasure for name in ROUGE_TYPES}


class CNNDailyMailEvaluator:
    """Builds CNN/DailyMail samples and scores them with ROUGE (per-sample rouge1 F x 100)."""

    def __init__(self, config: Any) -> None:
        check_source(config.dataset)
        if config.metric not in ROUGE_TYPES:
            raise ConfigError("the task metric must be a ROUGE variant", where="task.metric", given=config.metric,
                              allowed=", ".join(ROUGE_TYPES) + " (upstream: rouge1)")
        if config.truncation not in TRUNCATIONS:
            raise ConfigError("unknown truncation", where="task.truncation", given=config.truncation,
                              allowed=", ".join(TRUNCATIONS))
        self.config = config
        self.metric = config.metric
        self.higher_is_better = config.higher_is_better
        self.source_used: str | None = None
        self._rouge: RougeScorer | None = None

    def extra_acc_spec(self) -> str | None:
        parts = []
        if self.config.truncation != "article_start":
            parts.append(f"truncation={self.config.truncation}")
        if self.config.use_stemmer:
            parts.append("use_stemmer=true")
        if self.config.apply_chat_template:
            parts.append("chat_template=true")
        return ",".join(parts) or None

    # ------------------------------------------------------------------ data
    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        ds, source, self.source_used = load_rows(self.config.dataset, "cnn_dailymail",
                                                 "'article' and 'highlights' columns (as ccdv/cnn_dailymail or abisee/cnn_dailymail)")
        missing = {"article", "highlights"} - set(ds.column_names)
        if missing:
            raise DataError("the dataset does not have CNN/DailyMail's columns", where=source,
                            given=sorted(ds.column_names), allowed="article, highlights (id optional)")
        out = []
        for row in shuffled_rows(len(ds), seed, num_samples):
            item = ds[row]
            article, highlights = item["article"], item["highlights"]
            for name, value in (("article", article), ("highlights", highlights)):
                if not isinstance(value, str) or not value.strip():
                    raise DataError(f"malformed CNN/DailyMail row: '{name}' must be non-empty text",
                                    where=f"{source}, row {row}", given=repr(value)[:200],
                                    fix="fix or drop the row in the source data")
            out.append(Sample(id=f"{self.config.dataset.split}/{row}", prompt=prompt_body(article) + CUE,
                              target=highlights, meta={"article_id": str(item.get("id") or "")}))
        return out

    # ------------------------------------------------------------------ requests and scoring
    def requests(self, sample: Sample) -> list[Request]:
        max_tokens = self.config.max_output_len
        if self.config.truncation == "article_end":
            body = sample.prompt[:-len(CUE)]
            return [GenerationRequest(prompt=body, suffix=CUE, truncation="right", max_tokens=max_tokens)]
        return [GenerationRequest(prompt=sample.prompt, truncation="left", max_tokens=max_tokens)]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        (output,) = responses
        assert isinstance(output, str)
        if self._rouge is None:
            self._rouge = RougeScorer(self.config.use_stemmer)
        rouge = self._rouge(output, sample.target)
        meta = dict(sample.meta) | rouge
        return ScoredSample(sample.id, sample.prompt, output, sample.target, rouge[self.metric], meta)

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """The metric (the mean per-sample score, rouge1 upstream) and the means of the other ROUGE variants."""
        if not scored:
            return {self.metric: float("nan")}
        result = {self.metric: sum(s.score for s in scored) / len(scored)}
        for name in ROUGE_TYPES:
            if name != self.metric:
                result[name] = sum(float(s.meta[name]) for s in scored) / len(scored)
        return result
