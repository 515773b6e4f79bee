"""The statistics' data types: claims, verdicts, tolerance, the test's parameters, paired outcomes, reference
entries and paired scores. They import nothing above them."""
