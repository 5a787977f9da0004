"""Which tools are used together: learned from the turns of the conversations the filter sees.

A request often needs tools its words never name: starting a car's engine needs the brake pressed
and the doors locked first, moving a file needs a change of directory. Those pairs show up in past
turns. Every completed turn (a user request and the functions called for it) counts once — turns
are recognised by content, so a conversation seen again on every request of its agent loop, or
twice by two replicas of a step, adds nothing new. Memory is bounded (``max_turns`` remembered).

With ``agent_loop.co_usage_file`` what was learned survives a restart (:class:`CoUsageFile`): the
file holds tool names and one fingerprint per turn, never conversation text.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.basics.input_files import read_bounded_text
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.retrieval.cache import write_atomically
from sk_toolfilter.selection.turns import Turn
from sk_toolfilter.store.synced_file import SyncedFile

logger = library_logger(__name__)

MAX_TOOLS_PER_TURN = 12  # a turn of many calls (a bulk delete) says little about pairs
FILE_FORMAT = 1


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

    def count(self, turns: Iterable[Turn]) -> int:
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
                self._add(key, calls)
                added += 1
        return added

    def clear(self) -> None:
        """Forget every turn (what a new deployment knows)."""
        with self._lock:
            self._seen.clear()
            self._turns.clear()
            self._pairs.clear()

    def turns(self) -> list[tuple[str, tuple[str, ...]]]:
        """The remembered turns as (fingerprint, calls), oldest first."""
        with self._lock:
            return list(self._seen.items())

    def restore(self, turns: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Add turns saved by :meth:`turns` (fingerprints already known are skipped)."""
        with self._lock:
            for key, calls in turns:
                if key not in self._seen:
                    self._add(key, tuple(calls[:MAX_TOOLS_PER_TURN]))

    def _add(self, key: str, calls: tuple[str, ...]) -> None:
        """Remember a new turn and count its pairs; the oldest turns leave beyond ``max_turns``."""
        self._seen[key] = calls
        self._count(calls, +1)
        while len(self._seen) > self.max_turns:
            _, old = self._seen.popitem(last=False)
            self._count(old, -1)

    def _count(self, calls: Sequence[str], sign: int) -> None:
        for name in calls:
            self._turns[name] += sign
            partners = self._pairs.setdefault(name, Counter())
            for other in calls:
                if other != name:
                    partners[other] += sign

    def turns_with(self, name: str) -> int:
        """How many remembered turns called `name`."""
        with self._lock:
            return self._turns[name]

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


class CoUsageFile(SyncedFile[CoUsage]):
    """Keeps a :class:`CoUsage` in a JSON file: read at start, written (atomically, off the event
    loop) at most every `every_seconds` after it learned something, and on :meth:`flush`.

    Several processes may share the file (replicas of one agent): every write locks it, reads what
    the others wrote, merges it with this process's turns (and learns theirs), and replaces it, so
    no replica's turns are lost. A missing file starts empty; an unreadable or damaged one too, with
    one warning (it is replaced at the next write). A file that cannot be written gives one warning;
    learning goes on in memory.
    """

    what = "co-usage file"

    def __init__(self, path: str | Path, every_seconds: float = 30.0) -> None:
        super().__init__(path, every_seconds)
        self._dirty = False

    def load_into(self, co_usage: CoUsage) -> int:
        """Restore the saved turns into `co_usage`; returns how many were read."""
        turns = self._read("starting with nothing learned (the file is replaced at the next write)")
        co_usage.restore(turns)
        return len(turns)

    def _read(self, consequence: str) -> list[tuple[str, list[str]]]:
        """The turns in the file; [] when it is missing, or (one warning) unreadable or damaged."""
        try:
            raw = json.loads(read_bounded_text(self.path, "co-usage file"))
            if not isinstance(raw, dict) or raw.get("format") != FILE_FORMAT:
                raise ValueError(f"not a co-usage file of format {FILE_FORMAT}")
            return [(str(key), [str(c) for c in calls]) for key, calls in raw["turns"]]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, ConfigError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else str(exc) or type(exc).__name__
            if isinstance(exc, RecursionError):
                reason = "nested too deeply"
            self._warn_once("read", f"cannot be read ({reason}); {consequence}")
            return []

    def changed(self, co_usage: CoUsage) -> None:
        """`co_usage` learned something: write it when `every_seconds` passed since the last write."""
        self._dirty = True
        super().changed(co_usage)

    def _pending(self, co_usage: CoUsage) -> bool:
        return self._dirty

    def _merge_and_write(self, co_usage: CoUsage) -> bool:
        self._dirty = False  # a turn learned while this writes marks it again: written next time
        turns = co_usage.turns()
        # Merge with what other processes wrote since: their turns first (older), then ours.
        ours = {key for key, _ in turns}
        theirs = [(k, c) for k, c in self._read("it is replaced") if k not in ours]
        co_usage.restore(theirs)  # this replica learns what the others saw
        merged = [*[(k, tuple(c)) for k, c in theirs], *turns][-co_usage.max_turns :]
        document = {"format": FILE_FORMAT, "turns": [[key, list(calls)] for key, calls in merged]}
        text = json.dumps(document, separators=(",", ":")).encode("utf-8")
        write_atomically(self.path, lambda f: f.write(text))
        return True
