"""The SCORE evaluator: one sample per question, one request per variant, aggregated as upstream does.

``score()`` extracts every variant's answer, marks it correct or not, maps option-order answers back
to the original option order, and counts the question's agreeing answer pairs; ``aggregate()`` turns
those records into upstream's metrics. The per-sample score is the question's accuracy over its
variants (0-100), so the task metric ``accuracy`` (their mean over questions) weighs every question
the same (the mean of the per-variant micro accuracies when all questions have as many variants) and
gates with the core threshold method at n = questions.
"""

from __future__ import annotations

import json
import logging
import math
import random
from typing import Any, Sequence

from evaluators.base import Evaluator
from evaluators.checks import check_choice
from evaluators.deviations import chat_deviation
from evaluators.metrics import mean, rate
from evaluators.tasks.score import data, extract, metrics, upstream
from evaluators.tasks.score.gate import consistency_gate
from evaluators.tasks.score.mathgrade import math_equivalent
from evaluators.tasks.score.variants import KINDS, Variant, non_greedy_variants, option_order_variants, prompt_variants
from runner.contract.errors import ConfigError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.requests import Request, Response, GenerationRequest

log = logging.getLogger("runner")
SOURCES = ("auto", "hub", "local")
UPSTREAM_SEEDS = (1, 2, 3, 4, 5)
UPSTREAM_TEMPERATURE = 0.7
UPSTREAM_MAX_OUTPUT = 1024
QUIRKS = ("option-identity mapping", "AGIEval position E", "duplicate option-order variants", "'is:' extraction")


