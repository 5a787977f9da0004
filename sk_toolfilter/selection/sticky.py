"""Cache-friendly tool lists: within a conversation, tools once sent stay sent, in the same order.

Providers cache the prompt prefix, and the tools come first in it. A list that changes order every
turn misses the cache; a sticky list only grows at its end (up to a cap, the least recently used
tool leaves first), so consecutive requests share the longest possible prefix.

A conversation is identified by its content: each request's list continues the list of the
longest earlier request whose messages are a prefix of its own. Two conversations with the same
messages so far (two users who both open with "hi") get the same list — the same input gives the
same tools — and evolve independently from the first message where they differ.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from semantic_kernel.contents import ChatHistory

MAX_REQUESTS = 4096  # lists remembered (one per request; the oldest leave first)


def _message_bytes(message: Any) -> bytes:
    from semantic_kernel.contents import FunctionCallContent, FunctionResultContent

    parts = [str(message.role), message.content if isinstance(message.content, str) else ""]
    for item in message.items:
        if isinstance(item, FunctionCallContent):
            parts += ["call", str(item.id), str(item.name), str(item.arguments)]
        elif isinstance(item, FunctionResultContent):
            parts += ["result", str(item.id), str(item.name), str(item.result)]
    return "\x1f".join(parts).encode("utf-8", "replace")


def prefix_fingerprints(history: ChatHistory) -> list[str]:
    """One fingerprint per message; the i-th identifies the conversation's first i+1 messages."""
    digest = hashlib.sha256()
    fingerprints = []
    for message in history.messages:
        digest.update(hashlib.sha256(_message_bytes(message)).digest())
        fingerprints.append(digest.copy().hexdigest())
    return fingerprints


class StickyLists:
    """One ordered tool list per conversation state (bounded, LRU), continued along each conversation."""

    def __init__(self, max_tools: int) -> None:
        self.max_tools = max_tools
        self._lists: OrderedDict[str, dict[str, int]] = OrderedDict()
        self._tick = 0
        self._lock = threading.Lock()

    def update(self, history: ChatHistory, selected: Sequence[str], *, grow: bool = True) -> list[str]:
        """Add `selected` to the conversation's list (new names at the end); return the list to send.

        Beyond ``max_tools`` the least recently selected names leave (never ones selected now), a
        quarter of the list at once: every eviction breaks the cached prefix, so evict rarely.
        `grow` False: a conversation's list stays exactly as its first request made it (provider tool
        search: every later tool is found and arrives in the conversation, after the cached prefix).
        """
        fingerprints = prefix_fingerprints(history) or ["(empty)"]
        with self._lock:
            self._tick += 1
            parent = next((fp for fp in reversed(fingerprints) if fp in self._lists), None)
            loaded = dict(self._lists[parent]) if parent is not None else {}  # the parent stays as it was
            for name in selected if grow or parent is None else ():
                loaded[name] = self._tick  # dict keeps first-insertion order; the value is last use
            if len(loaded) > max(self.max_tools, len(selected)):
                target = max(self.max_tools - self.max_tools // 4, len(selected))
                stale = sorted((n for n in loaded if n not in selected), key=lambda n: loaded[n])
                for name in stale[: len(loaded) - target]:
                    del loaded[name]
            key = fingerprints[-1]
            self._lists[key] = loaded
            self._lists.move_to_end(key)
            while len(self._lists) > MAX_REQUESTS:
                self._lists.popitem(last=False)
            return list(loaded)
