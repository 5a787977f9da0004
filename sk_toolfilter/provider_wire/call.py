"""What the adapter decided for the model call in progress, read by the wire transports in the same task."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from sk_toolfilter.provider_wire.namespaces import PluginOf
from sk_toolfilter.selection.search_answer import SearchSession


@dataclass(frozen=True)
class WireCall:
    """One model call: the tools a transport marks deferred with `search_tool` beside them (Semantic
    Kernel, whose connector has no field for them; Agent Framework's clients mark them themselves:
    `deferred` empty), the search session when the filter answers the search (else None), and with
    ``unit: plugin`` each tool's plugin (:mod:`sk_toolfilter.provider_wire.namespaces`; else None)."""

    deferred: frozenset[str] = frozenset()
    search_tool: dict[str, Any] | None = None
    session: SearchSession | None = None
    plugin_of: PluginOf | None = None


_CALL: ContextVar[WireCall | None] = ContextVar("sk_toolfilter_wire_call", default=None)


def current_call() -> WireCall | None:
    """The model call in progress in this task, or None (the transports pass every request unchanged)."""
    return _CALL.get()


def set_call(call: WireCall | None) -> None:
    """Set the model call in progress for this task (Agent Framework's middleware: per model call)."""
    _CALL.set(call)


@contextmanager
def wire_call(call: WireCall | None) -> Iterator[None]:
    """The model call in progress for the block (Semantic Kernel: one ``invoke``)."""
    token = _CALL.set(call)
    try:
        yield
    finally:
        _CALL.reset(token)
