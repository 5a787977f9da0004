"""The remembered rows and their bounds: slots, eviction per scope, age, forget, the rows a file or
table keeps. What the rows are read for is :mod:`~sk_toolfilter.retrieval.memory.memory`."""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from sk_toolfilter.retrieval.memory.companions import TogetherCounts
from sk_toolfilter.retrieval.memory.rule import (
    DEFAULT_RULE,
    MAX_CLOCK_SKEW_SECONDS,
    MAX_TOOLS_PER_REQUEST,
    ROW_OVERHEAD_BYTES,
    SHARED_SCOPE,
    LearningRule,
    MemoryRow,
    unit_row,
)
from sk_toolfilter.retrieval.memory.trust import ToolVectors
from sk_toolfilter.retrieval.scoring import quantize_one


class RememberedRows:
    """Past requests (unit vectors) and the tools each called, bounded; thread-safe.

    `dims` is fixed by the first vector learned (or given); a vector of another size is refused
    (:meth:`learn` returns False), as is one that is not finite.

    Rows live in slots: a new row takes a free slot or, at capacity, the oldest row's (found with a
    heap), so a full memory learns in O(log n) and never copies its arrays. Trust is re-estimated in a
    background thread when 5 % of the rows are new; a request reads the last estimate.
    """

    def __init__(
        self,
        *,
        max_requests: int = 20_000,
        max_bytes: int = 64 * 2**20,
        max_age_days: float | None = 180.0,
        half_life_days: float | None = 30.0,
        rule: LearningRule = DEFAULT_RULE,
        clock: Callable[[], float] = time.time,
        background_trust: bool = True,
    ) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.max_age_days = max_age_days
        self.half_life_days = half_life_days
        self.rule = rule
        self._clock = clock
        self.background_trust = background_trust
        """False: a stale trust is re-estimated in the request that reads it (a replay: the same figures every run)."""
        self._lock = threading.Lock()
        self._trust_lock = threading.Lock()  # one estimate at a time
        self._estimating: threading.Thread | None = None
        self.clamped = 0
        """Rows dated in the future (beyond :data:`MAX_CLOCK_SKEW_SECONDS`) that were dated now instead."""
        self.forgotten_before = 0.0
        """The time of the last wipe this memory knows (``forget``): no row dated at or before it is taken."""
        self._clear()

    def _clear(self) -> None:
        self._empty_slots(0)
        self._count = 0
        self.name_bytes = 0
        self._row_of: dict[str, int] = {}
        self._stamp = 0
        self._scopes: dict[str, int] = {}
        self._trust: float | None = None  # over every scope (what `learned` and `learn` print)
        self._scope_trust: dict[int, float] = {}  # per scope id: what a request of that scope reads
        self._vectors: dict[int, ToolVectors] = {}  # per scope id: each tool's usage vector (with the trust)
        self._added_since_trust = 0
        self._together = TogetherCounts()
        self.version = 0
        """Grows with every change (the file and table write when it moved)."""

    def _empty_slots(self, dims: int) -> None:
        self._codes = np.zeros((0, dims), dtype=np.int8)  # int8 codes, one scale per row (retrieval.scoring)
        self._scales = np.zeros(0, dtype=np.float32)
        self._times = np.zeros(0, dtype=np.float64)
        self._stamps = np.zeros(0, dtype=np.int64)
        self._scope_ids = np.zeros(0, dtype=np.int32)  # -1: a free slot
        self._tools: list[tuple[str, ...]] = []
        self._keys: list[str] = []
        self._conversations: list[str] = []
        self._high = 0  # slots in use or freed (rows live in [0, _high))
        self._free: list[int] = []
        self._oldest: list[tuple[float, int, int]] = []  # heap of (time, stamp, slot); stale entries skipped
        self._oldest_in: dict[int, list[tuple[float, int, int]]] = {}  # the same, per scope id (eviction)
        self._scope_rows: Counter[int] = Counter()
        self._scope_names: Counter[int] = Counter()  # name bytes per scope id

    # -- size ----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    @property
    def dims(self) -> int:
        return int(self._codes.shape[1])

    @property
    def nbytes(self) -> int:
        """What the remembered rows cost (vectors, names, bookkeeping); at most ``max_bytes`` after every learn."""
        return self._count * (self.dims + 4 + ROW_OVERHEAD_BYTES) + self.name_bytes

    def capacity(self, dims: int) -> int:
        """The most rows kept at `dims` dimensions: ``max_requests`` and ``max_bytes`` both hold (names
        cost more: fewer rows are kept)."""
        return max(1, min(self.max_requests, self.max_bytes // (dims + 4 + ROW_OVERHEAD_BYTES)))

    def scopes(self) -> dict[str, int]:
        """How many rows each scope holds (``""``: shared)."""
        with self._lock:
            ids = self._scope_ids[: self._high]
            names = {i: s for s, i in self._scopes.items()}
            found, counts = np.unique(ids[ids >= 0], return_counts=True)
            return {names[int(i)]: int(c) for i, c in zip(found, counts, strict=True)}

    # -- learning ------------------------------------------------------------------------------------

    def learn(
        self,
        vector: np.ndarray,
        tools: Sequence[str],
        key: str,
        at: float | None = None,
        *,
        conversation: str | None = None,
        scope: str = SHARED_SCOPE,
    ) -> bool:
        """Remember that the request `key` (a fingerprint, never text) with `vector` called `tools`, in
        `conversation` (default: its own) and `scope`.

        The same `key` again replaces its row (its newest tools, its newest time): a request repeated
        a thousand times weighs what it weighs once. A time later than now (plus a small skew) is
        dated now. Returns False when nothing was learned (no tools, a vector of the wrong size or not
        finite, a time older than ``max_age_days``, a row larger than ``max_bytes`` alone).
        """
        calls = tuple(dict.fromkeys(t for t in tools if t))[:MAX_TOOLS_PER_REQUEST]
        row = unit_row(vector)
        if not calls or row is None:
            return False
        now = self._clock()
        when = now if at is None else float(at)
        if not math.isfinite(when) or self._expired(when, now):
            return False
        if when > now + MAX_CLOCK_SKEW_SECONDS:
            when = now
            self.clamped += 1
        if when <= self.forgotten_before:
            return False  # learned before a wipe: never comes back (from a file, a table or a replica)
        with self._lock:
            if self._count and row.shape[0] != self.dims:
                return False
            self._drop_expired(now)
            if not self._put(row, calls, key, when, conversation or key, scope):
                return False
            self.version += 1
        return True

    def _put(
        self, row: np.ndarray, calls: tuple[str, ...], key: str, when: float, conversation: str, scope: str
    ) -> bool:
        names = name_bytes(calls)
        row_bytes = row.shape[0] + 4 + ROW_OVERHEAD_BYTES + names  # (the caller checked the dimensions)
        if row_bytes > self.max_bytes:
            return False  # a row larger than the whole memory: refused, the row it would replace kept
        existing = self._row_of.get(key)
        if existing is not None:
            if when < self._times[existing]:
                return False  # an older copy of a row already known
            self._free_slot(existing)
        sid = self._scopes.setdefault(scope, len(self._scopes))
        while self._count and (self._count >= self.max_requests or self.nbytes + row_bytes > self.max_bytes):
            over_bytes = self.nbytes + row_bytes > self.max_bytes
            self._free_slot(self._pop_oldest(self._evicted_scope(sid, row_bytes if over_bytes else None)))
        if self._count == 0 and self._codes.shape[1] != row.shape[0]:
            self._empty_slots(row.shape[0])
        slot = self._take_slot()
        codes, scale = quantize_one(row)
        self._codes[slot], self._scales[slot], self._times[slot] = codes[0], scale, when
        self._scope_ids[slot] = sid
        self._stamp += 1
        self._stamps[slot] = self._stamp
        self._tools[slot], self._keys[slot], self._conversations[slot] = calls, key, conversation
        self._together.add(sid, calls, conversation, +1)
        heapq.heappush(self._oldest, (when, self._stamp, slot))
        heapq.heappush(self._oldest_in.setdefault(sid, []), (when, self._stamp, slot))
        if len(self._oldest) > 2 * self._high + 64:  # replaced rows left stale entries: rebuild (amortized O(1))
            self._rebuild_heaps()
        self._row_of[key] = slot
        self.name_bytes += names
        self._scope_rows[sid] += 1
        self._scope_names[sid] += names
        self._count += 1
        self._added_since_trust += existing is None
        return True

    def _take_slot(self) -> int:
        if self._free:
            return self._free.pop()
        if self._high == self._codes.shape[0]:
            grown = max(16, min(self.capacity(self.dims), 2 * self._high))
            grown = max(grown, self._high + 1)
            self._codes = _resized(self._codes, grown)
            self._scales = np.resize(self._scales, grown)
            self._times = np.resize(self._times, grown)
            self._stamps = np.resize(self._stamps, grown)
            self._scope_ids = np.resize(self._scope_ids, grown)
            more = grown - len(self._tools)
            self._tools.extend([()] * more)
            self._keys.extend([""] * more)
            self._conversations.extend([""] * more)
        self._high += 1
        return self._high - 1

    def _evicted_scope(self, incoming: int, row_bytes: int | None) -> int:
        """The scope a full memory evicts from to take a row of scope `incoming`: the one holding the most
        rows (`row_bytes` given: the most bytes), the incoming row counted in its own — so a scope's rows
        go only to its own learning or to a scope that holds fewer; a tenant cannot evict another's rows
        by learning more than it holds (ties: the incoming row's own scope)."""
        per_row = self.dims + 4 + ROW_OVERHEAD_BYTES

        def held(sid: int) -> tuple[int, int]:
            rows = self._scope_rows[sid] + (sid == incoming)
            size = rows * per_row + self._scope_names[sid] + (row_bytes or 0) * (sid == incoming)
            return (size if row_bytes is not None else rows), sid == incoming

        return max((sid for sid, rows in self._scope_rows.items() if rows > 0), key=held)

    def _pop_oldest(self, sid: int) -> int:
        """The slot of the oldest live row of scope `sid` (ties: the first learned)."""
        heap = self._oldest_in[sid]
        while True:
            _, stamp, slot = heapq.heappop(heap)
            if self._scope_ids[slot] == sid and self._stamps[slot] == stamp:
                return slot

    def _rebuild_heaps(self) -> None:
        """The oldest-first heaps from the live rows alone (stale entries of replaced rows dropped)."""
        live = self._live_slots()
        self._oldest = [(float(self._times[s]), int(self._stamps[s]), s) for s in live]
        heapq.heapify(self._oldest)
        self._oldest_in = {}
        for entry in self._oldest:
            self._oldest_in.setdefault(int(self._scope_ids[entry[2]]), []).append(entry)
        for heap in self._oldest_in.values():
            heapq.heapify(heap)

    def _free_slot(self, slot: int) -> None:
        sid = int(self._scope_ids[slot])
        self._together.add(sid, self._tools[slot], self._conversations[slot], -1)
        del self._row_of[self._keys[slot]]
        self.name_bytes -= name_bytes(self._tools[slot])
        self._scope_rows[sid] -= 1
        self._scope_names[sid] -= name_bytes(self._tools[slot])
        self._scope_ids[slot], self._scales[slot], self._stamps[slot] = -1, 0.0, -1
        self._tools[slot], self._keys[slot], self._conversations[slot] = (), "", ""
        self._free.append(slot)
        self._count -= 1

    def _live_slots(self) -> list[int]:
        return np.flatnonzero(self._scope_ids[: self._high] >= 0).tolist()

    def keys(self) -> list[str]:
        """The fingerprints of the remembered requests."""
        with self._lock:
            return list(self._row_of)

    def knows(self, key: str, tools: Sequence[str]) -> bool:
        """Whether the request `key` is remembered with these `tools` already (nothing new to learn)."""
        with self._lock:
            row = self._row_of.get(key)
            return row is not None and self._tools[row] == tuple(dict.fromkeys(tools))[:MAX_TOOLS_PER_REQUEST]

    def forget_tools(self, keep: Callable[[str], bool]) -> int:
        """Drop every tool for which `keep` is False from every row (a row left without tools goes);
        returns how many rows changed. Tools removed from the catalog are forgotten this way."""
        with self._lock:
            changed = 0
            for i in self._live_slots():
                kept = tuple(t for t in self._tools[i] if keep(t))
                if kept != self._tools[i]:
                    changed += 1
                    self.name_bytes -= name_bytes(self._tools[i]) - name_bytes(kept)
                    sid, conversation = int(self._scope_ids[i]), self._conversations[i]
                    self._scope_names[sid] -= name_bytes(self._tools[i]) - name_bytes(kept)
                    self._together.add(sid, self._tools[i], conversation, -1)
                    self._together.add(sid, kept, conversation, +1)
                    self._tools[i] = kept
                    if not kept:
                        self._free_slot(i)
            if changed:
                self.version += 1
                self._trust = None
            return changed

    def forget_before(self, when: float) -> int:
        """Forget every row dated at or before `when` (a wipe made then), and take none such from now on;
        how many went."""
        with self._lock:
            if when <= self.forgotten_before:
                return 0
            self.forgotten_before = when
            gone = [i for i in self._live_slots() if self._times[i] <= when]
            for i in gone:
                self._free_slot(i)
            if gone:
                self.version += 1
            return len(gone)

    def clear(self) -> None:
        """Forget everything (what a new deployment knows)."""
        with self._lock:
            version = self.version
            self._clear()
            self.version = version + 1

    def rows(self) -> list[MemoryRow]:
        """Every row, oldest first: what a file or table keeps."""
        with self._lock:
            live = np.asarray(self._live_slots(), dtype=np.int64)
            order = live[np.argsort(self._times[live], kind="stable")] if len(live) else live
            names = {i: s for s, i in self._scopes.items()}
            return [
                MemoryRow(
                    self._keys[i],
                    self._vector(i),
                    self._tools[i],
                    float(self._times[i]),
                    self._conversations[i],
                    names[int(self._scope_ids[i])],
                )
                for i in order.tolist()
            ]

    def _vector(self, row: int) -> np.ndarray:
        """A remembered request's vector (dequantized: within ~1e-3 of what was learned)."""
        return self._codes[row].astype(np.float32) * self._scales[row]

    def restore(self, rows: Iterable[MemoryRow]) -> int:
        """Learn rows saved by :meth:`rows` (a newer row of a known key wins); returns how many were taken."""
        return sum(
            self.learn(row.vector, row.tools, row.key, row.at, conversation=row.conversation or None, scope=row.scope)
            for row in rows
        )

    def _expired(self, when: float, now: float) -> bool:
        return self.max_age_days is not None and now - when > self.max_age_days * 86_400

    def _drop_expired(self, now: float) -> None:
        """The oldest rows leave while they are past ``max_age_days`` (a heap pop each: no scan)."""
        if self.max_age_days is None:
            return
        while self._count:
            when, stamp, slot = self._oldest[0]
            if self._scope_ids[slot] < 0 or self._stamps[slot] != stamp:
                heapq.heappop(self._oldest)  # stale: the row was replaced or removed
            elif self._expired(when, now):
                heapq.heappop(self._oldest)
                self._free_slot(slot)
            else:
                return


def name_bytes(tools: Iterable[str]) -> int:
    return sum(len(n.encode()) for n in tools)


def _resized(vectors: np.ndarray, rows: int) -> np.ndarray:
    grown = np.zeros((rows, vectors.shape[1]), dtype=vectors.dtype)
    grown[: min(rows, vectors.shape[0])] = vectors[:rows]
    return grown
