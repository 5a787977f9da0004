"""Which tools are used together: learned from the turns of the conversations the filter sees.

A request often needs tools its words never name: starting a car's engine needs the brake pressed
and the doors locked first, moving a file needs a change of directory. Those pairs show up in past
turns. Every completed turn (a user request and the functions called for it) counts once — turns
are recognised by content, so a conversation seen again on every request of its agent loop, or
twice by two replicas of a step, adds nothing new. Memory is bounded (``max_turns`` remembered).
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sk_toolfilter.selection.turns import Turn

MAX_TOOLS_PER_TURN = 12  # a turn of many calls (a bulk delete) says little about pairs


@dataclass(frozen=True)
class Companion:
    """A tool used together with `anchor` in `together` of the `anchor_turns` turns that used `anchor`."""

    name: str
    anchor: str
    together: int
    anchor_turns: int

    @property
    def share(self) -> float:
        return self.together / self.anchor_turns


class CoUsage:
    """Counts, per pair of tools, the completed turns that used both (thread-safe, bounded)."""

    def __init__(self, max_turns: int = 100_000) -> None:
        self.max_turns = max_turns
        self._seen: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._turns: Counter[str] = Counter()
        self._pairs: dict[str, Counter[str]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    def learn(self, turns: Iterable[Turn]) -> int:
        """Count every turn not seen before; returns how many were new."""
        added = 0
        with self._lock:
            for turn in turns:
                calls = tuple(turn.calls[:MAX_TOOLS_PER_TURN])
                if not calls:
                    continue
                key = hashlib.sha256("\x00".join((turn.request, *calls)).encode()).hexdigest()
                if key in self._seen:
                    self._seen.move_to_end(key)
                    continue
                self._seen[key] = calls
                self._count(calls, +1)
                added += 1
                while len(self._seen) > self.max_turns:
                    _, old = self._seen.popitem(last=False)
                    self._count(old, -1)
        return added

    def _count(self, calls: Sequence[str], sign: int) -> None:
        for name in calls:
            self._turns[name] += sign
            partners = self._pairs.setdefault(name, Counter())
            for other in calls:
                if other != name:
                    partners[other] += sign

    def companions(self, anchors: Sequence[str], *, min_share: float, min_turns: int) -> list[Companion]:
        """Tools used with any of `anchors` in at least `min_share` of that anchor's turns (and
        `min_turns` turns), best share first; each tool once, with its strongest anchor."""
        found: dict[str, Companion] = {}
        with self._lock:
            for anchor in anchors:
                anchor_turns = self._turns[anchor]
                if anchor_turns < min_turns:
                    continue
                for name, together in self._pairs.get(anchor, Counter()).items():
                    companion = Companion(name, anchor, together, anchor_turns)
                    if together < min_turns or companion.share < min_share:
                        continue
                    if name not in found or companion.share > found[name].share:
                        found[name] = companion
        return sorted(found.values(), key=lambda c: (-c.share, -c.together, c.name))
