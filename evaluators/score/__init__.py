"""SCORE robustness tasks (Nalbandyan et al., NVIDIA, NAACL 2025): option order, prompt and sampling
robustness on MMLU-Pro, AGIEval and MATH, as lm-evaluation-harness's ``tasks/score`` computes them.

One runner sample is one question; its requests are all of that question's variants, so a seeded
question subset keeps every variant of a sampled question, and the per-sample score (the
question's accuracy over its variants) feeds the core hypothesis test.
"""
