"""TensorRT-LLM's unpaired test as a rule: its claims as calibrated. The test, its power and its interval are
:mod:`runner.stats.numerics.ztest` (the corpus and threshold rules use them too)."""

from __future__ import annotations

from runner.stats.data.claims import DeclaredRule


CLAIMS = (
    DeclaredRule("unpaired z-test: sigma sqrt(1/n + 1/n_ref)", "no per-sample reference scores (TensorRT-LLM's test)",
         ("NO-GO at drop = margin (0)", "GO at drop = tolerance"), "the Wald bound, upstream's z-test inverted"),
)
"""The rules of this module and their claims, as the calibration grid measures them."""
