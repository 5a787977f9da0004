"""A cache for functions of short texts, bounded in bytes (not in entries).

The tokenizers cache per word or run of letters: a catalog's vocabulary is small and repeats, so
tokenizing thousands of tools becomes a dictionary lookup per word. A cache bounded only in entries
is unbounded in bytes, and it keeps what users typed: 3,000 requests each carrying a 20,000-character
unbroken run (pasted base64, a token) once held ~0.5 GB, the first secret among it. Here a text
longer than ``max_key_chars`` is computed and never kept, and the entries kept never add up to more
than ``max_bytes`` (the oldest go first).
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from functools import update_wrapper
from typing import Any, Generic, TypeVar

R = TypeVar("R")

MAX_KEY_CHARS = 64
"""Longer texts are never cached: no word of a real vocabulary is this long, and a long run is what a
pasted secret or document looks like."""


def _size(value: Any) -> int:
    size = sys.getsizeof(value)
    if isinstance(value, tuple):
        size += sum(sys.getsizeof(item) for item in value)
    return size


class BoundedTextCache(Generic[R]):
    """``fn(text, *options)`` cached by bytes; see the module docstring."""

    def __init__(self, fn: Callable[..., R], max_bytes: int, max_key_chars: int = MAX_KEY_CHARS) -> None:
        self._fn = fn
        self.max_bytes = max_bytes
        self.max_key_chars = max_key_chars
        self._entries: OrderedDict[Hashable, tuple[R, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        update_wrapper(self, fn)

    def __call__(self, text: str, *options: Hashable) -> R:
        if len(text) > self.max_key_chars:
            return self._fn(text, *options)
        key = (text, *options) if options else text
        found = self._entries.get(key)
        if found is not None:
            return found[0]
        value = self._fn(text, *options)
        size = _size(text) + _size(value) + 100  # + the entry's own overhead
        with self._lock:
            if key not in self._entries:
                self._entries[key] = (value, size)
                self.bytes += size
                while self.bytes > self.max_bytes and self._entries:
                    _, (_, dropped) = self._entries.popitem(last=False)
                    self.bytes -= dropped
        return value

    @property
    def entries(self) -> Mapping[Hashable, tuple[R, int]]:
        """What is kept, ``key -> (value, bytes)``, keyed ``(text, *options)`` (or the text alone without
        options): read-only, for a caller that looks many keys up in a loop without a call per key."""
        return self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def cache_clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0


def bounded_text_cache(
    max_bytes: int, max_key_chars: int = MAX_KEY_CHARS
) -> Callable[[Callable[..., R]], BoundedTextCache[R]]:
    """Decorator: cache a function of a short text (and hashable options) within `max_bytes`."""

    def decorate(fn: Callable[..., R]) -> BoundedTextCache[R]:
        return BoundedTextCache(fn, max_bytes, max_key_chars)

    return decorate