class ScoreEvaluator(Evaluator):
    def __init__(self, config: Any) -> None:
        super().__init__(config)
        family, kind = config.family, config.robustness
        check_choice(family, data.FAMILIES, "SCORE family", "task.family")
        check_choice(kind, KINDS, "SCORE robustness kind", "task.robustness")
        if kind == "option_order" and family == "math":
            raise ConfigError("option-order robustness needs multiple-choice questions; MATH has none",
                              where="task.family", given=family, allowed="mmlu_pro, agieval",
                              fix="use task=score_prompt or task=score_non_greedy for MATH")
        check_choice(config.dataset.source, SOURCES, "dataset source", "task.dataset.source")
        allowed = data.default_subsets(family)
        subsets = tuple(config.subsets) if config.subsets else allowed
        if family == "mmlu_pro" and config.subsets:
            raise ConfigError("MMLU-Pro has no subsets (its categories are all evaluated)", where="task.subsets",
                              given=list(config.subsets), fix="leave task.subsets unset")
        bad = [s for s in subsets if s not in allowed]
        if bad:
            raise ConfigError(f"unknown {family} subset", where="task.subsets", given=bad, allowed=", ".join(allowed))
        if kind == "non_greedy" and (not config.seeds or config.temperature <= 0):
            raise ConfigError("non-greedy robustness samples: it needs seeds and a positive temperature",
                              where="task.seeds / task.temperature", given=f"{list(config.seeds)} / {config.temperature}",
                              fix=f"upstream: task.seeds={list(UPSTREAM_SEEDS)} task.temperature={UPSTREAM_TEMPERATURE}")
        self.family, self.kind, self.faithful = family, kind, bool(config.faithful)
        self.subsets = subsets
        self.consistency_metric = metrics.consistency_metric(kind)
        self._templates: dict[str, Any] | None = None
        if not self.faithful and self._quirks_fixed():
            log.warning("task.faithful=false: DEVIATION from upstream SCORE (fixes: %s); numbers are not "
                        "comparable with lm-evaluation-harness or the leaderboard", ", ".join(self._quirks_fixed()))
        elif not self.faithful:
            log.info("task.faithful=false: no documented SCORE quirk applies to %s %s; the run is upstream's protocol",
                     family, kind)

    # ------------------------------------------------------------------ protocol settings
    def _quirks_fixed(self) -> list[str]:
        if self.family == "math":
            return []
        fixed = ["'is:' extraction"]
        if self.kind == "option_order":
            fixed += ["option-identity mapping", "AGIEval position E" if self.family == "agieval"
                      else "duplicate option-order variants"]
        return fixed

    def extra_acc_spec(self) -> str | None:
        """Everything that makes this run's protocol differ from upstream's SCORE (part of the reference key)."""
        c = self.config
        parts = []
        if not self.faithful and self._quirks_fixed():
            parts.append("faithful=false")
        parts += chat_deviation(c, upstream_chat=True, key_system_prompt_without_chat=False)
        if c.max_output_len != UPSTREAM_MAX_OUTPUT:
            parts.append(f"max_output_len={c.max_output_len}")
        if self.subsets != data.default_subsets(self.family):
            parts.append("subsets=" + "+".join(self.subsets))
        if self.kind == "non_greedy":
            if tuple(c.seeds) != UPSTREAM_SEEDS:
                parts.append("seeds=" + "+".join(str(s) for s in c.seeds))
            if c.temperature != UPSTREAM_TEMPERATURE:
                parts.append(f"temperature={c.temperature}")
        return ",".join(parts) or None

    # ------------------------------------------------------------------ samples
    def templates(self) -> dict[str, Any]:
        if self._templates is None:
            self._templates = upstream.templates(self.family)
        return self._templates

    def variants(self, q: data.Question) -> list[Variant]:
        t = self.templates()
        if self.kind == "prompt":
            return prompt_variants(self.family, q, t)
        if self.kind == "option_order":
            return option_order_variants(self.family, q, t, self.faithful)
        return non_greedy_variants(self.family, q, t, self.config.seeds)

    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        """A seeded subset of questions (every question when n covers them all), each with all its variants."""
        self.templates()  # fail on a missing lm-eval before loading any data
        questions, self.source_used = data.load_questions(self.family, self.config.dataset.source, self.config.dataset.local_path,
                                                          self.subsets, self.config.dataset.max_file_mb)
        if num_samples < len(questions):
            chosen = set(random.Random(f"score:{seed}").sample(range(len(questions)), num_samples))
            questions = [q for i, q in enumerate(questions) if i in chosen]
        log.info("SCORE %s on %s: %d questions from %s, lm-eval %s templates", self.kind, self.family, len(questions),
                 self.source_used, upstream.version())
        out = []
        for q in questions:
            vs = self.variants(q)
            out.append(Sample(id=q.id, prompt=vs[0].prompt, target=q.answer, meta={
                "group": q.group, "question": q.id, "question_id": q.question_id, "answer_index": q.answer_index,
                "num_options": len(q.options),
                "variants": [{"key": v.key, "prompt": v.prompt, "gold": v.gold, "options_format": v.options_format,
                              "forced": v.forced, "seed": v.seed} for v in vs],
            }))
        return out

    # ------------------------------------------------------------------ requests and scoring
    def requests(self, sample: Sample) -> list[Request]:
        c = self.config
        sampled = self.kind == "non_greedy"
        return [GenerationRequest(prompt=v["prompt"], max_tokens=c.max_output_len,
                                  temperature=c.temperature if sampled else None, seed=v["seed"] if sampled else None)
                for v in sample.meta["variants"]]

    @property
    def labels(self) -> str:
        """Upstream's label list of the family (A-J for MMLU-Pro, A-E for AGIEval)."""
        return extract.LETTERS[:10 if self.family == "mmlu_pro" else 5]

    def _answer(self, generation: str, variant: dict[str, Any]) -> Any:
        if self.family == "math":
            return upstream.math_extract_boxed(generation)
        raw = extract.extract_choice(generation, self.faithful)
        return extract.translate_to_label(raw, variant["options_format"], self.labels)

    def _correct(self, answer: Any, gold: str) -> bool:
        if self.family == "math":

            return math_equivalent(answer, gold)
        return answer == gold

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        records = []
        for variant, generation in zip(sample.meta["variants"], responses):
            assert isinstance(generation, str)
            answer = self._answer(generation, variant)
            record = {"key": variant["key"], "answer": answer, "correct": self._correct(answer, variant["gold"]),
                      "gold": variant["gold"], "generation": generation, "prompt": variant["prompt"]}
            if self.kind == "option_order":
                record["identity"] = extract.option_identity(answer, variant["forced"], sample.meta["answer_index"],
                                                             self.labels, self.faithful)
            records.append(record)
        compared = [r["identity" if self.kind == "option_order" else "answer"] for r in records]
        same = math_equivalent if self.family == "math" else None
        agree, pairs = extract.pair_agreement(compared, same)
        accuracy = rate(r["correct"] for r in records)
        meta = {k: v for k, v in sample.meta.items() if k != "variants"}
        meta |= {"agree": agree, "pairs": pairs, "variants": records}
        prediction = json.dumps([r["answer"] for r in records])
        return ScoredSample(sample.id, sample.prompt, prediction, sample.target, accuracy, meta)

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        if not scored:
            return {self.metric: float("nan")}
        c = self.config
        macro = self.family == "mmlu_pro" and self.kind != "non_greedy"
        rows = ((metrics.metric_name(self.family, self.kind, r["key"]), s.meta["group"], r["correct"])
                for s in scored for r in s.meta["variants"])
        per_variant = metrics.per_variant_accuracy(rows, macro)
        cr = metrics.bootstrap_ratio([s.meta["agree"] for s in scored], [s.meta["pairs"] for s in scored],
                                     c.bootstrap_samples, c.bootstrap_seed, c.ci_level)
        name = self.consistency_metric
        out = {self.metric: mean(s.score for s in scored)}
        out |= per_variant | metrics.summarize(per_variant)
        out |= {name: cr.value, f"{name}_se": cr.se, f"{name}_ci_low": cr.low, f"{name}_ci_high": cr.high,
                "num_questions": float(len(scored)),
                "num_generations": float(sum(len(s.meta["variants"]) for s in scored))}
        return out

    def score_bounds(self) -> tuple[float, float]:
        """A question's accuracy over its variants, in percent."""
        return (0.0, 100.0)

    def chance_level(self, samples: Sequence[Sample]) -> float:
        """A guessing model's accuracy on these questions: the mean of 100 / options (MMLU-Pro has up to 10,
        AGIEval 4 or 5 by subset), 0 for free-form MATH answers."""
        counts = [s.meta["num_options"] for s in samples]
        return mean(100.0 / k if k else 0.0 for k in counts) if counts else 0.0

    # ------------------------------------------------------------------ the second gate (Evaluator.extra_gates, called by runner/job/decide.py)
    def extra_gates(self, result: dict[str, float], reference: Any) -> list[Any]:
        """The consistency-rate gate against the same reference entry as the accuracy gate."""

        name = self.consistency_metric
        return [consistency_gate(name, result[name], result[f"{name}_se"], reference)]

    def reference_extras(self, result: dict[str, float]) -> dict[str, float]:
        """Keys recorded next to the accuracy by reference.mode=record: the consistency rate and its se."""
        name = self.consistency_metric
        values = {name: result[name], f"{name}_se": result[f"{name}_se"]}
        return {k: round(v, 4) for k, v in values.items() if math.isfinite(v)}  # no se from a single question
