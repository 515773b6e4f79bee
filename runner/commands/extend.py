"""``python -m runner.extend RUN_DIR [N]``: evaluate the next planned look of a finished job.

The job must have planned its extensions at its first look (``stats.extensions=K``): only then is alpha
left for a further look (runner/stats/sequential/extension.py). The command reruns the job with the same overrides
and ``stats.extend`` one size longer, in ``RUN_DIR-extend<k>``; the earlier looks come back from the
generation cache. Every extension adds as many samples as the first look: sizes are planned, since a
size chosen from the observed difference raises the false-alarm rate above alpha
(benchmarks/extension_simulation.py). N, if given, must be that size.

Consent is not inherited from a run directory: whatever the saved run said, the rerun gets
``model.trust_remote_code``, ``task.trust_include_code`` and ``task.include_allow`` only from this command's
own flags, and a saved run that had them is refused until the flags are given again.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from omegaconf import OmegaConf

from runner.contract.errors import EXIT_ERROR, UserError


def saved_plan(saved: Path) -> tuple[Any, int, list[int], int]:
    """The saved config, its planned extensions, those done and the first look's n; a :class:`UserError` when the
    file does not parse or lacks them (a config.yaml a job did not write, or one edited since)."""
    try:
        cfg = OmegaConf.load(saved)
        planned, done, first = cfg.stats.extensions, list(cfg.stats.extend), cfg.task.num_samples
    except Exception as err:  # yaml's and OmegaConf's errors, a missing key, a value of another type
        raise UserError("the run's config.yaml cannot be read as a job's config", where=str(saved),
                        given=f"{type(err).__name__}: {' '.join(str(err).split())}"[:300],
                        allowed="the config.yaml a job wrote (stats.extensions, stats.extend, task.num_samples)",
                        fix="give the directory of a job, unmodified") from None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (planned, first, *done)):
        raise UserError("the run's config.yaml holds planned extensions that are not whole numbers", where=str(saved),
                        given=f"stats.extensions={planned!r}, stats.extend={done!r}, task.num_samples={first!r}"[:300],
                        fix="give the directory of a job, unmodified")
    return cfg, planned, done, first


@dataclass(frozen=True)
class Consent:
    """What may run or be read beyond the project's own files: given on runner.extend's command line, never
    taken from the run directory."""

    trust_remote_code: bool = False
    trust_include_code: bool = False
    include_allow: tuple[str, ...] = ()


CONSENT_KEYS = ("model.trust_remote_code", "task.trust_include_code", "task.include_allow")


def _key(override: Any) -> str:
    return str(override).split("=", 1)[0].lstrip("+~")


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() not in ("", "false", "0", "no", "off", "null", "none", "[]")


def consent_overrides(cfg: Any, saved: list[Any], run_dir: Path, consent: Consent) -> list[str]:
    """The rerun's consent settings, from ``consent`` alone, appended last so they win over anything the saved
    overrides compose; refuses when the saved run (its config or its overrides) had consent this command lacks."""
    if any(_key(o) == "hydra.searchpath" for o in saved):
        raise UserError("runner.extend does not replay a config search path from a run directory", where=str(run_dir),
                        given="hydra.searchpath in .hydra/overrides.yaml",
                        fix="option files found there could set what runs: run the next look yourself with "
                            "python -m runner and the overrides you trust")
    task, model = cfg.get("task") or {}, cfg.get("model") or {}
    had = {"model.trust_remote_code": _truthy(model.get("trust_remote_code")),
           "task.trust_include_code": _truthy(task.get("trust_include_code")),
           "task.include_allow": set(map(str, task.get("include_allow") or [])) - set(consent.include_allow)}
    for override in saved:
        key = _key(override)
        if key in had and "=" in str(override) and _truthy(str(override).split("=", 1)[1]):
            if key != "task.include_allow" or not consent.include_allow:
                had[key] = had[key] or True
    flags = {"model.trust_remote_code": "--trust-remote-code" if not consent.trust_remote_code else "",
             "task.trust_include_code": "--trust-include-code" if not consent.trust_include_code else "",
             "task.include_allow": " ".join(f"--include-allow {d}" for d in sorted(had["task.include_allow"] or ()))
             if isinstance(had["task.include_allow"], set) else "--include-allow DIR"}
    missing = [key for key, value in had.items() if value and flags[key]]
    if missing:
        raise UserError("the run being extended had consent to run code or read files, and runner.extend does not "
                        "inherit consent from a run directory", where=str(run_dir), given=", ".join(missing),
                        fix="read the run's task files and check its model; if you trust them, give "
                            f"{' '.join(flags[k] for k in missing)} to runner.extend")
    out = [f"model.trust_remote_code={str(consent.trust_remote_code).lower()}"]
    if "trust_include_code" in task:
        out.append(f"task.trust_include_code={str(consent.trust_include_code).lower()}")
    if "include_allow" in task:
        out.append(f"task.include_allow=[{','.join(consent.include_allow)}]")
    return out


def overrides_for(run_dir: Path, more: int | None, consent: Consent = Consent()) -> list[str]:
    """The job's own overrides with one more extension and this command's consent; refuses a run that cannot be
    extended."""

    saved, asked = run_dir / "config.yaml", run_dir / ".hydra" / "overrides.yaml"
    if not saved.is_file() or not asked.is_file():
        raise UserError("not a job directory", where=str(run_dir), given="no config.yaml and .hydra/overrides.yaml",
                        fix="give the directory a job wrote its report.txt in (its outputs: line)")
    cfg, planned, done, first = saved_plan(saved)
    if len(done) >= planned:
        raise UserError("this run has no planned extension left", where=str(run_dir),
                        given=f"stats.extensions={planned}, {len(done)} done",
                        fix="a further look needs alpha planned for it at the first look: run the larger n as a "
                            "new job, or plan extensions from the start with stats.extensions=3")
    look1 = _first_look(run_dir)
    step = look1 if look1 is not None else first
    if more is not None and more != step:
        raise UserError("an extension adds the planned number of samples: as many as the first look",
                        where="N", given=str(more), allowed=str(step),
                        fix=f"python -m runner.extend {run_dir} (adds {step}); a size chosen from the data would "
                            "raise the false-alarm rate above alpha")
    try:
        saved_overrides = list(OmegaConf.load(asked))
    except Exception as err:  # yaml's and OmegaConf's errors, a file that is not a list
        raise UserError("the run's .hydra/overrides.yaml cannot be read as a list of overrides", where=str(asked),
                        given=f"{type(err).__name__}: {' '.join(str(err).split())}"[:300],
                        fix="give the directory of a job, unmodified") from None
    granted = consent_overrides(cfg, saved_overrides, run_dir, consent)
    pinned = ("stats.extend", "stats.method", "task.num_samples", "hydra.run.dir", "output_dir", *CONSENT_KEYS)
    keep = [o for o in saved_overrides if _key(o) not in pinned]
    extended = [*done, step]
    target = run_dir.with_name(f"{run_dir.name.split('-extend')[0]}-extend{len(extended)}")
    # look 1's settings, pinned: its n (a reference recorded again with another n would move it), its rule
    kind = _first_kind(run_dir)
    method = [] if kind is None else [f"stats.method={'unpaired' if kind == 'unpaired' else 'paired'}"]
    look = [*keep, *granted, f"task.num_samples={step}", *method, f"stats.extend=[{','.join(map(str, extended))}]"]
    check_reference(run_dir, look, record_command(keep, granted, cfg, step * (planned + 1)))
    return [*look, f"hydra.run.dir={target}"]


def record_command(keep: list[Any], granted: list[str], cfg: Any, n: int) -> str:
    """The command that records the reference on every planned look's samples: the run's own overrides, without
    its quantization when it was judged against the unquantized baseline, and without look 1's settings."""
    baseline = str((cfg.get("reference") or {}).get("against")) == "baseline"
    dropped = ("stats", "hydra", "reference.mode", "reference.overwrite", "reference.against", "dry_run")
    kept = [str(o) for o in keep
            if not any(_key(o) == d or _key(o).startswith(d + ".") for d in dropped)
            and not (baseline and (_key(o) == "quant" or _key(o).startswith("quant.")))]
    return " ".join(["python -m runner", *kept, *granted, "reference.mode=record", "reference.overwrite=true",
                     f"task.num_samples={n}"])


