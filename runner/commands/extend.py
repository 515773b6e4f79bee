"""``python -m runner.extend RUN_DIR [N]``: evaluate the next planned look of a finished job.

The job must have planned its extensions at its first look (``stats.extensions=K``): only then is alpha
left for a further look (runner/stats/extension.py). The command reruns the job with the same overrides
and ``stats.extend`` one size longer, in ``RUN_DIR-extend<k>``; the earlier looks come back from the
generation cache. Every extension adds as many samples as the first look: sizes are planned, since a
size chosen from the observed difference raises the false-alarm rate above alpha
(benchmarks/extension_simulation.py). N, if given, must be that size.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from omegaconf import OmegaConf

from runner.contract.errors import EXIT_ERROR, UserError


def saved_plan(saved: Path) -> tuple[int, list[int], int]:
    """The saved config's planned extensions, those done and the first look's n; a :class:`UserError` when the
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
    return planned, done, first


def overrides_for(run_dir: Path, more: int | None) -> list[str]:
    """The job's own overrides with one more extension; refuses a run that cannot be extended."""

    saved, asked = run_dir / "config.yaml", run_dir / ".hydra" / "overrides.yaml"
    if not saved.is_file() or not asked.is_file():
        raise UserError("not a job directory", where=str(run_dir), given="no config.yaml and .hydra/overrides.yaml",
                        fix="give the directory a job wrote its report.txt in (its outputs: line)")
    planned, done, first = saved_plan(saved)
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
    keep = [o for o in OmegaConf.load(asked) if not str(o).startswith(("stats.extend=", "hydra.run.dir=", "output_dir="))]
    extended = [*done, step]
    target = run_dir.with_name(f"{run_dir.name.split('-extend')[0]}-extend{len(extended)}")
    return [*keep, f"stats.extend=[{','.join(map(str, extended))}]", f"hydra.run.dir={target}"]


def _first_look(run_dir: Path) -> int | None:
    """The first look's size as the job recorded it (report.json), None when it wrote none."""
    import json

    try:
        seq = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))["decision"]["sequential"]
        return int(seq["looks"][0]["n"])
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.extend", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a job's output directory (its report's outputs: line)")
    parser.add_argument("n", type=int, nargs="?", help="samples to add: the first look's size, as planned")
    args = parser.parse_args(argv)
    try:
        overrides = overrides_for(args.run_dir.resolve(), args.n)
    except UserError as err:
        print(err.render(), file=sys.stderr)
        return EXIT_ERROR
    print("python -m runner " + " ".join(overrides), flush=True)
    return subprocess.run([sys.executable, "-m", "runner", *overrides]).returncode

