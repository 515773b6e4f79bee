"""Keeping full-line comments in place when a round-tripped YAML block grows.

ruamel stores the comment lines that follow a block on its last scalar, so an item appended to that
block would strand them above it: :func:`take_trailing` detaches them before the block grows and
:func:`put_trailing` reattaches them after its new last item.
"""

from __future__ import annotations

from typing import Any


def last_slot(node: Any) -> tuple[Any, Any] | None:
    """Where ruamel keeps the comment lines that follow ``node``: its deepest last block item.

    Full-line comments after a block (say, one introducing the next model) are stored on the
    end-of-line comment of its last scalar. Appending after that scalar would strand them in
    the middle, so :func:`runner.references.recording.record` moves them to the new last item.
    """
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    slot = None
    while isinstance(node, (CommentedMap, CommentedSeq)) and len(node) and not node.fa.flow_style():
        key = next(reversed(node)) if isinstance(node, CommentedMap) else len(node) - 1
        slot = (node, key)
        node = node[key]
    return slot


def comment_pos(container: Any) -> int:
    from ruamel.yaml.comments import CommentedMap

    return 2 if isinstance(container, CommentedMap) else 0


def take_trailing(node: Any) -> str:
    """Detach and return the comment lines following ``node`` (its end-of-line comment stays)."""
    slot = last_slot(node)
    if slot is None:
        return ""
    container, key = slot
    pos = comment_pos(container)
    tokens = container.ca.items.get(key)
    token = tokens[pos] if tokens else None
    if token is None or "\n" not in token.value:
        return ""
    cut = token.value.index("\n") + 1
    head, tail = token.value[:cut], token.value[cut:]
    if not tail:
        return ""
    if head.strip():
        token.value = head
    else:
        tokens[pos] = None
    return tail


def put_trailing(node: Any, tail: str) -> None:
    """Attach comment lines taken by :func:`take_trailing` after the new last item of ``node``."""
    from ruamel.yaml.error import CommentMark
    from ruamel.yaml.tokens import CommentToken

    slot = last_slot(node) if tail else None
    if slot is None:
        return
    container, key = slot
    pos = comment_pos(container)
    tokens = container.ca.items.setdefault(key, [None, None, None, None])
    if tokens[pos] is None:
        tokens[pos] = CommentToken("\n" + tail, CommentMark(0), None)
    else:
        value = tokens[pos].value
        tokens[pos].value = (value if value.endswith("\n") else value + "\n") + tail

