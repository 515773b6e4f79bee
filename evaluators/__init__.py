"""Evaluators: one module per task family. Each turns dataset rows into samples and requests,
and scores responses. Scoring is pure, so it is unit-tested on canned responses."""
