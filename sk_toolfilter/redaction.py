"""Rendering configuration values without the secrets they may carry."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """`url` without credentials: user and password, query and fragment are replaced by ``***``.

    ``https://user:pass@host:8080/mcp?api-key=k`` → ``https://***@host:8080/mcp?***``.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "***"
    if not parts.scheme or not host:
        return "***"
    netloc = f"***@{host}{port}" if (parts.username or parts.password) else f"{host}{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", "***" if parts.fragment else ""))
