"""Cache-friendly tool lists: within a conversation, tools once sent stay sent, in the same order.

Providers cache the prompt prefix, and the tools come first in it. A list that changes order every
turn misses the cache; a sticky list only grows at its end (up to a cap, the least recently used
tool leaves first), so consecutive requests share the longest possible prefix.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from semantic_kernel.contents import ChatHistory

MAX_CONVERSATIONS = 1024


def conversation_key(history: ChatHistory) -> str:
    """Identifies a conversation across turns: its system prompt and first user message."""
    from semantic_kernel.contents import AuthorRole

    system = next(
        (m.content or "" for m in history.messages if m.role in (AuthorRole.SYSTEM, AuthorRole.DEVELOPER)), ""
    )
    first_user = next((m.content or "" for m in history.messages if m.role == AuthorRole.USER), "")
    return hashlib.sha256(f"{system}\x00{first_user}".encode()).hexdigest()


class StickyLists:
    """One ordered tool list per conversation (bounded number of conversations, LRU)."""

    def __init__(self, max_tools: int) -> None:
        self.max_tools = max_tools
        self._lists: OrderedDict[str, dict[str, int]] = OrderedDict()
        self._turn = 0
        self._lock = threading.Lock()

    def update(self, key: str, selected: Sequence[str]) -> list[str]:
        """Add `selected` to the conversation's list (new names at the end); return the list to send.

        Beyond ``max_tools`` the least recently selected names leave (never ones selected now), a
        quarter of the list at once: every eviction breaks the cached prefix, so evict rarely.
        """
        with self._lock:
            self._turn += 1
            loaded = self._lists.pop(key, {})
            for name in selected:
                loaded[name] = self._turn  # dict keeps first-insertion order; the value is last use
            if len(loaded) > max(self.max_tools, len(selected)):
                target = max(self.max_tools - self.max_tools // 4, len(selected))
                stale = sorted((n for n in loaded if n not in selected), key=lambda n: loaded[n])
                for name in stale[: len(loaded) - target]:
                    del loaded[name]
            self._lists[key] = loaded
            while len(self._lists) > MAX_CONVERSATIONS:
                self._lists.popitem(last=False)
            return list(loaded)
