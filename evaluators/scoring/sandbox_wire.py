"""Plain values and framed messages between a sandbox's trusted tester and its untrusted worker.

The tester calls the program's function through a pipe: arguments go one way, the result comes
back. Only plain builtin values cross (None, bool, int, float, str, bytes, complex, list, tuple,
dict, set, frozenset), as tagged JSON, and they are rebuilt as exact builtin types: whatever the
worker sends, the tester gets data, never an object whose methods (``__eq__``) the program wrote.
Standard library only: ``sandbox_child.py`` imports it in ``python -I -S``.
"""

import json
import os
import select
import time

MAX_MESSAGE = 32 << 20  # bytes; a larger message is a protocol error (the test fails)
_TAGS = {"t": tuple, "s": set, "fs": frozenset}


class ProtocolError(Exception):
    """A message that is not a well-formed, plain value."""


class Timeout(BaseException):
    """The deadline passed while waiting for the other side (BaseException: test code must not catch it)."""


class Closed(BaseException):
    """The other side closed its end (it exited or was killed)."""


def encode(value):
    """A JSON-ready form of a plain value; exact builtin types only (subclasses are copied down)."""
    if value is None or value is True or value is False:
        return value
    kind = type(value)
    if kind is int or kind is str:
        return value
    if kind is float:
        return {"f": repr(value)}
    if kind is list:
        return [encode(v) for v in value]
    if kind is dict:
        return {"d": [[encode(k), encode(v)] for k, v in value.items()]}
    for tag, base in _TAGS.items():
        if kind is base:
            return {tag: [encode(v) for v in value]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is complex:
        return {"c": [repr(value.real), repr(value.imag)]}
    for base, copy in ((bool, bool), (int, int.__int__), (float, float.__float__), (str, str.__str__),
                       (bytes, bytes), (complex, complex), (list, list), (tuple, tuple), (dict, dict),
                       (frozenset, frozenset), (set, set)):
        if isinstance(value, base):
            return encode(copy(value))
    raise TypeError(f"a {kind.__name__} cannot be passed between the tester and the program")


def decode(data):
    """The plain value a JSON form stands for; ProtocolError for anything else."""
    if data is None or isinstance(data, (bool, int, str)):
        return data
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict) or len(data) != 1:
        raise ProtocolError(f"not a tagged value: {str(data)[:80]}")
    (tag, body), = data.items()
    try:
        if tag == "f":
            return float(str(body))
        if tag == "d":
            return {decode(k): decode(v) for k, v in body}
        if tag in _TAGS:
            return _TAGS[tag](decode(v) for v in body)
        if tag == "b":
            return bytes.fromhex(body)
        if tag == "c":
            return complex(float(str(body[0])), float(str(body[1])))
    except (TypeError, ValueError) as error:
        raise ProtocolError(f"malformed {tag!r} value: {error}") from None
    raise ProtocolError(f"unknown tag {tag!r}")


def send(fd, message):
    """Write one framed JSON message (4-byte length, then the bytes)."""
    payload = json.dumps(message).encode()
    data = len(payload).to_bytes(4, "big") + payload
    while data:
        data = data[os.write(fd, data):]


def _read_exact(fd, size, deadline):
    chunks, left = [], size
    while left:
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            raise Timeout()
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            raise Timeout()
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise Closed()
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(fd, deadline=None):
    """Read one framed JSON message; ``deadline`` is a time.monotonic() value or None."""
    size = int.from_bytes(_read_exact(fd, 4, deadline), "big")
    if size > MAX_MESSAGE:
        raise ProtocolError(f"a message of {size} bytes (at most {MAX_MESSAGE})")
    try:
        return json.loads(_read_exact(fd, size, deadline))
    except (ValueError, RecursionError) as error:
        raise ProtocolError(f"not JSON: {error}") from None
