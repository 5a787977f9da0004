"""One redaction rule for everything the library renders: errors, log lines, reports, eval files.

A value is secret when it sits under a secret-looking key (``api_key``, ``token``, ``password``,
``authorization``, an MCP source's ``env`` or ``headers``…), when it came from an environment
variable (``${VAR}`` in an agent file: :func:`remember_secret` is called for each), when it is the
value of an environment variable with a secret-looking name (``OPENAI_API_KEY``), or when it is the
user, password or query of a URL. Rendered, each becomes ``***``.

- :func:`redact_text` — free text (every :class:`~sk_toolfilter.errors.ToolFilterError` message
  passes through it, and every log line of the library through :class:`RedactingFilter`);
- :func:`redact_config` — a configuration mapping about to be written (``eval.json``);
- :func:`redact_url` — one URL for a message.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
MIN_SECRET_LENGTH = 4
"""Shorter values (``5``, ``on``) are not scrubbed from free text: they would mask ordinary words."""

SECRET_KEY = re.compile(
    r"(api[-_]?key|apikey|token|secret|passw(or)?d|credential|authori[sz]ation|cookie|private[-_]?key|^env$|^headers$)",
    re.IGNORECASE,
)
_URL_USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]*://)[^/\s@'\"]*@", re.IGNORECASE)
_URL_QUERY = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s'\"?#]*[?#])[^\s'\"]*", re.IGNORECASE)

_lock = threading.Lock()
_remembered: set[str] = set()


def remember_secret(value: Any) -> None:
    """Never render `value` again (a value from the environment, an API key, a header)."""
    if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _remembered.add(value)


def is_secret_key(key: Any) -> bool:
    """True for configuration keys whose values are secrets (``api_key``, ``Authorization``, ``env``…)."""
    return isinstance(key, str) and bool(SECRET_KEY.search(key))


def redact_text(text: str) -> str:
    """`text` with every known secret value, URL credential and URL query replaced by ``***``."""
    if not text:
        return text
    text = _URL_USERINFO.sub(rf"\1{MASK}@", text)
    text = _URL_QUERY.sub(rf"\1{MASK}", text)
    for secret in sorted(_secrets(), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_config(value: Any, key: Any = None) -> Any:
    """A copy of a configuration mapping fit to write out: secret keys masked, strings redacted."""
    if is_secret_key(key) and value not in (None, "", [], {}):
        return MASK
    if isinstance(value, dict):
        return {k: redact_config(v, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_config(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_url(url: str) -> str:
    """`url` without credentials: ``https://user:pass@host:8080/mcp?key=k#f`` → ``https://***@host:8080/mcp?***``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return MASK
    if not parts.scheme or not host:
        return MASK
    host = f"[{host}]" if ":" in host else host
    netloc = f"{MASK}@{host}{port}" if (parts.username or parts.password) else f"{host}{port}"
    query = MASK if parts.query else ""
    return redact_text(urlunsplit((parts.scheme, netloc, parts.path, query, MASK if parts.fragment else "")))


class RedactingFilter(logging.Filter):
    """Redacts a log record's message (arguments merged in) before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to logging's own error handling
            return True
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


_FILTER = RedactingFilter()


def library_logger(name: str) -> logging.Logger:
    """The logger of a library module, with :class:`RedactingFilter` attached (idempotent)."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


def _secrets() -> set[str]:
    with _lock:
        values = set(_remembered)
    values.update(v for k, v in os.environ.items() if is_secret_key(k) and len(v) >= MIN_SECRET_LENGTH and k != "PATH")
    return values
