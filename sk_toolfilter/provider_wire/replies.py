"""What both wire transports do with a request and a reply: resend a request with a new JSON body, read a
reply's JSON, add up token usage."""

from __future__ import annotations

import json
from typing import Any

import httpx

RESENT_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding"})
"""Headers of a reply that no longer hold once its body is rewritten (decoded and re-encoded)."""


def with_body(request: httpx.Request, body: dict[str, Any]) -> httpx.Request:
    """`request` with `body` as its JSON content (of the request's own HTTP package: ``httpx``, or the
    ``httpx2`` the ``anthropic`` SDK uses)."""
    headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() != "content-length"]
    return type(request)(request.method, request.url, headers=headers, content=json.dumps(body).encode())


def rewritten_reply(response: httpx.Response, reply: dict[str, Any]) -> httpx.Response:
    """A reply like `response` (status, headers) with `reply` as its JSON body."""
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in RESENT_HEADERS]
    return type(response)(response.status_code, headers=headers, content=json.dumps(reply).encode())


def json_reply(response: httpx.Response) -> dict[str, Any] | None:
    """A successful reply's JSON object (read already), or None (an error, or not a JSON object: the
    framework reads it as it is)."""
    if response.status_code != 200:
        return None
    try:
        reply = json.loads(response.content)
    except (ValueError, RecursionError):
        return None
    return reply if isinstance(reply, dict) else None


def usage_sum(usages: list[Any]) -> Any:
    """Token counts added field by field (nested details too); the last usage when none is an object."""
    present = [u for u in usages if isinstance(u, dict)]
    if not present:
        return usages[-1] if usages else None
    total: dict[str, Any] = {}
    for usage in present:
        for key, value in usage.items():
            if isinstance(value, int) and not isinstance(value, bool):
                total[key] = (total.get(key) or 0) + value
            elif isinstance(value, dict):
                total[key] = usage_sum([total.get(key), value])
            else:
                total.setdefault(key, value)
    return total
