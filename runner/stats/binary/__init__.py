"""Paired 0/100 scores: McNemar's exact test for NO-GO at margin 0; for a margin or the tolerance, Tango's score test
backed by an exact unconditional test, whose Buehler bounds are the printed ones (docs/statistics.md)."""
