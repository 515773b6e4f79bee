"""Step 7 (``reference.mode=record``): the score becomes the reference of the effective spec, with its
per-sample scores and provenance."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from runner.contract.evaluator import ScoredSample
from runner.job.state import Job, Loaded
from runner.references import recording, samples as reference_samples
from runner.tracking.provenance import project_commit


def record(job: Job, loaded: Loaded, scored: list[ScoredSample], metrics: dict[str, float]) -> Path:
    task, info, score = job.task, loaded.info, metrics[job.task.metric]
    samples_file, samples_sha = reference_samples.store(
        job.ref_dir, task.name, ((s.sample_id, s.score, s.prompt) for s in scored))
    path = recording.record(
        job.ref_dir, task.name, task.metric, job.model.hf_id, loaded.spec, score,
        provenance={
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "backend": info.name, "device": info.device, "versions": dict(info.versions),
            "num_samples": len(scored), "seed": job.config.seed, "mlflow_run_id": job.tracker.run_id,
            "runner_commit": project_commit(), "model_source": info.details.get("model_source", ""),
            "dataset_source": job.evaluator.source_used or "",
            "samples": samples_file, "samples_sha256": samples_sha,
        },
        extra={"num_samples": task.num_samples} | job.evaluator.reference_extras(metrics))
    job.notes.append(f"recorded {task.metric}={score:.4f} for {job.model.hf_id} [{loaded.spec.describe()}] in {path}")
    return path
