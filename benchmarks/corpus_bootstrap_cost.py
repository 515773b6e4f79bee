"""What the bootstrap rule of a corpus metric costs: seconds per paired resample, and for the jackknife path the
leave-one-out recomputations, on synthetic documents at sizes that run in about a minute.

Three paths: lm-eval's corpus BLEU and pooled word perplexity from summed per-document statistics (the additive
form task=lm_eval uses for them); the same BLEU recomputed whole on each resample (what an aggregation without an
additive form would cost if it were as slow as sacrebleu); and lm-eval's own ``f1`` and ``matthews_corrcoef``
(sklearn), which take the recomputed path with the jackknife influence. The recomputed path costs ``2 B`` metric
calls per paired bootstrap plus ``2 n`` for the jackknife, each over ``n`` documents: it grows as ``n (B + n)``.

Usage: ``python benchmarks/corpus_bootstrap_cost.py``; docs/statistics.md quotes its lines.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runner` and `evaluators` importable
    sys.path.insert(0, str(ROOT))


def _timed(call) -> float:  # noqa: ANN001
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> None:
    from lm_eval.api.metrics import bleu, f1_score, matthews_corrcoef, weighted_perplexity

    from evaluators.tasks.harness.corpus import corpus_metric
    from runner.contract.evaluator import CorpusMetric
    from runner.stats.numerics import corpus_bootstrap as c
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(300)]

    def sentence() -> str:
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(8, 30)))

    def report(name: str, n: int, label: str, a, b, metric, boots: int) -> None:  # noqa: ANN001
        groups = c.units_of(n, None)
        total = _timed(lambda: c.replicate(a, b, metric, n_boot=boots, seed=0))
        jack = _timed(lambda: c._jackknife(metric, a, b, groups)) if metric.statistics is None else 0.0
        per = (total - jack) / boots
        line = f"{name}, {n} documents, {label}: {per * 1000:.2f} ms per paired resample"
        if metric.statistics is None:
            line += f", jackknife {jack:.1f} s"
        print(f"{line}; 1000 resamples {per * 1000 + jack:.1f} s", flush=True)

    for n in (200, 1000):
        ref = [(sentence(), sentence()) for _ in range(n)]  # (reference, prediction), as lm-eval pools them
        new = [(r, sentence()) for r, _ in ref]
        items = [(-rng.uniform(50, 200), rng.randint(20, 80)) for _ in range(n)]  # (log-likelihood, words)
        for name, aggregation, a, b in (("bleu", bleu, ref, new), ("word_perplexity", weighted_perplexity, items, items)):
            report(name, n, "summed statistics", a, b, corpus_metric(name, aggregation, 1.0, tuple), 1000)
        if n > 200:  # sklearn's recomputed metrics: 200 documents already take about a minute
            continue
        gold = [rng.random() < 0.68 for _ in range(n)]
        ref_l = [(g, g if rng.random() < 0.8 else not g) for g in gold]
        new_l = [(g, p if rng.random() > 0.05 else not p) for g, p in ref_l]
        for name, aggregation in (("f1", f1_score), ("matthews_corrcoef", matthews_corrcoef)):
            report(name, n, "recomputed", ref_l, new_l, corpus_metric(name, aggregation, 100.0, tuple), 100)
    n = 200  # BLEU recomputed whole: about 0.1 s per call at 1000 documents, so 200 keeps this within a minute
    ref = [(sentence(), sentence()) for _ in range(n)]
    new = [(r, sentence()) for r, _ in ref]
    report("bleu", n, "recomputed", ref, new, CorpusMetric("bleu", corpus_metric("bleu", bleu, 1.0, tuple).compute), 50)


if __name__ == "__main__":
    main()
