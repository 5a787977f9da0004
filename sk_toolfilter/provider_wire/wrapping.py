"""The wire transports under an SDK client's own HTTP client: its transports are wrapped, not replaced, so
what the application configured on it (a proxy, timeouts, connection limits, its own transport) stays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def wrap_transports(http_client: Any, wire: Callable[[Any], Any], client_type: type) -> bool:
    """Put `wire` (a transport class taking the transport it wraps) over every transport of `http_client`
    (its default transport and each proxy mount), once (a transport that is already a `wire` stays as it
    is). False when `http_client` is not a `client_type` (the HTTP package `wire` speaks: ``httpx`` or the
    ``anthropic`` / ``openai`` SDKs' ``httpx2``): then the caller gives the SDK a client of its own."""
    if not isinstance(http_client, client_type) or not hasattr(http_client, "_mounts"):
        return False
    client: Any = http_client
    wire_type = wire if isinstance(wire, type) else type(wire)

    def wrapped(transport: Any) -> Any:
        return transport if transport is None or isinstance(transport, wire_type) else wire(transport)

    client._transport = wrapped(client._transport)
    client._mounts = {pattern: wrapped(transport) for pattern, transport in client._mounts.items()}
    return True
