"""Clustered samples (``stats.cluster=auto``): CR2 variances with a small-sample t reference, a clustered claim
only where the unclustered test shows it too, and none below ``stats.min_clusters`` clusters."""