def check_reference(run_dir: Path, overrides: list[str], record: str) -> None:
    """Before anything loads: the rerun is judged against look 1's reference entry, on look 1's samples, and the
    entry's per-sample scores cover every sample of the extended draw when look 1 was paired."""
    from runner.job.extension_check import coverage, entry_before_load, refusal  # lazy: --help stays fast

    report = _report(run_dir)
    config, evaluator, ref_dir, defaults = compose_task(overrides)
    if config.reference.mode != "check":
        return
    entry = entry_before_load(config, evaluator, ref_dir, defaults)
    if entry is None:
        return  # the job says why, before its requests
    first = config.task.num_samples
    same_entry(run_dir, report.get("reference_entry"), entry, ref_dir, first, _first_kind(run_dir))
    same_first_look(run_dir, evaluator, first, config.seed)
    cov = coverage(config, evaluator, ref_dir, entry, first)
    if cov is not None and not cov.covered:
        flags, why = demo_consent(ref_dir, config.task.name, config.model.hf_id, entry.spec)
        raise refusal(cov, f"record the reference on the {first * (config.stats.extensions + 1)} samples of every "
                           f"planned look: {' '.join([record, *flags])}{why}; then python -m runner.extend {run_dir} "
                           f"again (look 1 stays at n={first}: runner.extend pins it)")


