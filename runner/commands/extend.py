"""``python -m runner.extend RUN_DIR [N]``: evaluate the next planned look of a finished job.

The job must have planned its extensions at its first look (``stats.extensions=K``): only then is alpha
left for a further look (runner/stats/extension.py). The command reruns the job with the same overrides
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
    keep = [o for o in saved_overrides if _key(o) not in ("stats.extend", "hydra.run.dir", "output_dir", *CONSENT_KEYS)]
    extended = [*done, step]
    target = run_dir.with_name(f"{run_dir.name.split('-extend')[0]}-extend{len(extended)}")
    return [*keep, *granted, f"stats.extend=[{','.join(map(str, extended))}]", f"hydra.run.dir={target}"]


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

