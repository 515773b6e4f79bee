"""CNN/DailyMail summarization as TensorRT-LLM's accuracy suite runs it (tensorrt_llm/evaluate/cnn_dailymail.py
with the arguments of accuracy_core.py's ``CnnDailymail``; the same in TensorRT-LLM 1.0-1.2 and main).

Data: the ``3.0.0`` config's ``test`` split (11,490 rows) in the Hub's row order, the order
ccdv/cnn_dailymail's loading script generates and its parquet conversion keeps; a local copy must
hold the same rows in the same order for the subset to be upstream's. No copy ships offline.

Subset: the first n rows after ``Dataset.shuffle(seed)`` (upstream: seed 0, n = 512).

Prompt: ``(article + " TL;DR:").strip()`` with every `` n't`` joined to its word, no chat template,
no system prompt; generated greedily up to ``max_output_len`` (100) tokens; the output text is
scored as returned (ROUGE's tokenizer ignores whitespace and punctuation).

Truncation (``task.truncation``): upstream passes ``truncate_prompt_tokens=max_input_len`` (924) and
its tokenizer truncates on the left, so a long article loses its BEGINNING while the BOS token the
tokenizer adds and the `` TL;DR:`` cue stay: ``article_start``, the default. ``article_end`` drops
the article's end instead and keeps the cue; another protocol, keyed in ``extra_acc_spec``.

Score: the `evaluate` library's ``rouge`` metric with its defaults (``rouge-score``'s
RougeScorer: rouge1/2/L/Lsum, no stemmer, its default tokenizer), F-measure x 100. Per-sample score:
the F-measure of ``task.metric`` (rouge1). Task score (``task.aggregation=bootstrap``, upstream's):
that metric aggregates with ``rouge-score``'s BootstrapAggregator, i.e. the median over 1000
bootstrap resamples of the mean F-measure, the resamples drawn with numpy's legacy global RNG.
Upstream's ``Evaluator.__init__`` calls ``np.random.seed(random_seed)`` and ``evaluate.load`` then
takes ``np.random.get_state()[1][0]`` (= the seed) as the metric's seed, which ``compute`` sets
before aggregating rouge1, rouge2, rougeL, rougeLsum in turn; drawing the same stream here gives
upstream's number for the same per-sample scores in the same (shuffled) order. ``aggregation=mean``
(the plain mean, a few hundredths away) is another protocol, keyed in ``extra_acc_spec``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Sequence

from evaluators.base import Evaluator
from evaluators.checks import check_choice
from evaluators.data.hub import check_source, load_rows
from evaluators.data.shuffle import shuffled_rows
from evaluators.deviations import chat_deviation, limit_and_data_deviations
from evaluators.metrics import mean
from evaluators.responses import only_text
from evaluators.scoring.rouge import ROUGE_TYPES, RougeScorer, bootstrap_medians
from runner.contract.errors import ConfigError, DataError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.requests import Request, Response, GenerationRequest
from runner.contract.task_config import TaskConfig

TRUNCATIONS = ("article_start", "article_end")
AGGREGATIONS = ("bootstrap", "mean")
CUE = " TL;DR:"
# Upstream's fixed settings (accuracy_core.py CnnDailymail, cnn_dailymail.py): deviations go into the key.
UPSTREAM = {"max_input_len": 924, "max_output_len": 100, "hub_config": "3.0.0", "split": "test"}


@dataclass
class CNNDailyMailTaskConfig(TaskConfig):
    METRICS: ClassVar[tuple[str, ...]] = ROUGE_TYPES
    chance_level: Optional[float] = 0.0  # ROUGE's floor
    # which part of a too-long article gives way (the " TL;DR:" cue always stays): article_start
    # (upstream's: the prompt's last max_input_len tokens, after BOS) | article_end
    truncation: str = "article_start"
    use_stemmer: bool = False  # Porter stemming in ROUGE (off in the `evaluate` rouge metric upstream uses)
    # how per-sample ROUGE becomes the task score: bootstrap (upstream's: the `evaluate` metric's median of
    # 1000 bootstrap means, numpy seeded with the run seed) | mean (the plain mean of the per-sample scores)
    aggregation: str = "bootstrap"


CONFIG = CNNDailyMailTaskConfig
"""The task's schema, registered as ``schema_task_cnn_dailymail``."""


def prompt_body(article: str) -> str:
    """The article as upstream puts it before the cue: leading whitespace stripped, " n't" joined.

    Equal to upstream's ``(article + CUE).strip().replace(" n't", "n't")`` minus the cue: the cue ends
    in ':' (nothing to strip at the end) and no `` n't`` can straddle the article and the cue.
    """
    return article.lstrip().replace(" n't", "n't")


class CNNDailyMailEvaluator(Evaluator):
    """Builds CNN/DailyMail samples and scores them with ROUGE (per-sample rouge1 F x 100)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        check_source(config.dataset)
        if config.metric not in ROUGE_TYPES:
            raise ConfigError("the task metric must be a ROUGE variant", where="task.metric", given=config.metric,
                              allowed=", ".join(ROUGE_TYPES) + " (upstream: rouge1)")
        check_choice(config.truncation, TRUNCATIONS, "truncation", "task.truncation")
        check_choice(config.aggregation, AGGREGATIONS, "ROUGE aggregation", "task.aggregation", " (upstream: bootstrap)")
        self.seed = 0  # the run seed (upstream's random_seed), set by samples(); it seeds the bootstrap
        self._rouge: RougeScorer | None = None

    def extra_acc_spec(self) -> str | None:
        c = self.config
        parts = []
        if c.truncation != "article_start":
            parts.append(f"truncation={c.truncation}")
        if c.use_stemmer:
            parts.append("use_stemmer=true")
        if c.aggregation != "bootstrap":
            parts.append(f"aggregation={c.aggregation}")
        parts += limit_and_data_deviations(c, UPSTREAM)
        parts += chat_deviation(c, key_system_prompt_without_chat=False)  # used only inside the template, as upstream
        return ",".join(parts) or None

    # ------------------------------------------------------------------ data
    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        if not 0 <= seed < 2**32:
            raise ConfigError("the seed must fit numpy's legacy RNG (upstream seeds it with the same number)",
                              where="seed", given=seed, allowed="0 .. 2**32-1 (upstream: 0)")
        self.seed = seed
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
        output = only_text(responses)
        if self._rouge is None:
            self._rouge = RougeScorer(self.config.use_stemmer)
        rouge = self._rouge(output, sample.target)
        meta = dict(sample.meta) | rouge
        return ScoredSample(sample.id, sample.prompt, output, sample.target, rouge[self.metric], meta)

    def score_bounds(self) -> tuple[float, float]:
        """ROUGE F-measures x 100."""
        return (0.0, 100.0)

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """Every ROUGE variant aggregated by ``task.aggregation``, samples taken in the order given
        (the shuffled order upstream scores them in); the task metric is one of them."""
        if not scored:
            return {self.metric: float("nan")}
        columns = [[float(s.meta[name]) for s in scored] for name in ROUGE_TYPES]
        if self.config.aggregation == "mean":
            values = [mean(column) for column in columns]
        else:
            values = bootstrap_medians(columns, self.seed)
        return dict(zip(ROUGE_TYPES, values))
