"""Co-usage, a signal of the one memory: tools past requests of a scope called together, counted in conversations."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Companion:
    """A tool called with `anchor` in `together` of the `anchor_conversations` conversations (of the
    scope) that called `anchor`; `own`: the request's own conversation did."""

    name: str
    anchor: str
    together: int
    anchor_conversations: int
    own: bool = False

    @property
    def share(self) -> float:
        return self.together / self.anchor_conversations


class TogetherCounts:
    """Per scope: the conversations that called each tool, and each pair of tools in one request (rows
    of at most :data:`MAX_TOOLS_PER_REQUEST` tools), kept in step with the memory's rows (under its lock)."""

    def __init__(self) -> None:
        self._tool: dict[int, dict[str, Counter[str]]] = {}
        self._pair: dict[int, dict[str, dict[str, Counter[str]]]] = {}

    def add(self, sid: int, tools: Sequence[str], conversation: str, sign: int) -> None:
        if sid < 0 or not tools:
            return
        per_tool, per_pair = self._tool.setdefault(sid, {}), self._pair.setdefault(sid, {})
        for name in tools:
            _bump(per_tool.setdefault(name, Counter()), conversation, sign)
            partners = per_pair.setdefault(name, {})
            for other in tools:
                if other != name:
                    _bump(partners.setdefault(other, Counter()), conversation, sign)

    def knows(self, sid: int, anchor: str, conversation: str | None, min_conversations: int) -> bool:
        called = self._tool.get(sid, {}).get(anchor)
        if not called:
            return False
        return len(called) >= min_conversations or (conversation is not None and conversation in called)

    def companions(
        self, sid: int, anchors: Sequence[str], conversation: str | None, min_share: float, min_conversations: int
    ) -> list[Companion]:
        found: dict[str, Companion] = {}
        tools, pairs = self._tool.get(sid, {}), self._pair.get(sid, {})
        for anchor in anchors:
            with_anchor = tools.get(anchor)
            if not with_anchor:
                continue
            for name, together in pairs.get(anchor, {}).items():
                candidates = []
                if conversation is not None and conversation in together:  # its own earlier requests steer it
                    candidates.append(
                        Companion(name, anchor, together[conversation], with_anchor[conversation], own=True)
                    )
                if len(together) >= min_conversations:  # other conversations: never one alone
                    candidates.append(Companion(name, anchor, len(together), len(with_anchor)))
                for companion in candidates:
                    if companion.share >= min_share and (name not in found or companion.share > found[name].share):
                        found[name] = companion
        return sorted(found.values(), key=lambda c: (-c.share, -c.together, c.name))


def _bump(counter: Counter[str], key: str, sign: int) -> None:
    counter[key] += sign
    if counter[key] <= 0:
        del counter[key]
