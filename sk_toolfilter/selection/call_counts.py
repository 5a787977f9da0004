"""Counting which filtered functions the model actually calls (for ``always_include_top_n_used``): counts
only, never what a request was like (that is learning from use, :mod:`sk_toolfilter.retrieval.memory`)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Container
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from semantic_kernel import Kernel


class CallCounter:
    """Thread-safe call counts per full function name."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._filter = self._make_filter()

    def record(self, full_name: str) -> None:
        with self._lock:
            self._counts[full_name] += 1

    def count(self, full_name: str) -> int:
        with self._lock:
            return self._counts[full_name]

    def most_used(self, n: int, among: Container[str]) -> list[str]:
        """The `n` most-called names still in `among`; ties by name; never a name with no calls."""
        if n <= 0:
            return []
        with self._lock:
            items = [(name, c) for name, c in self._counts.items() if c > 0 and name in among]
        items.sort(key=lambda item: (-item[1], item[0]))
        return [name for name, _ in items[:n]]

    def _make_filter(self) -> Callable[[Any, Callable[[Any], Awaitable[None]]], Awaitable[None]]:
        """An SK auto-function-invocation filter that records every function the model calls."""

        async def record_tool_call(context: Any, next: Callable[[Any], Awaitable[None]]) -> None:
            self.record(context.function.fully_qualified_name)
            await next(context)

        return record_tool_call

    def attach(self, kernel: Kernel) -> None:
        """Register the counting filter on `kernel` (idempotent)."""
        from semantic_kernel.filters.filter_types import FilterTypes

        if any(f is self._filter for _, f in kernel.auto_function_invocation_filters):
            return
        kernel.add_filter(FilterTypes.AUTO_FUNCTION_INVOCATION, self._filter)


UsageTracker = CallCounter
"""The name of :class:`CallCounter` before 0.9 (kept for existing imports)."""
