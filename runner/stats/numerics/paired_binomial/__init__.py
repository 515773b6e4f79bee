"""Paired 0/100 scores: McNemar's exact tail, Tango's score test backed by an exact unconditional test (whose
Buehler bounds are the printed ones), and the enumeration of every outcome (docs/statistics.md)."""
