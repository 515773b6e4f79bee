"""What the bootstrap rule of a corpus metric costs: seconds per paired resample of lm-eval's own aggregations
(corpus BLEU through sacrebleu, a pooled word perplexity) on synthetic documents, at two corpus sizes, recomputed
whole on each resample and from summed per-document statistics (the additive form task=lm_eval uses for them).

Usage: ``python benchmarks/corpus_bootstrap_cost.py``; docs/statistics.md quotes its lines. Each resample
computes the metric on both sides (``runner.stats.corpus.replicate``), so the cost grows with the documents
times ``stats.corpus_bootstrap_iters``.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runner` and `evaluators` importable
    sys.path.insert(0, str(ROOT))


def main() -> None:
    from lm_eval.api.metrics import bleu, weighted_perplexity

    from evaluators.tasks.harness.corpus import corpus_metric
    from runner.contract.evaluator import CorpusMetric
    from runner.stats.corpus import replicate

    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(300)]

    def sentence() -> str:
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(8, 30)))

    for n in (200, 1000):
        ref = [(sentence(), sentence()) for _ in range(n)]  # (reference, prediction), as lm-eval pools them
        new = [(r, sentence()) for r, _ in ref]
        items = [(-rng.uniform(50, 200), rng.randint(20, 80)) for _ in range(n)]  # (log-likelihood, words)
        for name, aggregation, a, b in (("bleu", bleu, ref, new), ("word_perplexity", weighted_perplexity, items, items)):
            additive = corpus_metric(name, aggregation, 1.0, tuple)
            for label, metric, boots in (("recomputed", CorpusMetric(name, additive.compute), 100),
                                         ("summed statistics", additive, 1000)):
                started = time.perf_counter()
                replicate(a, b, metric, n_boot=boots, seed=0)
                per = (time.perf_counter() - started) / boots
                print(f"{name}, {n} documents, {label}: {per * 1000:.2f} ms per paired resample; "
                      f"1000 resamples {per * 1000:.1f} s")


if __name__ == "__main__":
    main()
