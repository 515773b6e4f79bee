"""Shared numerics of the rules: quantiles, power, resampling, cluster-robust variance, paired-binomial math, the
betting capital process. They import only numerics and data."""
