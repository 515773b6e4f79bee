"""Step 7 (``reference.mode=record``): the score becomes the reference of the effective spec, with its
per-sample scores and provenance."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from runner.contract.evaluator import CORPUS_ITEM, LOGLIKELIHOODS, TOP_TOKENS, Sample, ScoredSample
from runner.contract.indicators import INDICATORS
from runner.stats.numerics.scale import near_chance
from runner.job.state import Job, Loaded
from runner.references import recording, samples as reference_samples
from runner.references.noise import HOST_KEY, NOISE_KEY, noise_block
from runner.references.store import user_reference_dir
from runner.stats.data.noise import Replicate
from runner.stats.settings import resolve_tolerance
from runner.tracking.provenance import project_commit
from runner.job.warn import warn



def warn_at_chance(job: Job, samples: list[Sample], metrics: dict[str, float]) -> str | None:
    """Before a score becomes a reference: a warning when it lies within the tolerance of the task's chance level
    (a guessing model's score, or the metric's floor), since no later run can tell a regression to guessing from
    noise against it."""
    score = metrics[job.task.metric]
    tolerance = resolve_tolerance(job.config.stats, job.task, score)
    note = near_chance(score, tolerance.points, job.evaluator.chance_level(samples), job.task.higher_is_better)
    if note is None:
        return None
    note = f"{note} (recorded {job.task.metric}={score:.4f}; the tolerance: {tolerance.source})"
    warn(job, note)
    return note


def record(job: Job, loaded: Loaded, scored: list[ScoredSample], metrics: dict[str, float],
           replicates: list[Replicate] | None = None) -> Path:
    """The entry of the effective spec written with its per-sample scores, provenance, the host it was measured on
    and, with ``reference.noise=replicate``, its A/A ``replicates``."""
    task, info, score = job.task, loaded.info, metrics[job.task.metric]
    samples_file, samples_sha = reference_samples.store(
        job.ref_dir, task.name, ((s.sample_id, s.score, s.prompt) for s in scored),
        {s.sample_id: s.meta[CORPUS_ITEM] for s in scored if s.meta.get(CORPUS_ITEM) is not None},
        {s.sample_id: s.meta[LOGLIKELIHOODS] for s in scored if isinstance(s.meta.get(LOGLIKELIHOODS), list)},
        {s.sample_id: s.meta[INDICATORS] for s in scored if s.meta.get(INDICATORS) is not None},
        top_tokens={s.sample_id: s.meta[TOP_TOKENS] for s in scored if isinstance(s.meta.get(TOP_TOKENS), str)})
    path = recording.record(
        job.ref_dir, task.name, task.metric, job.model.hf_id, loaded.spec, score,
        provenance={
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "backend": info.name, "device": info.device, "versions": dict(info.versions),
            "num_samples": len(scored), "seed": job.config.seed, "mlflow_run_id": job.tracker.run_id,
            "runner_commit": project_commit(), "model_source": info.details.get("model_source", ""),
            "dataset_source": job.evaluator.source_used or "",
            "samples": samples_file, "samples_sha256": samples_sha, HOST_KEY: dict(job.host),
        } | ({NOISE_KEY: noise_block("replicate", replicates)} if replicates else {}),
        extra={"num_samples": task.num_samples} | job.evaluator.reference_extras(metrics))
    job.notes.append(f"recorded {task.metric}={score:.4f} for {job.model.hf_id} [{loaded.spec.describe()}] in {path}")
    if not job.config.reference.dir and job.ref_dir == user_reference_dir():
        job.notes.append(SHARE_NOTE.format(dir=job.ref_dir))
    return path


SHARE_NOTE = ("{dir} is your references directory (a model other than the embedded one records there unless "
              "reference.dir says otherwise; $RUNNER_REFERENCES_DIR moves it; git ignores it in a checkout): later runs "
              "of this model find it by themselves; to share it, copy the directory (its <task>.yaml and samples/) "
              "where your team keeps references and pass reference.dir=THERE, or add the entry to the project's "
              "references/ on purpose with reference.dir=references")
