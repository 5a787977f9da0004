"""What the adapter decided for the model call in progress, read by the wire transports in the same task."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from sk_toolfilter.provider_wire.namespaces import PluginOf, plugin_of
from sk_toolfilter.provider_wire.search_answer import SearchSession
from sk_toolfilter.selection.offer import Offer
from sk_toolfilter.selection.provider_search import unit_for


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


def call_for_offer(
    manager: Any,
    offer: Offer,
    provider: str,
    *,
    owner: str,
    search_tool: dict[str, Any] | None = None,
    allowed: Collection[str] | None = None,
    within: Callable[[], AbstractContextManager[Any]] | None = None,
) -> WireCall | None:
    """What the wire does for one model call with `offer`, for both frameworks: with `search_tool` (Semantic
    Kernel) the transport marks the deferred tools itself; with ``unit: plugin`` (OpenAI) each plugin's
    tools go as one namespace; and when the filter answers the searches (``offer.filter_answers``), its
    search desk answers among the deferred tools, keeps the answers `owner`'s (a conversation in a scope)
    and learns a found tool the model then calls (among `allowed`, `within` the caller's learning context).
    None when the wire has nothing to do."""
    search = manager.config.provider_search
    spaces = plugin_of(manager) if search.enabled and unit_for(provider, search.unit) == "plugin" else None
    session = None
    if offer.filter_answers:

        def learn(query: str, name: str) -> None:
            manager.capture(query, [name], allowed=allowed)

        names, state = tuple(offer.names), manager.conversation_state
        scope = within or nullcontext
        session = SearchSession(manager, names, offer.deferred, search.results, learn, scope, owner, state)
    marked = frozenset(offer.deferred) if search_tool is not None else frozenset()
    if not (marked or session or spaces):
        return None
    return WireCall(marked, search_tool, session, spaces)
