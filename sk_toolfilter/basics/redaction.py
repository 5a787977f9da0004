"""One redaction rule for everything the library renders: errors, log lines, reports, eval files.

A value is secret when it sits under a secret-looking key (``api_key``, ``token``, ``password``,
``authorization``, an MCP source's ``env`` or ``headers``…), when it came from an environment
variable (``${VAR}`` in an agent file: :func:`remember_secret` is called for each), when it is the
value of an environment variable with a secret-looking name (``OPENAI_API_KEY``), or when it is the
user, password or query of a URL. Secrets are also found by shape wherever they are: the value
after a secret-named command-line flag or assignment (``--api-key X``, ``TOKEN=X``), a bearer
token, well-known key formats (``sk-…``, ``ghp_…``, AWS ``AKIA…``, JWTs), a token-like segment
of a URL path (``https://host/mcp/<token>``), and any word of a message that is a fragment of a
remembered secret (a driver quoting part of a password). Rendered, each becomes ``***``.

- :func:`redact_text` — free text (every :class:`~sk_toolfilter.basics.errors.ToolFilterError` message
  passes through it, and every log line of the library through :class:`RedactingFilter`);
- :func:`redact_config` — a configuration mapping about to be written (``eval.json``);
- :func:`redact_url` — one URL for a message;
- :func:`redacted_output` — every line a program writes to stdout and stderr (the CLI's ``main``:
  its results, its errors, a ``-v`` traceback, a model server's failure quoted in a report line).
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO
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

# The value after a secret-named command-line flag (--api-key X, --token=X) or assignment
# (API_KEY=X, "password": "X"). "tokens" (a count) is not a secret name.
_SECRET_WORD = r"(?:api[-_]?key|apikey|token(?!s)|secret|passw(?:or)?d|pwd|credential|auth(?:orization)?\b)"
_FLAG_VALUE = re.compile(
    rf"(\s--?[\w.-]*{_SECRET_WORD}[\w.-]*(?:\s+|=))"
    r"(?!-{1,2}[A-Za-z][A-Za-z-]*(?:\s|=|$)|\*\*\*)"  # the next flag is not a value
    r"([^\s\"',;&)]+)",
    re.IGNORECASE,
)
_ASSIGNED_VALUE = re.compile(
    # KEY=value, "key": "value", key: 'value', and key: <token-like value> (not "key.path: a message")
    rf"""(\b[\w.-]*{_SECRET_WORD}[\w.-]*(?:\s*=\s*["']?|["']?\s*:\s*["']|\s*:\s*(?=[^\s"',;&)]*\d)(?=[^\s"',;&)]{{8}})))"""
    r"""(?!\*\*\*|(?:bearer|basic)\s)([^\s"',;&)]+)""",
    re.IGNORECASE,
)
_BEARER = re.compile(r"\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_KEY_SHAPES = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)
_URL_PATH = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s'\"]+)(/[^\s'\"?#]*)", re.IGNORECASE)
_FRAGMENT_WORD = re.compile(r"[^\s'\"`,;:()\[\]{}<>=]+")
MIN_FRAGMENT_LENGTH = 5
"""A word of a message this long or longer that is part of a remembered secret is masked."""

_lock = threading.Lock()
_remembered: set[str] = set()
_public: set[str] = set()


def remember_secret(value: Any) -> None:
    """Never render `value` again (a value from the environment, an API key, a header)."""
    if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _remembered.add(value)


def remember_public(name: Any) -> None:
    """A name the configuration displays on purpose (a tool source's name): never masked as a fragment of
    a secret that happens to contain it (an MCP server ``memory`` with ``MEMORY_FILE_PATH=memory.jsonl``);
    a whole secret is still masked wherever it is."""
    if isinstance(name, str) and name:
        with _lock:
            _public.add(name)


def remember_connection(connection: str) -> None:
    """A connection string's secrets: a URL's password and query (rendering masks user info anyway; its
    host and port stay readable) — or, for any other form (``Server=…;Password=…``), the whole string."""
    if "://" not in connection:
        remember_secret(connection)
        return
    try:
        parts = urlsplit(connection)
    except ValueError:
        remember_secret(connection)
        return
    for secret in (parts.password, parts.query):
        remember_secret(secret)


def is_secret_key(key: Any) -> bool:
    """True for configuration keys whose values are secrets (``api_key``, ``Authorization``, ``env``…)."""
    return isinstance(key, str) and bool(SECRET_KEY.search(key))


def redact_text(text: str) -> str:
    """`text` with every known secret value, URL credential and URL query replaced by ``***``."""
    if not text:
        return text
    text = _URL_USERINFO.sub(rf"\1{MASK}@", text)
    text = _URL_QUERY.sub(rf"\1{MASK}", text)
    secrets = sorted(_secrets(), key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    text = _URL_PATH.sub(lambda m: m.group(1) + _redact_path(m.group(2)), text)
    text = _KEY_SHAPES.sub(MASK, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _FLAG_VALUE.sub(lambda m: m.group(1) + MASK, text)
    text = _ASSIGNED_VALUE.sub(lambda m: m.group(1) + MASK, text)
    if secrets:
        text = _FRAGMENT_WORD.sub(lambda m: _mask_fragment(m.group(0), secrets), text)
    return text


def looks_like_token(segment: str) -> bool:
    """A URL path segment that is a credential rather than a name: long, and letters mixed with digits."""
    if len(segment) < 16 or not re.fullmatch(r"[A-Za-z0-9._~+=-]+", segment):
        return False
    return any(c.isdigit() for c in segment) and any(c.isalpha() for c in segment)


def _redact_path(path: str) -> str:
    return "/".join(MASK if looks_like_token(part) else part for part in path.split("/"))


def _mask_fragment(word: str, secrets: list[str]) -> str:
    if len(word) >= MIN_FRAGMENT_LENGTH and word != MASK and word not in _public and any(word in s for s in secrets):
        return MASK
    return word


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


_WARNED: set[tuple[str, str]] = set()
MAX_WARNED = 1000


def warn_once(logger: logging.Logger, message: str) -> None:
    """Log `message` as a warning the first time this process sees it from `logger` (a configuration
    problem or an outage's cause is said once, not once per request); bounded in number."""
    key = (logger.name, message)
    with _lock:
        if key in _WARNED or len(_WARNED) >= MAX_WARNED:
            return
        _WARNED.add(key)
    logger.warning("sk-toolfilter: %s", message)


def _secrets() -> set[str]:
    with _lock:
        values = set(_remembered)
    values.update(v for k, v in os.environ.items() if is_secret_key(k) and len(v) >= MIN_SECRET_LENGTH and k != "PATH")
    return values


class RedactingStream(io.TextIOBase):
    """A text stream that writes what it is given through :func:`redact_text` (each ``write`` call: a
    ``print`` is one call)."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(redact_text(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")


@contextmanager
def redacted_output() -> Iterator[None]:
    """Inside the block, ``sys.stdout`` and ``sys.stderr`` redact every line written to them."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(out), RedactingStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
