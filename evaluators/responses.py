"""What a task reads back from the backend's answers to one sample's requests."""

from __future__ import annotations

from typing import Sequence

from runner.contract.requests import Response


def only_text(responses: Sequence[Response]) -> str:
    """The generated text of a sample that sent one generation request."""
    (output,) = responses
    assert isinstance(output, str)
    return output