def demo_consent(ref_dir: Path, task: str, model: str, spec: Any) -> tuple[list[str], str]:
    """The flag a recording into an entry the embedded demo reads needs (``reference.overwrite_demo=true``; refused
    without it), and why, so the printed command works when followed; none for any other entry."""
    from runner.job import demo  # lazy: composes the demo's sweeps, only when a refusal is printed

    readers = demo.readers(ref_dir, task, model, spec)
    if not readers:
        return [], ""
    return ["reference.overwrite_demo=true"], (
        f" (reference.overwrite_demo=true: this entry is the embedded demo's reference, read by "
        f"{demo.describe(readers)}; recording replaces it there too, git checkout references/ restores it; or record "
        "into a directory of your own with reference.dir=DIR and run the extension with the same reference.dir)")


def same_entry(run_dir: Path, was: Any, entry: Any, ref_dir: Path, first: int, kind: str | None) -> None:
    """Refuse a rerun whose reference entry is not the one look 1 was judged against, or whose look 1 would now
    read other reference figures (a paired entry recorded again may add samples; look 1's scores must stay)."""
    if not isinstance(was, dict):
        return  # a run that did not record its entry
    where = f"{entry.path} entry {entry.index}"
    if (was.get("file"), was.get("index")) != (entry.path.name, entry.index):
        raise UserError("the rerun would be judged against another reference entry than look 1", where=where,
                        given=f"look 1: {was.get('file')} entry {was.get('index')}",
                        fix="restore the references look 1 used (git checkout references/), then extend again")
    recorded = entry.recorded or {}
    if kind == "unpaired" or not was.get("samples"):
        if (entry.value, entry.params.num_samples) == (was.get("value"), was.get("num_samples")):
            return
        raise UserError("the reference entry changed since look 1, and the looks of an unpaired run compare with "
                        "one fixed reference", where=where,
                        given=f"look 1: {was.get('value')} on {was.get('num_samples')} samples; now: {entry.value} on "
                              f"{entry.params.num_samples}",
                        fix="restore the entry look 1 used (git checkout references/), then extend again")
    if recorded.get("samples_sha256") == was.get("samples_sha256"):
        return
    from runner.references.samples import load_rows  # lazy: --help stays fast

    ids = _first_ids(run_dir, first)
    try:
        old = load_rows(ref_dir, str(was["samples"]), was.get("samples_sha256"))
        new = load_rows(ref_dir, str(recorded.get("samples")), recorded.get("samples_sha256"))
    except UserError as err:
        raise UserError("the reference entry was recorded again since look 1, and look 1's scores cannot be checked",
                        where=where, given=err.what, fix="restore the references look 1 used (git checkout "
                        "references/), then extend again") from None
    changed = [i for i in ids if i not in new or old.get(i) is None or new[i].score != old[i].score]
    if changed:
        raise UserError("the reference entry was recorded again since look 1 with other scores for look 1's samples",
                        where=where, given=f"{len(changed)} of look 1's {len(ids)} samples changed, e.g. {changed[0]}",
                        fix="record it with the model and settings look 1's reference had, or restore the references "
                            "look 1 used (git checkout references/)")


