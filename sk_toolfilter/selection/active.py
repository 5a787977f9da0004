"""Which filter manager serves the request in progress.

Several agents (several managers) may share one kernel, and with it one discovery plugin and one
list of invocation filters. The chat-service wrapper marks the manager of the request it serves
(:func:`serving`); everything that runs inside that request (the auto-invoke loop, discovery,
the execution guard) asks :func:`active_manager` instead of assuming the manager it was built for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_ACTIVE: ContextVar[Any] = ContextVar("sk_toolfilter_active_manager", default=None)


def active_manager() -> Any:
    """The manager serving the current request, or None outside a filtered request."""
    return _ACTIVE.get()


@contextmanager
def serving(manager: Any) -> Iterator[None]:
    """Mark `manager` as the one serving the code in this block (tasks it starts inherit it)."""
    token = _ACTIVE.set(manager)
    try:
        yield
    finally:
        try:
            _ACTIVE.reset(token)
        except ValueError:  # finished in another context (an async generator closed elsewhere)
            _ACTIVE.set(None)
