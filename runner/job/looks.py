"""The looks of a job: one at every sample, ``stats.sequential``'s planned looks, or an extendable run's.

An extendable run (``stats.extensions=K``) evaluates its first ``task.num_samples`` samples as look 1 and
each of ``stats.extend``'s sizes as a further look, drawn as the task would draw the larger subset: the
looks must be nested (every earlier sample is also in the larger draw), so the earlier looks keep their
data and come back from the generation cache. The sizes are planned at look 1: every extension adds as
many samples as look 1 had. A size chosen after seeing the data (a small look when Z is just under its
bound) raises the false-alarm rate (0.060 at alpha 0.05), so any other size is refused."""

from __future__ import annotations

import itertools

from runner.contract.errors import ConfigError
from runner.contract.evaluator import Evaluator, Sample
from runner.job.state import Job
from runner.references.store import Reference
from runner.stats.rules.extension import Extensions
from runner.stats.numerics.group_sequential import look_fractions
from runner.stats.conclusion import Monitor
from runner.stats.rules.sequential import Monitor as SequentialMonitor
from runner.stats.numerics.looks import look_sizes
from runner.stats.data.hypothesis import HypothesisParams
from runner.job.warn import warn

MIN_LOOK_SAMPLES = 10
"""The fewest samples a planned look may decide on."""


def monitor_for(job: Job, reference: Reference | None, params: HypothesisParams,
                samples: list[Sample]) -> tuple[list[Sample], Monitor | None]:
    """The samples in look order and the monitor of their looks (None: one look at every sample)."""
    stats = job.config.stats
    kind = "stats.sequential" if stats.sequential.enabled else "stats.extensions" if stats.extensions else None
    if kind is None or not samples:
        return samples, None
    if reference is None:
        job.notes.append(f"{kind}: no verdict to reach (reference.mode={job.mode}); every sample evaluated")
        return samples, None
    if reference.threshold is not None or params.sigma == 0:
        job.notes.append(f"{kind} does not apply to a deterministic rule (explicit threshold or sigma 0); "
                         "every sample evaluated")
        return samples, None
    if stats.sequential.enabled:
        check_first_look(look_sizes(look_fractions(stats.sequential), len(samples)), job.task.name)
        return samples, SequentialMonitor(stats.sequential, len(samples), params.alpha, params.beta)
    ordered, sizes = nested_looks(job.evaluator, samples, list(stats.extend), job.config.seed, job.task.name)
    for note in extension_notes(list(stats.extend), sizes):
        warn(job, note)
    if stats.extend:
        job.notes.append(looks_note(sizes, ordered, job.reference_rows, stats.method))
    tolerance = job.tolerance.points if job.tolerance is not None else 0.0
    return ordered, Extensions(stats.extensions, sizes, params.alpha, stats.sequential.efficacy, tolerance,
                               params.higher_is_better)


def check_first_look(sizes: list[int], task: str) -> None:
    """Refuse planned looks whose first one would decide on fewer than :data:`MIN_LOOK_SAMPLES` samples: the
    boundaries treat each look's statistic as normal, which a handful of samples does not give (a paired
    t-statistic on 2 samples has one degree of freedom), and a stop there would rest on almost nothing."""
    if sizes[0] < MIN_LOOK_SAMPLES:
        n = sizes[-1]
        most = max(1, n // MIN_LOOK_SAMPLES)
        raise ConfigError("the first planned look would decide on too few samples", where="stats.sequential",
                          given=f"looks of {sizes} samples for task={task} (n={n})",
                          allowed=f"a first look of at least {MIN_LOOK_SAMPLES} samples",
                          fix=f"fewer looks (stats.sequential.looks={most} or less at n={n}), a larger "
                              "task.num_samples, or stats.sequential.enabled=false (one fixed test)")


def extension_notes(extend: list[int], sizes: list[int]) -> list[str]:
    """Say when an extension's draw added more samples than it asked for (a task that draws the same number from
    every stratum rounds up), so the look's n is not a surprise."""
    notes = []
    for k, (asked, low, high) in enumerate(zip(extend, sizes, sizes[1:]), 1):
        if high - low != asked:
            why = "the same number from every stratum, rounding up" if high - low > asked else "the dataset has no more"
            notes.append(f"extension {k} asked for {asked} more samples; the task's draw added {high - low} ({why}): "
                         f"look {k + 1} decides on n={high}")
    return notes


def looks_note(sizes: list[int], ordered: list[Sample], rows: dict | None, method: str) -> str:
    """What each look of an extended run evaluates, and what it is compared with."""
    looks = [f"look 1 n={sizes[0]} (look 1's samples)"]
    looks += [f"look {k} n={high} ({high - low} added by the task's draw of {high})"
              for k, (low, high) in enumerate(zip(sizes, sizes[1:]), 2)]
    if method != "unpaired" and rows and all(s.id in rows for s in ordered):
        compared = "every look paired with the reference's scores of the same samples"
    else:
        compared = "every look the unpaired test against the entry's score"
    return f"looks: {', '.join(looks)}; {compared}"


def nested_looks(evaluator: Evaluator, first: list[Sample], extend: list[int], seed: int,
                 task: str) -> tuple[list[Sample], list[int]]:
    """``first`` then, per extension, the samples the task's larger seeded draw adds; the cumulative sizes."""
    planned = [e for e in extend if e != len(first)]
    if planned:
        raise ConfigError("an extension adds the planned number of samples: as many as the first look",
                          where="stats.extend", given=f"{extend} after a first look of {len(first)} samples",
                          fix=f"stats.extend=[{','.join([str(len(first))] * len(extend))}]: python -m runner.extend "
                              "RUN_DIR adds the planned size; a size chosen from the data would raise the "
                              "false-alarm rate above alpha")
    ordered, seen, sizes = list(first), {s.id for s in first}, [len(first)]
    for total in itertools.accumulate(extend, initial=len(first)):
        if total == len(first):
            continue
        drawn = evaluator.samples(total, seed)
        ids = {s.id for s in drawn}
        if not seen <= ids:
            raise ConfigError("this task's seeded subsets are not nested, so a run cannot be extended",
                              where=f"task={task}", given=f"stats.extend={extend}",
                              fix="plan the looks up front with stats.sequential.enabled=true, or evaluate the "
                                  "larger n as a new run (with its own fixed test)")
        added = [s for s in drawn if s.id not in seen]
        if not added:
            raise ConfigError("the extension adds no sample: the dataset has no more", where="stats.extend",
                              given=f"{extend} after {len(first)} samples ({len(ordered)} in all)",
                              fix="extend by fewer samples, or stop: this is all the task has")
        ordered += added
        seen |= {s.id for s in added}
        sizes.append(len(ordered))
    return ordered, sizes
