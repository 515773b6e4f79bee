"""``python -m runner``: a thin Hydra shell around :func:`runner.job.flow.run`.

Hydra composes the job; this module only converts the result of :func:`run` into an exit
status, prints user errors without a traceback, and closes a sweep whose launcher raised
(:func:`runner.sweep.callback.abort_open_sweep`).

SIGTERM and SIGINT stop the job: the first asks every answering thread to stop
(:mod:`runner.contract.stopping`) and raises :class:`Terminated` in the main thread, so the job writes
failure.json, marks its MLflow run KILLED, stops its model server and exits 143 (SIGTERM) or 130
(SIGINT). A second signal does not wait for that: it kills the model servers this process started and
exits at once with the same status.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import hydra
from omegaconf import DictConfig

from runner.backends.openai.server import kill_all_now
from runner.config.guard import check_overrides
from runner.config.store import register_schemas
from runner.contract import stopping
from runner.contract.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated, UserError
from runner.contract.secrets import redact_logs, redact_text

EXIT_FOR_SIGNAL = {signal.SIGTERM: EXIT_TERMINATED, signal.SIGINT: EXIT_INTERRUPTED}


@hydra.main(version_base="1.3", config_path="pkg://conf", config_name="config")
def main(cfg: DictConfig) -> int:
    from runner.commands.job import run_job  # lazy: --help and config errors stay fast (no job code loaded)

    return run_job(cfg)


def entry() -> None:
    """Console-script entry point (``runner``)."""
    from runner.sweep.callback import abort_open_sweep, take_exit_status  # lazy: --help stays fast

    register_schemas()
    redact_logs()  # before Hydra logs the command line's overrides
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)  # --cfg job, tracebacks
    refuse_foreign_code(sys.argv[1:])
    for signum in EXIT_FOR_SIGNAL:
        signal.signal(signum, _terminate)
    try:
        main()
    except Terminated as err:
        abort_open_sweep(err)
        print(f"runner: {err}; the job's MLflow run is marked KILLED and failure.json written", file=sys.stderr)
        sys.exit(err.exit_status)
    except (Exception, KeyboardInterrupt) as err:
        # A multirun whose launcher raised gets here (runner/sweep/callback.py sets HYDRA_FULL_ERROR while a
        # sweep is open, so Hydra re-raises): close the sweep Hydra left open, and exit with a
        # message instead of a traceback. Anything else keeps its usual report.
        status = abort_open_sweep(err)
        if status is None or os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise  # not a sweep's error, or the user asked for the full traceback
        sys.exit(status or EXIT_ERROR)
    status = take_exit_status()  # a multirun: the sweep's verdict (runner/sweep/callback.py)
    if status:
        sys.exit(status)


class RedactingStream:
    """A text stream that writes every secret redacted (:func:`runner.contract.secrets.redact_text`): what Hydra
    prints itself (``--cfg job``, its errors), and anything printed that no other redaction saw."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def refuse_foreign_code(argv: list[str]) -> None:
    """Refuse ``_target_`` or ``hydra.callbacks`` overrides naming code outside this project (exit 1)."""
    try:
        check_overrides(argv)
    except UserError as err:
        print(err.render(), file=sys.stderr, flush=True)
        sys.exit(EXIT_ERROR)


def _terminate(signum: int, frame: object) -> None:
    """The first SIGTERM/SIGINT: stop every thread's work and raise in the main thread."""
    for other in EXIT_FOR_SIGNAL:
        signal.signal(other, _kill_now)
    status = EXIT_FOR_SIGNAL[signal.Signals(signum)]
    reason = f"stopped by {signal.Signals(signum).name}"
    stopping.request_stop(reason, status)
    raise Terminated(reason, status)


def _kill_now(signum: int, frame: object) -> None:
    """A second signal while the job cleans up: no more waiting, and no model server left behind."""
    kill_all_now()
    os._exit(EXIT_FOR_SIGNAL[signal.Signals(signum)])

