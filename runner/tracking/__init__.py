"""Where a job's params, metrics, tags and artifacts go: MLflow, or nowhere."""
