"""One secrets policy for every value the runner holds, applied to everything it writes or prints.

Why: ``backend.base_url=http://user:PASSWORD@host/v1``, ``?pw=...``, ``#token=...``,
``backend.launch.env.HF_TOKEN=...``, ``backend.extra_body.api_key=...``, a key pasted into
``backend.api_key_env`` or echoed back by a server in an error body would otherwise reach config.yaml,
``.hydra/*``, the logs, the terminal, report.json, failure.json, the generation cache's context table and
MLflow. The runner uses each value as given, and writes only the redacted form (the cache key is made from
the redacted form too, so a rotated password keeps the cache). What is hidden:

- in a URL: its user info, query parameters and fragment parameters with a secret-looking name
  (:data:`SECRET_PARAM`, :data:`SECRET_PARAMS`);
- under a key with a secret's name (:func:`secret_name`: ``api_key``, ``HF_TOKEN``, ``password``,
  ``Authorization``, ...), in a config tree, a ``KEY=VALUE`` override, ``KEY: VALUE`` YAML or JSON text, and
  an ``Authorization: Bearer/Basic ...`` header; under a ``*_env`` key, a value that looks like a key;
- text shaped like a key (:data:`KEY_SHAPED`: ``sk-...``, ``hf_...``, ``ghp_...``, a JWT);
- every value the runner has seen as a secret in this process (:func:`remember`: a key read from the
  variable ``backend.api_key_env`` names, a URL's password and its Basic-auth form, each value hidden
  above), wherever it shows up again: a server that echoes the request's headers in an error body.

:func:`looks_like_key` tells a key from the name of the environment variable meant to hold it.
"""

from __future__ import annotations

import base64
import logging
import re
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

REDACTED = "REDACTED"
SECRET_PARAM = re.compile(r"(key|token|secret|passw|pwd|auth|credential|signature|sig$|session|cookie|jwt|bearer)",
                          re.IGNORECASE)
SECRET_PARAMS = frozenset({"pass", "pw", "pwd", "jwt", "code", "sig", "sas", "otp", "ticket", "p", "secret", "key"})
"""Query or fragment names that are secrets as whole names (``?pw=``, ``?code=`` of OAuth, ``?sig=`` of a SAS)."""
SECRET_NAME = re.compile(
    r"^(token|secret|password|passwd|passphrase|pwd|auth|authorization|proxy[_-]?authorization|cookie|"
    r"credentials?|bearer|jwt|apikey|api[_-]key)$"
    r"|[_-](api[_-]?key|access[_-]?key|private[_-]?key|secret[_-]?key|auth[_-]?key|token|secret|password|passwd|"
    r"passphrase|pwd|credentials?|authorization|cookie|jwt|signature)$", re.IGNORECASE)
KEY_SHAPED = re.compile(r"(?<![\w-])(?:(?:sk|rk|pk)[-_](?:[a-z]+[-_])?[A-Za-z0-9]{16,}|hf_[A-Za-z0-9]{20,}|"
                        r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|github_pat_\w{20,}|glpat-[\w-]{20,}|"
                        r"nvapi-[\w-]{20,}|xox[abprs]-[\w-]{10,}|AKIA[0-9A-Z]{16}|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,})")
"""Text shaped like a key of a known service, wherever it stands."""
MIN_REMEMBERED = 6
"""Shorter secrets are not searched for in free text (a 3-letter password would blank every word holding it)."""
_REMEMBERED: set[str] = set()
VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KEY_PREFIXES = ("sk-", "sk_", "hf_", "ghp_", "gho_", "github_pat_", "xox", "AKIA", "eyJ", "nvapi-", "glpat-")


def secret_name(name: str) -> bool:
    """Whether a key (its last dotted part) names a secret: ``api_key``, ``HF_TOKEN``, ``password``, ..."""
    return bool(SECRET_NAME.search(str(name).rsplit(".", 1)[-1].strip("'\"+~")))


def secret_param(name: str) -> bool:
    """Whether a URL query or fragment parameter's name is a secret's."""
    return bool(SECRET_PARAM.search(name)) or name.lower() in SECRET_PARAMS


def remember(value: object) -> None:
    """A secret the runner holds (a key it read, a password it will send): hidden wherever it appears again."""
    text = str(value or "")
    if len(text) >= MIN_REMEMBERED and text != REDACTED:
        _REMEMBERED.add(text)


def _remember_user_info(user_info: str) -> None:
    """A URL's user info as it is sent: the password, ``user:password`` and its Basic-auth form."""
    user, _, password = unquote(user_info).partition(":")
    for secret in (password, user if not password else "", f"{user}:{password}" if password else ""):
        remember(secret)
    if password:
        remember(base64.b64encode(f"{user}:{password}".encode()).decode())


