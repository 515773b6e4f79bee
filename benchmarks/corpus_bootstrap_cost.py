"""What the bootstrap rule of a corpus metric costs: seconds per paired resample of lm-eval's own aggregations
(corpus BLEU through sacrebleu, a pooled word perplexity) on synthetic documents, at two corpus sizes.

Usage: ``python benchmarks/corpus_bootstrap_cost.py``; docs/statistics.md quotes its lines. Each resample
recomputes the metric on both sides (``runner.stats.corpus.replicate``), so the cost grows with the documents
times ``stats.corpus_bootstrap_iters``.
"""

from __future__ import annotations

import random
import time


def main() -> None:
    from lm_eval.api.metrics import bleu, weighted_perplexity

    from runner.stats.corpus import replicate

    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(300)]

    def sentence() -> str:
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(8, 30)))

    for n in (200, 1000):
        ref = [(sentence(), sentence()) for _ in range(n)]  # (reference, prediction), as lm-eval's bleu pools them
        new = [(r, sentence()) for r, _ in ref]
        started = time.perf_counter()
        replicate(ref, new, bleu, n_boot=100, seed=0)
        per = (time.perf_counter() - started) / 100
        print(f"bleu, {n} documents: {per * 1000:.0f} ms per paired resample; 1000 resamples {per * 1000:.0f} s")
        items = [(-rng.uniform(50, 200), rng.randint(20, 80)) for _ in range(n)]  # (log-likelihood, words)
        started = time.perf_counter()
        replicate(items, items, weighted_perplexity, n_boot=1000, seed=0)
        print(f"word_perplexity, {n} documents: 1000 paired resamples {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
