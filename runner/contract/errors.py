"""Typed errors written for a person.

A :class:`UserError` is a mistake the user can fix (a bad override, a missing file, an
unregistered reference). The entry point prints it without a traceback and exits with
:data:`EXIT_ERROR`. Anything else is a programming error and keeps its traceback.
"""

from __future__ import annotations

from runner.contract.printable import printable
from runner.contract.secrets import redact_text

EXIT_OK = 0
"""GO: the drop was shown to be within the tolerance, or no verdict was asked for."""
EXIT_ERROR = 1
"""Bad input or a failure before a verdict could be reached (Hydra's own errors exit 1 too)."""
EXIT_REGRESSION = 3
"""NO-GO: a regression was shown (the score fell past the threshold)."""
EXIT_INCONCLUSIVE = 4
"""INCONCLUSIVE: neither a regression nor a drop within the tolerance was shown (``stats.on_inconclusive``
maps it to 0 or 3)."""
EXIT_TERMINATED = 143
"""Stopped by SIGTERM (a scheduler's cancel, ``timeout``): 128 + 15, as shells report it."""
EXIT_INTERRUPTED = 130
"""Stopped by SIGINT (Ctrl-C): 128 + 2, as shells report it."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGINT, handled alike: the run is marked KILLED, ``failure.json`` is written, and the
    process exits with ``exit_status`` (143 for SIGTERM, 130 for SIGINT)."""

    def __init__(self, message: str = "stopped", exit_status: int = EXIT_TERMINATED) -> None:
        super().__init__(message)
        self.exit_status = exit_status


class UserError(Exception):
    """A problem the user can fix: says where, what was given, what is allowed, what to do."""

    def __init__(
        self,
        what: str,
        *,
        where: str | None = None,
        given: object | None = None,
        allowed: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.what = what
        self.where = where
        self.given = given
        self.allowed = allowed
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"error: {self.what}"]
        if self.where:
            lines.append(f"  where:   {self.where}")
        if self.given is not None:
            lines.append(f"  given:   {self.given}")
        if self.allowed:
            lines.append(f"  allowed: {self.allowed}")
        if self.fix:
            lines.append(f"  fix:     {self.fix}")
        return printable(redact_text("\n".join(lines)))  # never a secret, never a raw terminal escape


class ConfigError(UserError):
    """A composed configuration that is well-typed but not acceptable."""


class DataError(UserError):
    """A dataset that cannot be reached or holds malformed rows."""


class ModelError(UserError):
    """A model that cannot be found or loaded."""


class ReferenceError_(UserError):
    """No registered reference matches the effective accuracy spec."""


class TrackingError(UserError):
    """The tracking server cannot be reached or refuses the run."""


class BackendUnavailable(UserError):
    """A backend whose library is not installed on this host."""


class EndpointError(UserError):
    """A model server that cannot be reached, refuses requests, or does not serve what was declared."""
