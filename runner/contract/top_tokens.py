"""A teacher-forced text's per-position top-k record: at each scored position, the k most likely token ids and their
log-probabilities, best first, as one compact string.

Why: the full next-token distribution of a 511-token document is 511 x vocabulary floats; a fidelity check (top-1
agreement, a KL divergence) needs far less. The k ids (little-endian uint32) and log-probabilities (float16: a
relative error of 5e-4, which enters a KL at second order) are zlib-compressed and base64-encoded, with a short
header, so a backend's answer, the generation cache and the reference's per-sample rows carry the same text.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any, Sequence

VERSION = "t1"


def encode(ids: Any, logprobs: Any) -> str:
    """``ids`` and ``logprobs``: arrays of shape (positions, k), best first at each position."""
    import numpy as np

    i = np.asarray(ids, dtype="<u4")
    lp = np.asarray(logprobs, dtype="<f2")
    if i.ndim != 2 or i.shape != lp.shape:
        raise ValueError(f"a top-k record is two (positions, k) arrays of one shape, not {i.shape} and {lp.shape}")
    body = base64.b64encode(zlib.compress(i.tobytes() + lp.tobytes(), 9)).decode("ascii")
    return f"{VERSION}:{i.shape[0]}:{i.shape[1]}:{body}"


def decode(text: str) -> tuple[Any, Any]:
    """The (ids, log-probabilities) arrays of an :func:`encode`d record; a ValueError names what is wrong."""
    import numpy as np

    try:
        version, rows, k, body = text.split(":", 3)
        n, width = int(rows), int(k)
        raw = zlib.decompress(base64.b64decode(body.encode("ascii"), validate=True))
    except (ValueError, AttributeError, zlib.error) as err:
        raise ValueError(f"not a top-k record ({type(err).__name__}: {err})") from None
    if version != VERSION or len(raw) != n * width * 6:
        raise ValueError(f"not a {VERSION} top-k record of {n} x {width} (version {version!r}, {len(raw)} bytes)")
    ids = np.frombuffer(raw[:n * width * 4], dtype="<u4").reshape(n, width).astype(np.int64)
    logprobs = np.frombuffer(raw[n * width * 4:], dtype="<f2").reshape(n, width).astype(np.float64)
    return ids, logprobs


def concat(texts: Sequence[str]) -> str:
    """One record of several in order (a text scored in several windows)."""
    import numpy as np

    parts = [decode(t) for t in texts]
    if len(parts) == 1:
        return texts[0]
    return encode(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
