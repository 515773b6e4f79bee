"""Is the Hugging Face Hub reachable? Asked once, quickly, before the first Hub lookup of a process.

``datasets`` and ``huggingface_hub`` retry a refused or timed-out connection with back-off (five tries,
about 25 s, per file they look up), so an offline host that has not set ``HF_HUB_OFFLINE`` waits half a
minute or more before each message. :func:`go_offline_unless_reachable` opens one TCP connection to the
Hub's endpoint (``HF_ENDPOINT``, or the HTTPS proxy when one is set) with a short timeout; when that fails
it puts both libraries in their offline mode for the rest of the process, so every lookup that follows is
answered from the local Hugging Face cache or fails at once, without retries, with the caller's message.
"""

from __future__ import annotations

import os
import socket
import sys
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 3.0
OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
DEFAULT_ENDPOINT = "https://huggingface.co"
_unreachable: str | None = None  # why the Hub is out of reach ("" once probed and reachable)


def hub_offline() -> bool:
    """Whether the user (or an earlier probe) put the Hugging Face libraries in offline mode."""
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in OFFLINE_FLAGS)


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT


def _target(url: str) -> tuple[str, int]:
    """The host and port a connection to ``url`` opens first: the HTTPS proxy's when one is set."""
    parts = urlsplit(url)
    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy") if parts.scheme == "https" else \
        os.environ.get("HTTP_PROXY") or os.environ.get("http_proxy")
    if proxy:
        parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def unreachable_reason() -> str | None:
    """None when the Hub answers (or offline mode is on: the libraries then ask nothing), else why not;
    the probe runs once per process."""
    global _unreachable
    if hub_offline():
        return None
    if _unreachable is None:
        host, port = _target(endpoint())
        try:
            with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
                _unreachable = ""
        except OSError as err:
            _unreachable = f"{endpoint()} ({host}:{port}): {type(err).__name__}: {err}"
    return _unreachable or None


def go_offline_unless_reachable() -> str | None:
    """Probe the Hub; when it is out of reach, switch ``huggingface_hub`` and ``datasets`` to offline mode
    (the environment for processes started later, the libraries' flags where already imported) and return
    why, for the caller's message. None when the Hub is reachable or offline mode was already on."""
    reason = unreachable_reason()
    if reason is None:
        return None
    for flag in OFFLINE_FLAGS:
        os.environ[flag] = "1"
    hub_constants = sys.modules.get("huggingface_hub.constants")
    if hub_constants is not None:
        hub_constants.HF_HUB_OFFLINE = True
    datasets_config = sys.modules.get("datasets.config")
    if datasets_config is not None:
        datasets_config.HF_HUB_OFFLINE = True
        datasets_config.HF_DATASETS_OFFLINE = True
    return reason