def same_first_look(run_dir: Path, evaluator: Any, first: int, seed: int) -> None:
    """Refuse a rerun whose look 1 would evaluate other samples than the run did."""
    try:
        drawn = {s.id for s in evaluator.samples(first, seed)}
    except UserError:
        return  # drawn by the model's token counts: the job checks the looks are nested
    was = set(_first_ids(run_dir, first))
    if was and drawn != was:
        raise UserError("the rerun's look 1 would evaluate other samples than the run's look 1", where=str(run_dir),
                        given=f"{len(was - drawn)} of look 1's {len(was)} samples are not in the task's draw of {first}",
                        fix="evaluate the larger n as a new job with its own fixed test")


def compose_task(overrides: list[str]) -> tuple[Any, Any, Path, Any]:
    """The rerun's typed config, its task's evaluator (no model, no backend), reference directory and test
    parameters: what the checks before the rerun need."""
    from hydra import compose, initialize_config_module  # lazy: --help stays fast
    from runner.config.store import register_schemas  # lazy: --help stays fast
    from runner.contract.build import build  # lazy: --help stays fast
    from runner.job.flow import typed  # lazy: --help stays fast
    from runner.references.store import default_reference_dir  # lazy: --help stays fast
    from runner.stats.data.hypothesis import HypothesisParams  # lazy: --help stays fast

    register_schemas()
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("config", overrides=[*[o for o in overrides if not _key(o).startswith("hydra.")], "output_dir=."])
    config = typed(cfg)
    t = config.task
    evaluator = build(t, "task")
    ref_dir = Path(config.reference.dir) if config.reference.dir else default_reference_dir()
    return config, evaluator, ref_dir, HypothesisParams(t.alpha, t.beta, t.sigma, t.num_samples, t.higher_is_better)


def _report(run_dir: Path) -> dict[str, Any]:
    try:
        report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return report if isinstance(report, dict) else {}


def _first_ids(run_dir: Path, first: int) -> list[str]:
    """The sample ids of look 1, from the run's samples.jsonl (look 1 comes first)."""
    try:
        lines = (run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines()
        return [str(json.loads(line)["sample_id"]) for line in lines[:first] if line.strip()]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _first_kind(run_dir: Path) -> str | None:
    """The test of look 1 (mcnemar, paired_mean or unpaired), from the run's report.json; None when unknown."""
    from runner.stats.rules.extension import ExtensionResult  # lazy: --help stays fast

    test = ((_report(run_dir).get("decision") or {}).get("sequential") or {}).get("test")
    kinds = {ExtensionResult(k, [], 0, None, None, "undecided", None, None, None).test: k
             for k in ("unpaired", "mcnemar", "paired_mean")}
    return kinds.get(test)


def _first_look(run_dir: Path) -> int | None:
    """The first look's size as the job recorded it (report.json), None when it wrote none."""
    try:
        seq = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))["decision"]["sequential"]
        return int(seq["looks"][0]["n"])
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.extend", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a job's output directory (its report's outputs: line)")
    parser.add_argument("n", type=int, nargs="?", help="samples to add: the first look's size, as planned")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="model.trust_remote_code=true for the rerun (never taken from the run directory)")
    parser.add_argument("--trust-include-code", action="store_true",
                        help="task.trust_include_code=true for the rerun (never taken from the run directory)")
    parser.add_argument("--include-allow", action="append", default=[], metavar="DIR",
                        help="a task.include_allow directory for the rerun (never taken from the run directory)")
    args = parser.parse_args(argv)
    consent = Consent(args.trust_remote_code, args.trust_include_code, tuple(args.include_allow))
    try:
        overrides = overrides_for(args.run_dir.resolve(), args.n, consent)
    except UserError as err:
        print(err.render(), file=sys.stderr)
        return EXIT_ERROR
    print("python -m runner " + " ".join(overrides), flush=True)
    return subprocess.run([sys.executable, "-m", "runner", *overrides]).returncode

