"""Tables logged with a run: every sample, and the samples whose score moved against the reference.

The flipped-samples table is the first thing to read when chasing a quantization regression: the
questions the reference answered right and the new model wrong (and the reverse), with the prompt,
the target and the new output. Reference outputs are not kept with the references (their size, and
datasets such as GPQA ask that their content not be published); the reference run's own
``samples.jsonl`` artifact holds them.
"""

from __future__ import annotations

from typing import Any, Sequence

from runner.contract.evaluator import ROW

PROMPT_CHARS = 4000


def _rows(samples: Sequence[Any]) -> dict[str, list[Any]]:
    """The column of the dataset's own row ids, for tasks whose sample id is not one (``meta["row"]``: lm-eval's
    samples are keyed by doc index; the row column names the document's id, or says it is the doc index)."""
    if not any(ROW in (s.meta or {}) for s in samples):
        return {}
    return {ROW: [str((s.meta or {}).get(ROW, s.sample_id)) for s in samples]}


def samples_table(scored: Sequence[Any]) -> dict[str, list[Any]]:
    return {"sample_id": [s.sample_id for s in scored]} | _rows(scored) | {"score": [s.score for s in scored],
            "target": [str(s.target) for s in scored], "prediction": [str(s.prediction) for s in scored],
            "prompt": [s.prompt[-PROMPT_CHARS:] for s in scored]}


def flipped_table(reference_scores: dict[str, float], scored: Sequence[Any],
                  higher_is_better: bool) -> dict[str, list[Any]] | None:
    """Samples scored differently from the reference, worst first (None when no sample is shared)."""
    shared = [s for s in scored if s.sample_id in reference_scores]
    if not shared:
        return None
    sign = 1.0 if higher_is_better else -1.0
    moved = sorted((s for s in shared if s.score != reference_scores[s.sample_id]),
                   key=lambda s: sign * (s.score - reference_scores[s.sample_id]))
    return {"sample_id": [s.sample_id for s in moved]} | _rows(moved) | {
            "change": ["worse" if sign * (s.score - reference_scores[s.sample_id]) < 0 else "better" for s in moved],
            "reference_score": [reference_scores[s.sample_id] for s in moved], "score": [s.score for s in moved],
            "target": [str(s.target) for s in moved], "prediction": [str(s.prediction) for s in moved],
            "prompt": [s.prompt[-PROMPT_CHARS:] for s in moved]}


def dataset_rows(scored: Sequence[Any]) -> dict[str, list[Any]]:
    """What was evaluated, as MLflow's input dataset: ids, prompts and targets (no outputs)."""
    return {"sample_id": [s.sample_id for s in scored], "prompt": [s.prompt[-PROMPT_CHARS:] for s in scored],
            "target": [str(s.target) for s in scored]}
