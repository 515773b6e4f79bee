"""Corpus metrics (pooled perplexity, BLEU, chrF, TER, ...): paired and unpaired bootstrap-t on the corpus figure,
resampling documents (or clusters) whole, with a guard against resamples that show no change."""