def redact_url(url: str) -> str:
    """``url`` with its user info and secret-looking query and fragment parameters replaced by ``REDACTED``;
    anything that is not a URL with a scheme comes back unchanged (a file path, ``None`` as text)."""
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
        _remember_user_info(netloc.rsplit("@", 1)[0])
        host = f"[{host}]" if ":" in host else host
        netloc = f"{REDACTED}@{host}{port}"
    query, fragment = _redact_params(parts.query), _redact_params(parts.fragment)
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url  # nothing hidden: the URL exactly as given (urlunsplit would normalise sqlite:////abs)
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _redact_params(text: str) -> str:
    """A query string or fragment (``a=1&token=x``) with each secret parameter's value hidden."""
    if "=" not in text:
        return text
    pairs = parse_qsl(text, keep_blank_values=True)
    if not any(secret_param(k) for k, _ in pairs):
        return text
    for k, v in pairs:
        if secret_param(k):
            remember(v)
    return urlencode([(k, REDACTED if secret_param(k) else v) for k, v in pairs], quote_via=quote, safe="/:")


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


NAMED_VALUE = re.compile(
    r"(?P<name>[A-Za-z_][\w.\-]*)(?P<sep>[\"']?\s*\\?[=:]\s*[\"']?)"
    r"(?P<scheme>(?:bearer|basic|token|digest)\s+)?(?P<value>(?:\\.|[^\s\"',&}\]\\])+)", re.IGNORECASE)
"""``NAME=VALUE``, ``NAME: VALUE``, ``"NAME": "VALUE"``, ``Authorization: Bearer VALUE`` in text; a value ends at
a space, a quote, a comma, ``&`` or a closing bracket (a backslash escapes, as in Hydra's ``override_dirname``)."""
PLACEHOLDER = re.compile(r"<[\w -]*>")
"""A placeholder in a message (``export OPENAI_API_KEY=<key>``): not a secret."""


def redact_text(text: str) -> str:
    """``text`` with every secret in it hidden (a command line, a YAML or JSON file, an error message or a server's
    error body, Hydra's comma-joined override list, escaped or not): URLs (each cut from what follows it first),
    values under a secret's name, key-shaped text, and every value :func:`remember` was given."""
    if not isinstance(text, str):
        return text
    text = URL_IN_TEXT.sub(lambda m: redact_items(m.group(0)), ESCAPED_URL.sub(redact_escaped, text))
    text = NAMED_VALUE.sub(_redact_named, text)
    text = KEY_SHAPED.sub(_redact_shaped, text)
    for secret in sorted(_REMEMBERED, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _redact_named(match: re.Match[str]) -> str:
    name, value = match.group("name"), match.group("value")
    if value == REDACTED or value.startswith("//") or PLACEHOLDER.fullmatch(value):
        # hidden already; a URL's scheme (http://...) is not a name; a message's <key> is a placeholder
        return match.group(0)
    if _hidden(name, re.sub(r"\\(.)", r"\1", value)):
        return f"{name}{match.group('sep')}{match.group('scheme') or ''}{REDACTED}"
    return match.group(0)


def _redact_shaped(match: re.Match[str]) -> str:
    remember(match.group(0))
    return REDACTED


def _hidden(name: str, value: str) -> bool:
    """Whether ``value`` under ``name`` is a secret (and remembered as one)."""
    last = str(name).rsplit(".", 1)[-1]
    if last.lower().endswith("_env"):  # the NAME of a variable: a secret only when a key was pasted there
        secret = bool(value) and looks_like_key(value)
    else:
        secret = secret_name(last) and value not in ("", "null", "None", "~")
    if secret:
        remember(value)
    return secret


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


def redact_tree(value: Any, name: str = "") -> Any:
    """A plain config tree (dicts, lists, scalars) with every secret hidden: a string under a secret's name
    (``launch.env.HF_TOKEN``, ``extra_body.api_key``; a key pasted under a ``*_env`` name), and every secret in
    any other string (:func:`redact_text`)."""
    if isinstance(value, dict):
        return {k: redact_tree(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(v, name) for v in value]
    if isinstance(value, str):
        return REDACTED if _hidden(name, value) and value != REDACTED else redact_text(value)
    return value


def redact_logs() -> None:
    """Redact every secret in each log record's message as the record is made, whatever logger, handler or
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
        if redact_text(message) != message:
            record.msg, record.args = redact_text(message), None
        return record

    redacting.redacts = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(redacting)
