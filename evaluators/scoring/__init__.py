"""Scoring parts more than one task uses: ROUGE aggregation, sandboxed program execution."""
