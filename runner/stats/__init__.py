"""The statistics behind a verdict: unpaired and paired tests, the decision, planning, multiplicity."""
