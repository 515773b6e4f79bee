"""A Hydra multirun as one sweep: MLflow parent run, summary, family-wise verdict, GPU spreading."""
