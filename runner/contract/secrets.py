"""Secrets kept out of what the runner writes: URLs with credentials, keys pasted where a name belongs.

Why: ``backend.base_url=http://user:PASSWORD@host/v1`` or ``?api_key=...`` would otherwise reach
config.yaml, the logs, report.json, the generation cache's context table and MLflow. The runner uses
the URL as given to connect, and writes only :func:`redact_url`'s form anywhere else (the cache key
is made from the redacted form too, so a rotated password keeps the cache). :func:`looks_like_key`
tells a key from the name of the environment variable meant to hold it.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

REDACTED = "REDACTED"
SECRET_PARAM = re.compile(r"(key|token|secret|passw|pwd|auth|credential|signature|sig$|session)", re.IGNORECASE)
VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KEY_PREFIXES = ("sk-", "sk_", "hf_", "ghp_", "gho_", "github_pat_", "xox", "AKIA", "eyJ", "nvapi-", "glpat-")


def redact_url(url: str) -> str:
    """``url`` with its user info and secret-looking query parameters replaced by ``REDACTED``; anything
    that is not a URL with a scheme comes back unchanged (a file path, ``None`` as text)."""
    if not isinstance(url, str) or "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:  # an unparsable port or bracket: keep only the scheme, say it was hidden
        return f"{url.split('://', 1)[0]}://{REDACTED}"
    netloc = parts.netloc
    if "@" in netloc:
        host = f"[{host}]" if ":" in host else host
        netloc = f"{REDACTED}@{host}{port}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(SECRET_PARAM.search(k) for k, _ in pairs):
            query = urlencode([(k, REDACTED if SECRET_PARAM.search(k) else v) for k, v in pairs], quote_via=quote,
                              safe="/:")
    if (netloc, query) == (parts.netloc, parts.query):
        return url  # nothing hidden: the URL exactly as given (urlunsplit would normalise sqlite:////abs)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def has_secret(url: str) -> bool:
    """Whether :func:`redact_url` would hide something in ``url``."""
    return redact_url(url) != url


def looks_like_key(value: str) -> bool:
    """Whether ``value`` (given where an environment variable's *name* belongs) is rather a key: not a
    variable name, or a name-shaped value with a known key prefix or the length and mix of a key."""
    text = value.strip()
    if not VARIABLE_NAME.match(text):
        return True
    if text.startswith(KEY_PREFIXES):
        return True
    has_lower, has_upper, has_digit = (any(c.islower() for c in text), any(c.isupper() for c in text),
                                       any(c.isdigit() for c in text))
    return len(text) >= 32 and has_lower and has_upper and has_digit


URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?:[^\s/?#]*@)?[^\s'\"<>`]+")
"""A URL in text: it ends at a space or a quote, except in its user info (a password may hold a quote)."""
# Where one URL of a run of URL characters ends and the next item begins: a comma before an override
# (``,key=``, Hydra's ``override_dirname`` and a sweep's values join items so) or before another URL, or
# another URL starting inside it (``?next=http://...``).
NEXT_ITEM = re.compile(r",(?=[+~]{0,2}[A-Za-z_][\w.@/-]*=|[A-Za-z][A-Za-z0-9+.-]*://)"
                       r"|(?<![A-Za-z0-9+.-])(?=[A-Za-z][A-Za-z0-9+.-]*://)")


ESCAPED_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*\\://(?:\\.|[^\s,\\'\"<>`])*")
"""A URL as Hydra writes a sweep's value into ``override_dirname``: ``:``, ``=``, ``,`` and brackets escaped
with a backslash (``https\\://bob\\:pw@h``); it ends at a comma that is not escaped."""
HYDRA_SPECIAL = re.compile(r"([\\()\[\]{}:=, \t])")


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted (a command line, a YAML file, an error message, Hydra's
    comma-joined override list, escaped or not): each URL is cut from what follows it before it is redacted."""
    return URL_IN_TEXT.sub(lambda m: redact_items(m.group(0)), ESCAPED_URL.sub(redact_escaped, text))


def redact_escaped(match: re.Match[str]) -> str:
    """One escaped URL (:data:`ESCAPED_URL`) redacted, and escaped again as Hydra escaped it."""
    url = re.sub(r"\\(.)", r"\1", match.group(0))
    if not has_secret(url):
        return match.group(0)
    return HYDRA_SPECIAL.sub(r"\\\1", redact_url(url))


def redact_items(run: str) -> str:
    """A run of URL characters that starts with a URL and may hold more items after it, each redacted
    alone. The user info (up to the authority's last ``@``) is never cut: a password may hold ``,k=``."""
    start = run.index("://") + 3
    authority_end = min((i for i in (run.find(c, start) for c in "/?#") if i >= 0), default=len(run))
    at = run.rfind("@", start, authority_end)
    cut = NEXT_ITEM.search(run, at + 1 if at >= 0 else start)
    if cut is None:
        return redact_url(run)
    return redact_url(run[:cut.start()]) + cut.group(0) + redact_text(run[cut.end():])


def redact_tree(value: object) -> object:
    """A plain config tree (dicts, lists, scalars) with every URL-looking string redacted."""
    if isinstance(value, dict):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(v) for v in value]
    return redact_text(value) if isinstance(value, str) and "://" in value else value


def redact_logs() -> None:
    """Redact every URL in each log record's message as the record is made, whatever logger, handler or
    logging configuration writes it (Hydra reconfigures the handlers when it launches jobs; a record
    factory outlives that): the job's ``runner.log``, the console, Hydra's launcher lines."""
    make = logging.getLogRecordFactory()
    if getattr(make, "redacts", False):
        return

    def redacting(*args: object, **kwargs: object) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: logging reports it later
            return record
        if "://" in message and redact_text(message) != message:
            record.msg, record.args = redact_text(message), None
        return record

    redacting.redacts = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(redacting)
