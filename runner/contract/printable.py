"""Text that is safe to print and to write into a report: control characters shown as escapes.

Why: a sample id, a task name or an error message is input, and may carry an ESC (a terminal escape
sequence that recolours or rewrites the screen), a carriage return (which overwrites the line), or a
character XML 1.0 forbids (junit.xml then fails to parse in CI). Each such character is written as its
Python escape (``\\x1b``, ``\\u202e``), visible and inert; line breaks and tabs are kept.
"""

from __future__ import annotations

import re

UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")
"""C0 controls but tab and newline, DEL and C1 controls, bidirectional overrides, lone surrogates, and the
two code points XML forbids."""


def printable(text: str) -> str:
    """``text`` with every control character replaced by its escape; anything else unchanged."""
    return UNPRINTABLE.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)
