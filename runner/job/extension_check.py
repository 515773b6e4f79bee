"""Before a model loads: an extension (``stats.extend``) is judged on the same terms as its first look.

Every look of an extendable run is combined into one sequential test, so a look may not change the test: a
paired look 1 needs the reference's per-sample scores for every sample of the extended draw. That is known
before anything loads (the reference entry and the task's seeded draw need no model), so a reference that
does not cover the extension is refused here, with the size to record it at, instead of after the requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.contract.errors import ConfigError, UserError
from runner.contract.evaluator import Evaluator
from runner.contract.spec import AccuracySpec
from runner.references import samples as reference_samples, store as references
from runner.references.store import Reference
from runner.stats.data.hypothesis import HypothesisParams


@dataclass(frozen=True)
class Coverage:
    """What the reference's per-sample scores cover of an extension's draw."""

    entry: Reference
    first: int  # look 1's n
    look: int  # the last look this run evaluates (1-based)
    total: int  # samples of the last look this run evaluates
    scored: int  # samples the reference has a score for
    missing: int  # samples of the draw of ``total`` without a reference score
    by_ids: bool  # False: counted from the entry's n (the draw depends on the model's tokens)

    @property
    def covered(self) -> bool:
        return self.missing == 0


def entry_before_load(config: Any, evaluator: Evaluator, ref_dir: Path, defaults: HypothesisParams) -> Reference | None:
    """The entry a job will be judged against, looked up before the model loads: the dtype is known only then, so
    "auto" matches any dtype's entry, as ``dry_run=true`` and ``runner.plan`` look it up. None: no entry matches."""
    baseline = config.reference.against == "baseline"
    spec = AccuracySpec(dtype="auto", quant_algo=None if baseline else config.quant.quant_algo,
                        kv_cache_quant_algo=None if baseline else config.quant.kv_cache_quant_algo,
                        extra_acc_spec=evaluator.extra_acc_spec())
    try:
        return references.lookup(ref_dir, config.task.name, config.task.metric, config.model.hf_id, spec, defaults)
    except UserError:
        return None


def coverage(config: Any, evaluator: Evaluator, ref_dir: Path, entry: Reference, first: int) -> Coverage | None:
    """How far ``entry``'s per-sample scores reach into the draw of look 1 (``first`` samples) plus every
    ``stats.extend``; None when the looks are unpaired (``stats.method=unpaired``, or an entry without scores)."""
    recorded = entry.recorded or {}
    if config.stats.method == "unpaired" or not recorded.get("samples"):
        return None
    rows = reference_samples.load_rows(ref_dir, str(recorded["samples"]), recorded.get("samples_sha256"))
    total, look = first + sum(config.stats.extend), len(config.stats.extend) + 1
    try:
        ids = [s.id for s in evaluator.samples(total, config.seed)]
    except UserError:  # a draw by the model's token counts: the entry's n and seed stand for its samples
        same_seed = recorded.get("seed") is None or int(recorded["seed"]) == config.seed
        have = entry.samples_measured or len(rows)
        missing = max(0, total - have) if same_seed else total
        return Coverage(entry, first, look, total, len(rows), missing, False)
    return Coverage(entry, first, look, total, len(rows), sum(1 for i in ids if i not in rows), True)


def planned_total(first: int, planned: int) -> int:
    """The samples of the last planned look: every extension adds look 1's size."""
    return first * (planned + 1)


def refusal(cov: Coverage, fix: str) -> ConfigError:
    """The error of an extension the reference does not cover, said before any request."""
    look = cov.look
    drawn = "of the task's seeded draw" if cov.by_ids else "(counted from the entry's n: the draw needs the model)"
    return ConfigError(
        f"the reference's per-sample scores do not cover look {look}, so it could not be paired as look 1 was",
        where=f"{cov.entry.path} entry {cov.entry.index}",
        given=f"look {look} evaluates {cov.total} samples {drawn}; the reference scored {cov.scored} "
              f"(recorded with num_samples={cov.entry.samples_measured or cov.entry.params.num_samples}), "
              f"{cov.missing} of the {cov.total} have no reference score",
        allowed=f"a reference recorded on at least {cov.total} samples at seed {cov.entry.recorded.get('seed', 0)}"
                if cov.entry.recorded else None,
        fix=fix)


def generic_fix(cov: Coverage, planned: int, against: str) -> str:
    """What to do when the command that would record the reference is not known (a job run by hand)."""
    n = planned_total(cov.first, planned)
    who = "the unquantized model (no quant=)" if against == "baseline" else "this run's model and spec"
    return (f"record the reference on the {n} samples of every planned look: this run's task and model, {who}, "
            f"with reference.mode=record reference.overwrite=true task.num_samples={n}; then run this again with "
            f"task.num_samples={cov.first} (look 1's size). python -m runner.extend RUN_DIR prints the command")


def check_job(job: Any) -> None:
    """A job with ``stats.extend``: refuse, before the model loads, an extension its reference does not cover."""
    config = job.config
    if job.mode != "check" or not config.stats.extend:
        return
    entry = entry_before_load(config, job.evaluator, job.ref_dir, job.defaults)
    if entry is None or entry.threshold is not None:
        return
    first = job.asked_num_samples if job.asked_num_samples is not None else entry.params.num_samples
    cov = coverage(config, job.evaluator, job.ref_dir, entry, first)
    if cov is not None and not cov.covered:
        raise refusal(cov, generic_fix(cov, config.stats.extensions,
                                                                config.reference.against))
